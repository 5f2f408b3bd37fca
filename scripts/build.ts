// `npm run build`: the controller as it ships, in dist/.
//
//   node scripts/build.ts [--out DIR]     (default dist; DIR is replaced whole once the new build is complete)
//
// 1. tsc compiles src/ (tsconfig.build.json: the shipped sources, no tests) into a scratch folder under build/, and
//    stops on a type error.
// 2. esbuild bundles that output into DIR/cli/: main.js (the CLI, the image's ENTRYPOINT, the package's bin), the
//    modules it imports only on demand as chunks of their own (@kubernetes/client-node for exec and auth-provider
//    kubeconfigs), and the entries of the two short-lived child processes, parse-worker.js (the command-line parser,
//    which cli/main.ts finds next to itself) and mint-worker.js (the certificate minting child, which webhook/certs.ts
//    finds next to itself), so every output stays in this one folder.
//
// Why a bundle: resolving, reading, compiling and linking the controller's ES modules one by one costs Node a
// noticeable share of its start-up CPU and resident memory; one file for each process does not. Everything tsc
// emits is bundled as is (same target, same class semantics). Names are not kept (scripts/bundle.ts BUNDLE_OPTIONS):
// `keepNames` wraps each function expression in a call that sets its name, also the closures every request and watch
// event creates, which paired cold starts (bench/paired.ts) showed as a share of the CPU per claim. Without it
// esbuild renames the second of two top-level classes of one name, and the `type` of an error in the logs is its
// constructor's name: the build fails if one of the project's own classes is renamed; of the packages', js-yaml's
// YAMLException reads YAMLException2 (its `name` stays YAMLException). Every
// dependency is bundled (prom-client too), so what runs needs no node_modules; the bundled packages' licences are written to
// DIR/THIRD-PARTY-NOTICES.txt and their bill of materials to DIR/persistent-ips.cdx.json (scripts/bundle.ts).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { parseArgs } from 'node:util';
import { bundle, controllerEntries } from './bundle.ts';
import { NOTICES_FILE, SBOM_FILE } from './third-party-notices.ts';

const ROOT = resolve(import.meta.dirname, '..');

const { values } = parseArgs({ options: { out: { type: 'string', default: 'dist' } } });
const out = resolve(ROOT, values.out!);
// `out` is deleted and replaced: never the repository, a folder above it, or one holding sources.
if (ROOT === out || ROOT.startsWith(out + sep) || existsSync(join(out, 'src')) || existsSync(join(out, '.git')) || existsSync(join(out, 'package.json'))) {
  throw new Error(`build: refusing --out ${out}: it would replace the repository or a folder with sources in it`);
}
const stage = join(ROOT, 'build', `tsc-${process.pid}`);
const partial = `${out}.partial-${process.pid}`;
const old = `${out}.old-${process.pid}`;

const say = (line: string): void => void process.stdout.write(`build: ${line}\n`);

/** Leftovers of builds that were killed: their process is gone. */
function sweep(folder: string, prefix: string): void {
  let names: string[] = [];
  try {
    names = readdirSync(folder);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(name.startsWith(prefix) ? name.slice(prefix.length) : NaN);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      rmSync(join(folder, name), { recursive: true, force: true });
    }
  }
}
sweep(join(ROOT, 'build'), 'tsc-');
for (const kind of ['partial', 'old']) sweep(dirname(out), `${basename(out)}.${kind}-`);

const cleanUp = (): void => {
  rmSync(partial, { recursive: true, force: true });
  rmSync(old, { recursive: true, force: true });
  rmSync(stage, { recursive: true, force: true });
};
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    cleanUp();
    process.exit(130);
  });
}

const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
try {
  execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', stage, '--noEmitOnError'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(partial, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  await bundle({
    entryPoints: controllerEntries(stage, '.js'),
    ownDir: stage,
    outdir: join(partial, 'cli'),
    required: Object.keys(manifest.dependencies ?? {}),
  });
  // The old output leaves only once the new one is complete, and is never half-replaced.
  if (existsSync(out)) renameSync(out, old);
  renameSync(partial, out);
} finally {
  cleanUp();
}
const main = join(out, 'cli', 'main.js');
if (!existsSync(main)) throw new Error(`${main} was not written`);
say(`${relative(ROOT, main) || main} (${(statSync(main).size / 1024).toFixed(0)} KiB) and its chunks; ${NOTICES_FILE}, ${SBOM_FILE}`);
