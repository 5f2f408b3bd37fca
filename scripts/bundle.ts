// The esbuild step of `npm run build` (scripts/build.ts), with what travels with the bundle: the licences of the
// packages it holds (THIRD-PARTY-NOTICES.txt, scripts/third-party-notices.ts) and their bill of materials
// (persistent-ips.cdx.json, CycloneDX JSON written by OWASP's esbuild plugin from the same build's metafile, so it
// names only the packages that tree-shaking left in, as the notices do). The two lists must name the same packages.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { cyclonedxEsbuildPlugin } from '@cyclonedx/cyclonedx-esbuild';
import { type BuildOptions, build } from 'esbuild';
import { bundledPackages, NOTICES_FILE, noticesPackageIds, noticesText, SBOM_FILE, sbomPackageIds, unexpectedRequires } from './third-party-notices.ts';

export interface BundleOptions {
  /** Output name → entry module. */
  entryPoints: Record<string, string>;
  /** The folder the entry modules are in: files under it are the project's own, and output paths are relative to it. */
  ownDir: string;
  /** Where the chunks go; the notices and the SBOM are written to its parent. */
  outdir: string;
  /** Each external package that must be part of the bundle (package.json's dependencies). */
  required?: readonly string[];
}

/** The controller's entry modules under `dir` (the CLI and its two short-lived child processes), by output name. */
export const controllerEntries = (dir: string, ext: '.js' | '.ts'): Record<string, string> => ({
  main: join(dir, 'cli', `main${ext}`),
  'parse-worker': join(dir, 'cli', `parse-worker${ext}`),
  'mint-worker': join(dir, 'webhook', `mint-worker${ext}`),
});

/** How the controller is bundled. */
export const BUNDLE_OPTIONS = {
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  // No `__name(fn, 'name')` around every function expression: the closures a request or a watch event creates would
  // each pay for it, and keep what it allocates. A class that esbuild renames (two modules of the bundle declare one
  // of the same name: the second becomes Name2) would show the new name as its constructor's, which is the `type` of
  // an error in the logs: bundle() refuses to rename one of the project's own (renamedOwnClasses).
  keepNames: false,
  // V8 keeps each module's source for lazy compilation, and a source with one character beyond Latin-1 (an arrow in a
  // comment) is stored two bytes a character: 845 KiB of main.js held 1.7 MiB. Without whitespace and comments it is
  // 586 KiB, one byte a character; names stay, so stack frames and error types read the same (issue 42:
  // idle RSS -2.0 MiB, CPU per claim at 1,000 VMs not worse, docs/architecture.md §10).
  minifyWhitespace: true,
  // Bundled CommonJS packages call require() for Node's built-ins; an ES module has no require of its own.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  logLevel: 'warning',
} as const satisfies BuildOptions;

export async function bundle(options: BundleOptions): Promise<void> {
  const result = await build({
    entryPoints: options.entryPoints,
    outdir: options.outdir,
    // Paths in the output (module comments, hence chunk hashes) relative to the scratch folder, whose name changes
    // with every build: the same commit gives the same bytes.
    absWorkingDir: options.ownDir,
    ...BUNDLE_OPTIONS,
    // Maps to the TypeScript sources (through tsc's own maps), for `node --enable-source-maps` in a checkout.
    sourcemap: 'linked',
    sourcesContent: false,
    metafile: true,
    // Reproducible: no serial number or timestamp, sorted lists; the same commit gives the same bytes. 'silent' drops
    // its progress lines only: warnings and errors still print.
    plugins: [cyclonedxEsbuildPlugin({ specVersion: '1.6', outputFile: join('..', SBOM_FILE), outputReproducible: true, validate: true, logLevel: 'silent' })],
  });
  // tsconfig.build.json leaves the tests out (the test helpers live in test/, outside its rootDir, so a shipped module
  // importing one fails the compile); a shipped module that imports a test would pull it back in.
  const testCode = Object.keys(result.metafile.inputs).filter((input) => /\.test\./.test(input));
  if (testCode.length > 0) throw new Error(`build: test code in the bundle: ${testCode.join(', ')}`);
  const dir = resolve(options.outdir, '..');
  // What runs is this folder alone (the image has no node_modules): the bundled packages' licences travel with their
  // code, and nothing may be left to load from a node_modules, which only a checkout or the npm package would have.
  const contributing = new Set<string>();
  for (const output of Object.values(result.metafile.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) if (bytesInOutput > 0) contributing.add(resolve(options.ownDir, input));
  }
  const packages = bundledPackages(contributing, options.ownDir);
  const notices = noticesText(packages);
  writeFileSync(join(dir, NOTICES_FILE), notices);
  const inSbom = sbomPackageIds(JSON.parse(readFileSync(join(dir, SBOM_FILE), 'utf8')));
  const inNotices = noticesPackageIds(notices);
  const onlySbom = [...inSbom].filter((id) => !inNotices.has(id));
  const onlyNotices = [...inNotices].filter((id) => !inSbom.has(id));
  if (onlySbom.length + onlyNotices.length > 0) {
    throw new Error(
      `build: ${SBOM_FILE} and ${NOTICES_FILE} name different packages: only in the SBOM ${onlySbom.join(', ') || 'none'}; only in the notices ${onlyNotices.join(', ') || 'none'}`,
    );
  }
  const missing = (options.required ?? []).filter((name) => !packages.some((p) => p.name === name));
  if (missing.length > 0)
    throw new Error(`build: dependencies not in the bundle (unused, or loaded at run time by a name esbuild cannot follow): ${missing.join(', ')}`);
  const outputs = Object.keys(result.metafile.outputs).filter((f) => f.endsWith('.js'));
  for (const file of outputs) {
    const outside = unexpectedRequires(readFileSync(resolve(options.ownDir, file), 'utf8'));
    if (outside.length > 0) throw new Error(`build: ${file} requires modules that are not bundled: ${outside.join(', ')}`);
  }
  const ownInputs = Object.keys(result.metafile.inputs)
    .map((input) => resolve(options.ownDir, input))
    .filter((file) => file.startsWith(options.ownDir + sep) && !file.includes(`${sep}node_modules${sep}`));
  const renamed = renamedOwnClasses(
    ownInputs.map((file) => readFileSync(file, 'utf8')),
    outputs.map((file) => readFileSync(resolve(options.ownDir, file), 'utf8')),
  );
  if (renamed.length > 0)
    throw new Error(`build: classes of the project renamed in the bundle (another module declares one of the same name): ${renamed.join(', ')}`);
}

/**
 * The project's classes (declared in `ownSources`) that appear renamed in `outputs`: esbuild gives the second of two
 * top-level classes of one name a numbered name (Name2), which becomes its constructor's name. A class of another
 * package that collides with one of ours is reported too, since the text alone cannot tell which of the two moved.
 */
export function renamedOwnClasses(ownSources: readonly string[], outputs: readonly string[]): string[] {
  const own = new Set<string>();
  for (const text of ownSources) for (const m of text.matchAll(/\bclass\s+([A-Za-z_$][\w$]*)/g)) own.add(m[1]!);
  const renamed = new Set<string>();
  // `class Name2` or, as esbuild writes a module's top-level class, `var Name2 = class`, whose constructor takes the
  // variable's name.
  const numbered = /\bclass\s+([A-Za-z_$][\w$]*?)(\d+)\b|\b(?:var|let|const)\s+([A-Za-z_$][\w$]*?)(\d+)\s*=\s*class\b/g;
  for (const text of outputs) {
    for (const m of text.matchAll(numbered)) {
      const [base, digits] = m[1] !== undefined ? [m[1], m[2]!] : [m[3]!, m[4]!];
      if (own.has(base) && !own.has(base + digits)) renamed.add(base);
    }
  }
  return [...renamed].sort();
}
