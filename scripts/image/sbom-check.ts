// node scripts/image/sbom-check.ts IMAGE_SBOM DEBIAN_PACKAGES NOTICES   (the last two: files of the unpacked image)
//
// The image SBOM syft wrote (CycloneDX JSON) lists what the image holds: Node at the version of node_modules/node, each
// Debian package of the image at its version (usr/share/doc/debian-packages: "name version" lines), and exactly the
// npm packages bundled into dist/ (dist/THIRD-PARTY-NOTICES.txt), besides the project itself. A release whose
// image SBOM lacks one of them fails (scripts/release.sh), instead of shipping an SBOM a scanner would trust.
import { readFileSync } from 'node:fs';
import { noticesPackageIds, sbomPackageIds } from '../third-party-notices.ts';

const [sbomFile, debianFile, noticesFile] = process.argv.slice(2);
if (!sbomFile || !debianFile || !noticesFile) throw new Error('usage: sbom-check.ts IMAGE_SBOM DEBIAN_PACKAGES NOTICES');
const bom = JSON.parse(readFileSync(sbomFile, 'utf8')) as object;
const problems: string[] = [];

const node = `node@${process.version.slice(1)}`;
const generic = sbomPackageIds(bom, 'generic');
if (!generic.has(node)) problems.push(`no ${node} (generic components: ${[...generic].join(', ') || 'none'})`);

const debs = sbomPackageIds(bom, 'deb');
for (const line of readFileSync(debianFile, 'utf8').trim().split('\n')) {
  const [name, version] = line.split(' ');
  if (!debs.has(`debian/${name}@${version}`)) problems.push(`no Debian package ${name} ${version}`);
}

const own = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { name: string; version: string };
const npm = sbomPackageIds(bom, 'npm');
npm.delete(`${own.name}@${own.version}`);
const bundled = noticesPackageIds(readFileSync(noticesFile, 'utf8'));
for (const id of bundled) if (!npm.has(id)) problems.push(`no npm package ${id}`);
for (const id of npm) if (!bundled.has(id)) problems.push(`npm package ${id} is not bundled (not in ${noticesFile})`);

if (problems.length > 0) {
  process.stderr.write(`${sbomFile}:\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(`${sbomFile}: ${node}, ${debs.size} Debian packages, ${npm.size} bundled npm packages, as in the image\n`);
