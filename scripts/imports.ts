// The relative imports of this repository's TypeScript files, read with regular expressions (static `import`/`export
// ... from`, side-effect imports and `import()`): enough for this codebase's style, free of dependencies and fast.
// Used by the import-graph check of src (scripts/import-graph.test.ts) and by `npm test` to tell which prepared
// binaries an e2e file needs (scripts/test.ts).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const STATIC = /^[ \t]*(?:import|export)\s[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/gm;
const SIDE_EFFECT = /^[ \t]*import\s*['"]([^'"]+)['"]/gm;
const DYNAMIC = /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g;

/** Import specifiers of a source text, in order of appearance. */
export function specifiers(text: string): string[] {
  const found: [number, string][] = [];
  for (const re of [STATIC, SIDE_EFFECT, DYNAMIC]) for (const m of text.matchAll(re)) found.push([m.index, m[1]!]);
  return found.sort((a, b) => a[0] - b[0]).map(([, s]) => s);
}

/** The file a relative specifier names, or undefined for a package or a missing file. */
export function resolveSpecifier(fromFile: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(fromFile), spec);
  for (const candidate of [base, `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

/** `file` and every file of the repository it imports, directly or not (absolute paths). */
export function importClosure(file: string): Set<string> {
  const seen = new Set<string>();
  const todo = [resolve(file)];
  for (let f = todo.pop(); f !== undefined; f = todo.pop()) {
    if (seen.has(f)) continue;
    seen.add(f);
    for (const spec of specifiers(readFileSync(f, 'utf8'))) {
      const target = resolveSpecifier(f, spec);
      if (target !== undefined && !seen.has(target)) todo.push(target);
    }
  }
  return seen;
}
