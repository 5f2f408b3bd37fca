import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { inScratch } from '../test/scratch.ts';
import { bundle, controllerEntries, renamedOwnClasses } from './bundle.ts';
import { NOTICES_FILE, noticesPackageIds, SBOM_FILE, sbomPackageIds } from './third-party-notices.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** The package lists of a bundle's two files, read back from disk. */
function lists(dir: string): { notices: string[]; sbom: string[] } {
  return {
    notices: [...noticesPackageIds(readFileSync(join(dir, NOTICES_FILE), 'utf8'))].sort(),
    sbom: [...sbomPackageIds(JSON.parse(readFileSync(join(dir, SBOM_FILE), 'utf8')) as object)].sort(),
  };
}

describe("the bundle's SBOM and third-party notices", () => {
  it('name the same packages: scoped, nested in two versions, without one whose code tree-shaking removed', () =>
    inScratch('bundle-', async (root, file) => {
      const pkg = (dir: string, manifest: object, code: string): void => {
        file(`${dir}/package.json`, JSON.stringify({ main: 'index.js', license: 'MIT', ...manifest }));
        file(`${dir}/index.js`, code);
        file(`${dir}/LICENSE`, `licence of ${dir}\n`);
      };
      file('package.json', JSON.stringify({ name: 'fixture', version: '1.0.0', type: 'module' }));
      file(
        'src/main.js',
        "import used from 'used'; import { b } from '@s/scoped'; import { unused } from 'shaken'; console.log(used(), b, dupOne());\nimport dupOne from 'dup';\n",
      );
      pkg('node_modules/used', { name: 'used', version: '1.2.3' }, "const dup = require('dup'); module.exports = () => dup() + 1;");
      pkg('node_modules/used/node_modules/dup', { name: 'dup', version: '2.0.0' }, 'module.exports = () => 2;');
      pkg('node_modules/dup', { name: 'dup', version: '1.0.0' }, 'module.exports = () => 1;');
      pkg('node_modules/@s/scoped', { name: '@s/scoped', version: '0.1.0', type: 'module' }, 'export const b = 42;');
      pkg('node_modules/shaken', { name: 'shaken', version: '9.9.9', type: 'module', sideEffects: false }, 'export const unused = 7;');

      await bundle({ entryPoints: { main: join(root, 'src/main.js') }, ownDir: join(root, 'src'), outdir: join(root, 'dist/cli'), required: ['used'] });
      const { notices, sbom } = lists(join(root, 'dist'));
      assert.deepEqual(sbom, ['@s/scoped@0.1.0', 'dup@1.0.0', 'dup@2.0.0', 'used@1.2.3']);
      assert.deepEqual(notices, sbom);
      const bom = JSON.parse(readFileSync(join(root, 'dist', SBOM_FILE), 'utf8')) as { bomFormat: string; metadata: { component: { name: string } } };
      assert.equal(bom.bomFormat, 'CycloneDX');
      assert.equal(bom.metadata.component.name, 'fixture', 'the subject is the project, not one of its packages');
      await assert.rejects(
        bundle({ entryPoints: { main: join(root, 'src/main.js') }, ownDir: join(root, 'src'), outdir: join(root, 'dist/cli'), required: ['shaken'] }),
        /dependencies not in the bundle .*: shaken/,
      );
    }));

  it('name the same packages for the controller itself (its sources bundled as the build bundles them)', () =>
    inScratch('bundle-src-', async (out) => {
      const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
      await bundle({
        entryPoints: controllerEntries(join(ROOT, 'src'), '.ts'),
        ownDir: join(ROOT, 'src'),
        outdir: join(out, 'cli'),
        required: Object.keys(manifest.dependencies),
      });
      const { notices, sbom } = lists(out);
      assert.deepEqual(sbom, notices);
      for (const name of Object.keys(manifest.dependencies))
        assert.ok(
          sbom.some((id) => id.startsWith(`${name}@`)),
          `${name} is listed`,
        );
    }));
});

describe('the names of the bundle', () => {
  it("refuses to rename one of the project's classes, whose name is the `type` of its errors in the logs", () =>
    inScratch('bundle-names-', async (root, file) => {
      file('package.json', JSON.stringify({ name: 'fixture', version: '1.0.0', type: 'module' }));
      file('src/a.js', 'export class Clash extends Error {}\n');
      file('src/b.js', 'export class Clash extends Error {}\n');
      file(
        'src/main.js',
        "import { Clash as A } from './a.js'; import { Clash as B } from './b.js'; console.log(new A().constructor.name, new B().constructor.name);\n",
      );
      file('src/alone.js', 'class Single extends Error {}\nconsole.log(new Single().constructor.name);\n');
      const opts = { ownDir: join(root, 'src'), outdir: join(root, 'dist/cli') };
      await assert.rejects(bundle({ ...opts, entryPoints: { main: join(root, 'src/main.js') } }), /classes of the project renamed in the bundle .*: Clash/);
      await bundle({ ...opts, entryPoints: { main: join(root, 'src/alone.js') } });
      assert.match(readFileSync(join(root, 'dist/cli/main.js'), 'utf8'), /\bSingle\s*=\s*class extends Error/);
    }));

  it('tells a renamed class from one whose own name ends in digits', () => {
    assert.deepEqual(renamedOwnClasses(['class Clash {}', 'class Ipv4 {}'], ['class Clash2 extends Error {}', 'class Ipv4 {}']), ['Clash']);
    assert.deepEqual(renamedOwnClasses(['class Ipv4 {}', 'class Ipv {}'], ['class Ipv4 {}', 'class Ipv {}']), []);
    assert.deepEqual(renamedOwnClasses(['class Ipv4Address {}'], ['var Ipv4Address = class Ipv4Address {}']), []);
    assert.deepEqual(renamedOwnClasses(['class Schema {}'], ['var Schema = class Schema2 {}']), ['Schema']);
    assert.deepEqual(renamedOwnClasses(['class Clash {}'], ['var Clash = class {};\nvar Clash2 = class extends Error {};']), ['Clash']);
  });
});
