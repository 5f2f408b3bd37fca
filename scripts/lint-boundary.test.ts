// The boundary rule of biome.jsonc, checked against the real configuration: a module of src/kube that imports
// another folder of the project fails `npm run lint`; a kube-internal or package import does not, nor does a test
// of src/kube (tests may use the project's test helpers).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { inScratch } from '../test/scratch.ts';

const ROOT = resolve(import.meta.dirname, '..');
const BIOME = join(ROOT, 'node_modules', '.bin', 'biome');

/** `biome lint` of one file at `path` (relative to a copy of the repository's configuration): exit code and output. */
function lint(path: string, source: string): Promise<{ code: number | null; output: string }> {
  return inScratch('persistent-ips-lint-', (root, file) => {
    file('biome.jsonc', readFileSync(join(ROOT, 'biome.jsonc'), 'utf8'));
    file(path, source);
    // No git repository in the copy: the configuration's vcs settings are turned off for this run.
    const res = spawnSync(BIOME, ['lint', '--vcs-enabled=false', '--colors=off', path], { cwd: root, encoding: 'utf8' });
    return { code: res.status, output: `${res.stdout}${res.stderr}` };
  });
}

describe('lint: src/kube imports nothing else of the project', () => {
  it('fails on a src/kube module that imports another folder', async () => {
    const { code, output } = await lint('src/kube/leaky.ts', "import { systemClock } from '../queue/clock.ts';\nexport const clock = systemClock;\n");
    assert.notEqual(code, 0, output);
    assert.match(output, /lint\/style\/noRestrictedImports/);
    assert.match(output, /src\/kube is a leaf/);
  });

  it('passes imports inside src/kube and of packages', async () => {
    const { code, output } = await lint(
      'src/kube/fine.ts',
      "import { load } from 'js-yaml';\nimport { resources } from './resources.ts';\nexport const x = [load, resources];\n",
    );
    assert.equal(code, 0, output);
  });

  it('leaves the tests of src/kube and other folders alone', async () => {
    for (const path of ['src/kube/leaky.test.ts', 'src/sources/other.ts']) {
      const { code, output } = await lint(path, "import { systemClock } from '../queue/clock.ts';\nexport const clock = systemClock;\n");
      assert.equal(code, 0, `${path}: ${output}`);
    }
  });
});
