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

describe('prepare: a step that reuses what another builds', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pips-prepare-order-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  // A build script as prepare runs them: progress on stderr, the result as the last line of stdout.
  const script = (name: string, body: string) => {
    const file = join(dir, `${name}.sh`);
    writeFileSync(file, `echo "${name} working" >&2\n${body}\n`);
    return file;
  };
  const run = async (base: string) => {
    const lines: string[] = [];
    const steps: PrepareStep[] = [
      { id: 'base', what: 'the base build', script: script('base', base) },
      { id: 'own', what: 'an unrelated background build', script: script('own', 'echo own'), background: true },
      { id: 'reuser', what: 'a build reusing the base', script: script('reuser', 'echo reuser'), background: true, after: 'base' },
    ];
    const ok = await prepare((l) => lines.push(l), steps);
    return { ok, at: (re: RegExp) => lines.findIndex((l) => re.test(l)), lines };
  };

  it("starts only once that step is ready, while the chain's other steps need not wait", async () => {
    const r = await run('sleep 0.5; echo base');
    assert.equal(r.ok, true);
    const baseReady = r.at(/^prepare: \[base\] ready/);
    assert.ok(baseReady >= 0 && r.at(/^prepare: \[own\] ready/) < baseReady, r.lines.join('\n'));
    assert.ok(r.at(/^prepare: a build reusing the base$/) > baseReady, r.lines.join('\n'));
    assert.ok(r.at(/^prepare: \[reuser\] ready/) > baseReady);
  });

  it('is not built when that step fails, and says why', async () => {
    const r = await run('exit 1');
    assert.equal(r.ok, false);
    assert.ok(r.at(/^prepare: \[base\] FAILED/) >= 0);
    assert.equal(r.at(/^prepare: a build reusing the base$/), -1, 'its script never ran');
    assert.ok(r.at(/^prepare: \[reuser\] not built: it reuses what \[base\] builds, and that step failed$/) >= 0, r.lines.join('\n'));
  });
});
