import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { inScratch } from '../test/scratch.ts';
import {
  authorLine,
  bundledPackages,
  declaredLicence,
  noticesPackageIds,
  noticesText,
  packageDirOf,
  readPackage,
  sbomPackageIds,
  unexpectedRequires,
} from './third-party-notices.ts';

describe('third-party notices', () => {
  it('finds the package folder of a bundled file, scoped, nested, or none for the project', () => {
    const cases: [string, string | undefined][] = [
      ['/r/node_modules/pino/lib/tools.js', '/r/node_modules/pino'],
      ['/r/node_modules/@kubernetes/client-node/dist/index.js', '/r/node_modules/@kubernetes/client-node'],
      ['/r/node_modules/yargs/node_modules/cliui/build/index.cjs', '/r/node_modules/yargs/node_modules/cliui'],
      ['/r/node_modules/@scope/a/node_modules/@other/b/x.js', '/r/node_modules/@scope/a/node_modules/@other/b'],
      ['/r/build/tsc-1/cli/main.js', undefined],
      ['/r/node_modules/@scope', undefined],
    ];
    for (const [file, dir] of cases) assert.equal(packageDirOf(file), dir, file);
  });

  it('reads the declared licence in every form package.json has used', () => {
    assert.equal(declaredLicence({ license: 'MIT' }), 'MIT');
    assert.equal(declaredLicence({ license: { type: 'BSD-3-Clause' } }), 'BSD-3-Clause');
    assert.equal(declaredLicence({ licenses: [{ type: 'MIT' }, { type: 'Apache-2.0' }] }), 'MIT OR Apache-2.0');
    assert.equal(declaredLicence({}), 'UNDECLARED');
  });

  it('names an author given as a string or as an object', () => {
    assert.equal(authorLine('Jane <j@example.org>'), 'Jane <j@example.org>');
    assert.equal(authorLine({ name: 'Jane', email: 'j@example.org' }), 'Jane <j@example.org>');
    assert.equal(authorLine({ name: 'Jane' }), 'Jane');
    assert.equal(authorLine(undefined), undefined);
  });

  it('finds the modules a bundle would still load from outside: neither built-in nor a known optional one', () => {
    const code = [
      'var a = __require("node:fs"), b = __require("util"), c = require("node:sqlite");',
      'try { d = __require("bufferutil"); } catch {}',
      'var e = __require("left-pad"); var f = require(\'@scope/thing\'); var g = myrequire("not-a-require-call");',
    ].join('\n');
    assert.deepEqual(unexpectedRequires(code), ['@scope/thing', 'left-pad']);
    assert.deepEqual(unexpectedRequires('__require("node:crypto"); __require("supports-color")'), []);
  });

  it('reads the packages of one purl type from a CycloneDX BOM, nested ones too, without excluded ones', () => {
    const bom = {
      components: [
        { purl: 'pkg:npm/%40kubernetes/client-node@2.0.1?vcs_url=git%2Bhttps%3A%2F%2Fexample.org', scope: 'required' },
        { purl: 'pkg:npm/ws@8.18.0', components: [{ purl: 'pkg:npm/inner@1.0.0' }] },
        { purl: 'pkg:npm/shaken@9.9.9', scope: 'excluded' },
        { purl: 'pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=arm64&distro=debian-12' },
        { purl: 'pkg:generic/node@24.21.0' },
        { name: 'a file, no purl' },
      ],
    };
    assert.deepEqual([...sbomPackageIds(bom)].sort(), ['@kubernetes/client-node@2.0.1', 'inner@1.0.0', 'ws@8.18.0']);
    assert.deepEqual([...sbomPackageIds(bom, 'deb')], ['debian/libc6@2.36-9+deb12u14']);
    assert.deepEqual([...sbomPackageIds(bom, 'generic')], ['node@24.21.0']);
  });

  it('reads the packages a notices text has a section for', () => {
    const text = noticesText([
      { name: '@a/alpha', version: '2.1.0', declared: 'Apache-2.0', files: [{ name: 'LICENSE', text: 'x@1.0.0 (MIT)' }] },
      { name: 'bare', version: '0.1.0-rc.1', declared: 'ISC', files: [] },
    ]);
    assert.deepEqual([...noticesPackageIds(text)], ['@a/alpha@2.1.0', 'bare@0.1.0-rc.1']);
  });

  it('reads one package per folder, with its licence files, and writes them sorted', () =>
    inScratch('notices-', (root, file) => {
      // What the bundle took from each package: its index.js (and one more file of zeta), besides the project's own.
      const inputs = [join(root, 'node_modules/zeta/lib/other.js'), join(root, 'build/tsc-1/cli/main.js')];
      const pkg = (dir: string, manifest: object, files: Record<string, string>): void => {
        inputs.push(join(root, dir, 'index.js'));
        file(`${dir}/package.json`, JSON.stringify(manifest));
        for (const [name, text] of Object.entries(files)) file(`${dir}/${name}`, text);
      };
      pkg('node_modules/zeta', { name: 'zeta', version: '1.0.0', license: 'MIT' }, { LICENSE: 'MIT licence of zeta\n', 'index.js': '' });
      pkg(
        'node_modules/@a/alpha',
        { name: '@a/alpha', version: '2.1.0', license: 'Apache-2.0' },
        { 'LICENSE.md': 'Apache text', NOTICE: 'alpha notice', 'README.md': 'not a licence' },
      );
      pkg('node_modules/bare', { name: 'bare', version: '0.1.0', license: 'ISC', author: { name: 'A. Author', email: 'a@example.org' } }, {});
      pkg('node_modules/tslibish', { name: 'tslibish', version: '1.0.0', license: '0BSD' }, { 'CopyrightNotice.txt': 'tslib copyright' });
      // The same name and version nested under two packages is one section; another version is another.
      pkg('node_modules/x/node_modules/dup', { name: 'dup', version: '7.2.0', license: 'MIT' }, { license: 'dup licence' });
      pkg('node_modules/y/node_modules/dup', { name: 'dup', version: '7.2.0', license: 'MIT' }, { license: 'dup licence' });
      pkg('node_modules/dup', { name: 'dup', version: '10.0.0', license: 'MIT' }, { license: 'dup licence' });
      pkg('node_modules/free', { name: 'free', version: '3.0.0', license: 'Unlicense' }, { UNLICENSE: 'public domain' });

      const packages = bundledPackages(inputs, join(root, 'build/tsc-1'));
      assert.deepEqual(
        packages.map((p) => p.name).sort(),
        ['@a/alpha', 'bare', 'dup', 'dup', 'dup', 'free', 'tslibish', 'zeta'],
        'each folder once, the project itself not at all',
      );
      assert.throws(
        () => bundledPackages([join(root, 'elsewhere/code.js')], join(root, 'build/tsc-1')),
        /elsewhere\/code\.js is bundled but belongs to no package/,
      );
      assert.deepEqual(
        readPackage(join(root, 'node_modules/@a/alpha')).files.map((f) => f.name),
        ['LICENSE.md', 'NOTICE'],
      );

      const text = noticesText(packages);
      const order = ['@a/alpha@2.1.0 (Apache-2.0)', 'bare@0.1.0 (ISC)', 'zeta@1.0.0 (MIT)'].map((h) => text.indexOf(h));
      assert.ok(
        order.every((at) => at > 0),
        'every package has its heading',
      );
      assert.deepEqual(
        [...order].sort((x, y) => x - y),
        order,
        'sorted by name',
      );
      assert.match(text, /--- LICENSE\n\nMIT licence of zeta\n/);
      assert.match(text, /--- NOTICE\n\nalpha notice\n/);
      assert.match(text, /free@3\.0\.0 \(Unlicense\)\n\n--- UNLICENSE\n\npublic domain\n/);
      assert.match(
        text,
        /bare@0\.1\.0 \(ISC\)\n\nThe package ships no licence file; its package\.json declares ISC; its author, per package\.json: A\. Author <a@example\.org>\./,
      );
      assert.match(text, /tslibish@1\.0\.0 \(0BSD\)\n\n--- CopyrightNotice\.txt\n\ntslib copyright\n/);
      assert.equal(text.match(/^dup@7\.2\.0 /gm)?.length, 1, 'identical nested copies: one section');
      assert.ok(text.indexOf('dup@10.0.0 ') < text.indexOf('dup@7.2.0 '), 'versions in code-point order, whatever the locale');
      assert.doesNotMatch(text, /not a licence/);
      assert.equal(noticesText([...packages].reverse()), text, 'the same packages in any order give the same bytes');
    }));
});
