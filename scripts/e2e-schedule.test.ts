import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { spawn, spawnSync } from 'node:child_process';
import { getPriority } from 'node:os';
import { lowerGroupPriority, Prepared, stepsNeededBy } from './e2e-schedule.ts';

const ROOT = resolve(import.meta.dirname, '..');
const needs = (file: string) => stepsNeededBy(join(ROOT, file));

describe('e2e files and the prepare steps they wait for', () => {
  it('a file that runs only the control plane waits for the control plane alone', () => {
    assert.deepEqual(needs('e2e/cli/misuse.test.ts'), ['controlplane']);
  });

  it('a file whose world runs virt-controller waits for it, found through the world it imports; for ovnkube only when it asks for OVN-K', () => {
    assert.deepEqual(needs('e2e/kubevirt/lifecycle.test.ts'), ['controlplane', 'kubevirt', 'ovnkube']);
    assert.deepEqual(needs('e2e/suite/e2e.test.ts'), ['controlplane', 'kubevirt']);
    assert.deepEqual(needs('e2e/operability/webhook.test.ts'), ['controlplane', 'kubevirt']);
  });

  it('the tools a file asks preparedTool for', () => {
    assert.ok(needs('e2e/install/install.test.ts').includes('helm'));
    assert.ok(!needs('e2e/install/install.test.ts').includes('promtool'));
    assert.ok(needs('e2e/operability/prometheus.test.ts').includes('promtool'));
  });

  it('reads which steps are ready or failed from the prepare lines, and wakes whoever waits', async () => {
    const p = new Prepared();
    const woke = p.changed;
    p.line('  [29 s] [controlplane-build] modules ready (29 s)');
    p.line('prepare: [controlplane] ready in 343.0 s: /cache/bin');
    await woke;
    assert.deepEqual([...p.ready], ['controlplane']);
    p.line('prepare: [promtool] FAILED (1) after 3.0 s: e2e/promtool/build.sh');
    assert.equal(p.failed, 'promtool');
    assert.equal(p.finished, false);
    const last = p.changed;
    p.finish();
    await last;
    assert.equal(p.finished, true);
  });

  it('lowers the priority of every process of a group by the same step, keeping their order', async () => {
    // a group of three: the shell, a sleep at its priority, and one already lower (as prepare.ts runs the tool builds)
    const group = spawn('bash', ['-c', 'sleep 30 & nice -n 5 sleep 30 & wait'], { detached: true, stdio: 'ignore' });
    const pgid = group.pid!;
    const mine = getPriority();
    try {
      const members = (): number[] =>
        spawnSync('ps', ['-o', 'pid=,ni=', '-g', String(pgid)], { encoding: 'utf8' })
          .stdout.trim()
          .split('\n')
          .map((l) => Number(l.trim().split(/\s+/)[1]))
          .sort((a, b) => a - b);
      // Until the group is whole: `nice` sets its priority only after bash has forked it, so a loaded machine can show
      // the third process at the shell's priority for a moment.
      let before: number[] = [];
      for (let i = 0; i < 250 && !(before.length === 3 && before[2] === 5); i++) {
        await new Promise((r) => setTimeout(r, 20));
        before = members();
      }
      assert.deepEqual(before, [0, 0, 5]);
      assert.equal(lowerGroupPriority(pgid, 10), undefined);
      assert.deepEqual(members(), [10, 10, 15]);
      assert.equal(lowerGroupPriority(pgid, 10), undefined);
      assert.deepEqual(members(), [19, 19, 19], 'capped at 19');
      assert.equal(getPriority(), mine, 'the caller is not in the group and keeps its priority');
    } finally {
      process.kill(-pgid, 'SIGKILL');
    }
  });
});
