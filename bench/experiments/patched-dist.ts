// Builds a copy of dist/ with experimental changes, in a scratch directory, and returns the entry point to run. The
// repository's dist/ and src/ are not touched: an experiment measures what a change to src/ would bring, for the
// people who own src/ to decide. Since scripts/build.ts, dist/ is a bundle: a patch edits dist/cli/main.js (or a chunk),
// not one file per module as the two experiments below did.
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

interface Patch {
  description: string;
  apply(dist: string): void;
}

// biome-ignore lint/correctness/noUnusedVariables: the tool of the next experiment (see the note in EXPERIMENTS)
function replaceOnce(file: string, find: string, replacement: string): void {
  const text = readFileSync(file, 'utf8');
  const at = text.indexOf(find);
  if (at < 0 || text.indexOf(find, at + 1) >= 0) {
    throw new Error(`experiment: expected exactly one "${find}" in ${file} (is the change already in this build?)`);
  }
  writeFileSync(file, text.slice(0, at) + replacement + text.slice(at + find.length));
}

export const EXPERIMENTS: Record<string, Patch> = {
  // 'https-transport' replaced dist/kube/transport.js with bench/experiments/transport-https.js; removed once
  // src/kube/transport.ts sent with node:https itself. 'informer-race-fix' patched dist/sources/informer.js with
  // replaceOnce(); removed once the change landed in src/sources/informer.ts (commit 5e047c5, nextOrAbort). Their
  // reports are in git history (docs/benchmarks/experiment-*).
};

/** `names`: one or more experiments, comma-separated. */
export function patchedDist(names: string[], scratch: string): string {
  const root = join(scratch, `dist-${names.join('+')}`);
  mkdirSync(root, { recursive: true });
  cpSync(join(REPO, 'dist'), join(root, 'dist'), { recursive: true });
  for (const name of names) {
    const e = EXPERIMENTS[name];
    if (!e) throw new Error(`unknown experiment ${name}; known: ${Object.keys(EXPERIMENTS).join(', ')}`);
    e.apply(join(root, 'dist'));
  }
  // Package resolution and ESM mode as in the repository.
  symlinkSync(join(REPO, 'node_modules'), join(root, 'node_modules'), 'dir');
  writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module' }));
  return join(root, 'dist', 'cli', 'main.js');
}
