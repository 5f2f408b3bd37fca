// The licences of the packages a build bundles into dist/. Once a dependency's code is inside dist/cli/*.js, its
// own LICENSE file no longer travels with it (the image carries no node_modules), so the build writes every bundled
// package's name, version, declared licence and licence files into dist/THIRD-PARTY-NOTICES.txt.

import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, sep } from 'node:path';

export const NOTICES_FILE = 'THIRD-PARTY-NOTICES.txt';
/** The bundle's bill of materials, CycloneDX JSON (scripts/bundle.ts); the name is one SBOM scanners look for. */
export const SBOM_FILE = 'persistent-ips.cdx.json';

/**
 * Licence, copying and notice files, as packages name them (LICENSE, LICENCE.md, license-MIT, UNLICENSE, COPYING,
 * NOTICE, CopyrightNotice.txt).
 */
const LICENCE_FILE = /^(licen[cs]e|unlicen[cs]e|copying|notice|copyright(notice)?)([-._].*)?$/i;

export interface BundledPackage {
  name: string;
  version: string;
  /** package.json's `license` (or the old `licenses` list), as declared. */
  declared: string;
  /** package.json's `author`, as a line (named in the notice of a package that ships no licence file). */
  author?: string;
  /** Licence files found in the package's folder, by file name; empty when it ships none. */
  files: { name: string; text: string }[];
}

/**
 * The folder of the package that holds `file` (an absolute path): the part up to and including the package's name
 * after the last node_modules segment, so a copy nested under another package counts as its own. Undefined for a
 * file of the project itself.
 */
export function packageDirOf(file: string): string | undefined {
  const marker = `${sep}node_modules${sep}`;
  const at = file.lastIndexOf(marker);
  if (at < 0) return undefined;
  const rest = file.slice(at + marker.length).split(sep);
  const nameParts = rest[0]?.startsWith('@') ? 2 : 1;
  if (rest.length <= nameParts) return undefined;
  return file.slice(0, at + marker.length) + rest.slice(0, nameParts).join(sep);
}

export function declaredLicence(pkg: { license?: unknown; licenses?: unknown }): string {
  if (typeof pkg.license === 'string') return pkg.license;
  if (pkg.license && typeof pkg.license === 'object' && typeof (pkg.license as { type?: unknown }).type === 'string')
    return (pkg.license as { type: string }).type;
  if (Array.isArray(pkg.licenses)) {
    const types = pkg.licenses.map((l: { type?: unknown }) => (typeof l?.type === 'string' ? l.type : undefined)).filter((t) => t !== undefined);
    if (types.length > 0) return types.join(' OR ');
  }
  return 'UNDECLARED';
}

export function authorLine(author: unknown): string | undefined {
  if (typeof author === 'string') return author;
  if (author && typeof author === 'object' && typeof (author as { name?: unknown }).name === 'string') {
    const { name, email } = author as { name: string; email?: unknown };
    return typeof email === 'string' ? `${name} <${email}>` : name;
  }
  return undefined;
}

/** Reads one package folder: its package.json and its licence files. */
export function readPackage(dir: string): BundledPackage {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
  if (typeof manifest.name !== 'string' || typeof manifest.version !== 'string')
    throw new Error(`third-party notices: ${join(dir, 'package.json')} has no name or version`);
  const files = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && LICENCE_FILE.test(e.name))
    .map((e) => e.name)
    .sort()
    .map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
  const author = authorLine(manifest.author);
  return { name: manifest.name, version: manifest.version, declared: declaredLicence(manifest), ...(author ? { author } : {}), files };
}

/** Code-point order, the same on every machine and in every locale. */
const byCodePoint = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The notices file: one section per package name and version (identical copies nested under different packages are
 * one section), sorted, so that a build is byte-reproducible.
 */
export function noticesText(packages: readonly BundledPackage[]): string {
  const unique = new Map<string, BundledPackage>();
  for (const p of packages) if (!unique.has(`${p.name}@${p.version}`)) unique.set(`${p.name}@${p.version}`, p);
  const sorted = [...unique.values()].sort((a, b) => byCodePoint(a.name, b.name) || byCodePoint(a.version, b.version));
  const rule = '='.repeat(100);
  const sections = sorted.map((p) => {
    const head = `${p.name}@${p.version} (${p.declared})`;
    if (p.files.length === 0) {
      const by = p.author ? `; its author, per package.json: ${p.author}` : '';
      return `${rule}\n${head}\n\nThe package ships no licence file; its package.json declares ${p.declared}${by}.\n`;
    }
    return `${rule}\n${head}\n${p.files.map((f) => `\n--- ${f.name}\n\n${f.text.trimEnd()}\n`).join('')}`;
  });
  return `persistent-ips bundles the following packages into dist/cli/. Their licences follow.\n\n${sections.join('\n')}`;
}

/** A section's heading in the notices: `name@version (licence)` on the line after the rule. */
const NOTICE_HEADING = /^={100}\n(\S+@\d\S*) \(.*\)$/gm;

/** The packages (name@version) a notices text has a section for. */
export function noticesPackageIds(text: string): Set<string> {
  return new Set([...text.matchAll(NOTICE_HEADING)].map((m) => m[1]!));
}

interface CdxComponent {
  purl?: string;
  scope?: string;
  components?: CdxComponent[];
}

/**
 * The packages of one package-URL type a CycloneDX BOM lists, nested components too, as the purl's decoded
 * `namespace/name@version` (npm: `@scope/name@1.2.3`; deb: `debian/libc6@2.36-9+deb12u14`; generic: `node@24.1.0`),
 * except components of scope `excluded` (the esbuild plugin's mark for a package whose modules tree-shaking removed
 * whole). The BOM's subject (metadata.component) is not one of its components.
 */
export function sbomPackageIds(bom: { components?: CdxComponent[] }, type = 'npm'): Set<string> {
  const prefix = `pkg:${type}/`;
  const ids = new Set<string>();
  const visit = (list: CdxComponent[] | undefined): void => {
    for (const c of list ?? []) {
      if (c.scope !== 'excluded' && c.purl?.startsWith(prefix)) ids.add(decodeURIComponent(c.purl.slice(prefix.length).replace(/[?#].*$/, '')));
      visit(c.components);
    }
  };
  visit(bom.components);
  return ids;
}

/**
 * Every package that has a file among `files` (absolute paths of the inputs that put code into the bundle), read
 * once per folder. A file that is neither the project's own (under `ownDir`) nor inside a package folder would be
 * code of unknown origin: an error, not a silent omission.
 */
export function bundledPackages(files: Iterable<string>, ownDir: string): BundledPackage[] {
  const dirs = new Set<string>();
  for (const file of files) {
    const dir = packageDirOf(file);
    if (dir) dirs.add(dir);
    else if (!file.startsWith(ownDir + sep)) throw new Error(`third-party notices: ${file} is bundled but belongs to no package`);
  }
  return [...dirs].map(readPackage);
}

/**
 * Modules the bundle still loads from outside itself: Node's built-ins, and optional packages that their users load
 * inside try/catch with a fallback (ws: bufferutil and utf-8-validate, native speed-ups; debug: supports-color).
 * Anything else would need a node_modules the image does not have.
 */
export const OPTIONAL_RUNTIME_REQUIRES: ReadonlySet<string> = new Set(['bufferutil', 'utf-8-validate', 'supports-color']);

/** The modules a bundle's code requires by literal name that are neither built-in nor known optional ones. */
export function unexpectedRequires(code: string): string[] {
  const builtins = new Set(builtinModules);
  const found = new Set<string>();
  for (const m of code.matchAll(/\b(?:__)?require\(\s*["']([^"']+)["']\s*\)/g)) {
    const name = m[1]!;
    const bare = name.startsWith('node:') ? name.slice(5) : name;
    if (builtins.has(bare) || builtins.has(name) || OPTIONAL_RUNTIME_REQUIRES.has(name)) continue;
    found.add(name);
  }
  return [...found].sort(byCodePoint);
}
