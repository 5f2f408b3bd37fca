// A test file never builds a tool: it asks the prepare step's script (`--check`), and when the tool is not built it
// fails with one line that names the step which builds it.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { preparedTool } from './prepare.ts';

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
