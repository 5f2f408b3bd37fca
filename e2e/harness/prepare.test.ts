// A test file never builds a tool: it asks the prepare step's script (`--check`), and when the tool is not built it
// fails with one line that names the step which builds it.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { type PrepareStep, prepare, preparedTool } from './prepare.ts';

describe('preparedTool: the tools a test runs by name', () => {
  const emptyCache = mkdtempSync(join(tmpdir(), 'pips-empty-cache-'));
  const saved = process.env['PERSISTENT_IPS_CACHE'];
  after(() => {
    if (saved === undefined) delete process.env['PERSISTENT_IPS_CACHE'];
    else process.env['PERSISTENT_IPS_CACHE'] = saved;
    rmSync(emptyCache, { recursive: true, force: true });
  });

  for (const [tool, script] of [
    ['helm', 'scripts/helm/build.sh'],
    ['promtool', 'e2e/promtool/build.sh'],
  ] as const) {
    it(`${tool} not built: one line naming ${script}, and nothing built`, async () => {
      process.env['PERSISTENT_IPS_CACHE'] = emptyCache;
      const t0 = Date.now();
      await assert.rejects(preparedTool(tool), (err: Error) => {
        assert.equal(err.message, `${tool} is not built: run \`npm run test:prepare\` (its step ${script} builds it; \`npm test\` runs that step first)`);
        assert.equal(err.stack, `Error: ${err.message}`, 'the runner prints the stack: it is that one line too');
        return true;
      });
      assert.ok(Date.now() - t0 < 10_000, '--check answers at once');
      assert.deepEqual(readdirSync(emptyCache), [], 'the check writes nothing into the cache');
    });
  }
});

describe('prepare: the steps one after another', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pips-prepare-order-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  // A build script as prepare runs them: progress on stderr, the result as the last line of stdout.
  const step = (id: string, body: string): PrepareStep => {
    const script = join(dir, `${id}.sh`);
    writeFileSync(script, `echo "${id} working" >&2\n${body}\n`);
    return { id, what: `the ${id} build`, script };
  };
  const run = async (first: string) => {
    const lines: string[] = [];
    const ok = await prepare((l) => lines.push(l), [step('first', first), step('second', 'echo second'), step('third', 'echo third')]);
    return { ok, at: (re: RegExp) => lines.findIndex((l) => re.test(l)), lines };
  };

  it('starts each step once the one before it is ready, in their order', async () => {
    const r = await run('sleep 0.5; echo first');
    assert.equal(r.ok, true);
    const order = [/^prepare: \[first\] ready/, /^prepare: the second build$/, /^prepare: \[second\] ready/, /^prepare: the third build$/];
    const at = order.map((re) => r.at(re));
    assert.ok(
      at.every((i, k) => i >= 0 && (k === 0 || i > at[k - 1]!)),
      r.lines.join('\n'),
    );
  });

  it('stops at a step that fails, and names the steps it did not build', async () => {
    const r = await run('exit 1');
    assert.equal(r.ok, false);
    assert.ok(r.at(/^prepare: \[first\] FAILED/) >= 0, r.lines.join('\n'));
    assert.equal(r.at(/^prepare: the second build$/), -1, 'the next script never ran');
    assert.ok(r.at(/^prepare: not built, after \[first\] failed: \[second\] \[third\]$/) >= 0, r.lines.join('\n'));
  });
});
