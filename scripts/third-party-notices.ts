// The licences of the packages a build bundles into dist/. Once a dependency's code is inside dist/cli/*.js, its
// own LICENSE file no longer travels with it (the image carries no node_modules), so the build writes every bundled
// package's name, version, declared licence and licence files into dist/THIRD-PARTY-NOTICES.txt.

import { readdirSync, readFileSync } from 'node:fs';
import { join, sep } from 'node:path';

export const NOTICES_FILE = 'THIRD-PARTY-NOTICES.txt';

/** Licence, copying and notice files, as packages name them (LICENSE, LICENCE.md, license-MIT, UNLICENSE, COPYING, NOTICE). */
const LICENCE_FILE = /^(licen[cs]e|unlicen[cs]e|copying|notice)([-._].*)?$/i;

export interface BundledPackage {
  name: string;
  version: string;
  /** package.json's `license` (or the old `licenses` list), as declared. */
  declared: string;
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
  if (pkg.license && typeof pkg.license === 'object' && typeof (pkg.license as { type?: unknown }).type === 'string') return (pkg.license as { type: string }).type;
  if (Array.isArray(pkg.licenses)) {
    const types = pkg.licenses.map((l: { type?: unknown }) => (typeof l?.type === 'string' ? l.type : undefined)).filter((t) => t !== undefined);
    if (types.length > 0) return types.join(' OR ');
  }
  return 'UNDECLARED';
}

/** Reads one package folder: its package.json and its licence files. */
export function readPackage(dir: string): BundledPackage {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string; license?: unknown; licenses?: unknown };
  const files = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && LICENCE_FILE.test(e.name))
    .map((e) => e.name)
    .sort()
    .map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
  return { name: manifest.name ?? dir, version: manifest.version ?? '0.0.0', declared: declaredLicence(manifest), files };
}

/** The notices file: one section per package, sorted by name and version, so a build is byte-reproducible. */
export function noticesText(packages: readonly BundledPackage[]): string {
  const sorted = [...packages].sort((a, b) => (a.name === b.name ? a.version.localeCompare(b.version) : a.name < b.name ? -1 : 1));
  const rule = '='.repeat(100);
  const sections = sorted.map((p) => {
    const head = `${p.name}@${p.version} (${p.declared})`;
    if (p.files.length === 0) return `${rule}\n${head}\n\nThe package ships no licence file; its package.json declares ${p.declared}.\n`;
    return `${rule}\n${head}\n${p.files.map((f) => `\n--- ${f.name}\n\n${f.text.trimEnd()}\n`).join('')}`;
  });
  return `persistent-ips bundles the following packages into dist/cli/. Their licences follow.\n\n${sections.join('\n')}`;
}

/** Every package that has a file among `files` (absolute paths of a bundle's inputs), read once each. */
export function bundledPackages(files: Iterable<string>, read: (dir: string) => BundledPackage = readPackage): BundledPackage[] {
  const dirs = new Set<string>();
  for (const file of files) {
    const dir = packageDirOf(file);
    if (dir) dirs.add(dir);
  }
  return [...dirs].map(read);
}
