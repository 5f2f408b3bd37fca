import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { Prepared, stepsNeededBy } from './e2e-schedule.ts';

const ROOT = resolve(import.meta.dirname, '..');
const needs = (file: string) => stepsNeededBy(join(ROOT, file));

describe('e2e files and the prepare steps they wait for', () => {
  it('a file that runs only the control plane waits for the control plane alone', () => {
    assert.deepEqual(needs('e2e/cli/misuse.test.ts'), ['controlplane']);
  });

  it('the real-KubeVirt suite waits for virt-controller and ovnkube, found through the world it imports', () => {
    assert.deepEqual(needs('e2e/kubevirt/lifecycle.test.ts'), ['controlplane', 'kubevirt', 'ovnkube']);
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
});
