// The shape of src's import graph, checked on every `npm test` (unit phase) and alone by `npm run check:imports`:
//   - no import cycle anywhere in src (type-only imports count: a cycle of types is still two files that must be
//     understood together), neither between files nor between the folders of src (src/telemetry and src/webhook
//     importing each other is a cycle even when no file is in one; test files are left out of the folder graph: a
//     test may use any room it needs, and the test helpers live in test/, outside src);
//   - src/kube and src/ip are leaves: their production files import nothing of the project outside their own folder
//     (address, interval and pool maths stand alone, like CAPI's poolutil). Their *.test.ts files may use the helpers
//     of test/;
//   - the two loops (src/controller, src/allocator) do not import src/webhook: what they share with it (the pod
//     annotations' parsing, claim names) lives in a lower room, src/claims.
// Specifiers are read by scripts/imports.ts (regular expressions: free of dependencies, well under a second).
import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { resolveSpecifier, specifiers } from './imports.ts';

const ROOT = resolve(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');
const LEAVES = ['src/kube/', 'src/ip/'];

/** src-relative file → the src-relative files it imports. */
export function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const rel = (f: string) => relative(ROOT, f).split('\\').join('/');
  for (const file of globSync('src/**/*.ts', { cwd: ROOT }).sort()) {
    const abs = join(ROOT, file);
    const edges: string[] = [];
    for (const spec of specifiers(readFileSync(abs, 'utf8'))) {
      const target = resolveSpecifier(abs, spec);
      if (target?.startsWith(`${SRC}/`) && !edges.includes(rel(target))) edges.push(rel(target));
    }
    graph.set(rel(abs), edges);
  }
  return graph;
}

/** Every cycle's files, one entry per strongly connected component, each as a closed path `a → b → … → a`. */
export function cycles(graph: Map<string, string[]>): string[][] {
  return knots(graph).map((component) => loopThrough(graph, new Set(component)));
}

/**
 * Breadth first from `start` (inside `within`, when given): each file reached → the file it was first reached from.
 * `start` itself is reached only through a loop, and then by a shortest one.
 */
function reachedFrom(graph: Map<string, string[]>, start: string, within?: Set<string>): Map<string, string> {
  const previous = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    for (const w of graph.get(queue[i]!) ?? []) {
      if (previous.has(w) || (within !== undefined && !within.has(w))) continue;
      previous.set(w, queue[i]!);
      queue.push(w);
    }
  }
  return previous;
}

/** The strongly connected components of more than one file (or of one file importing itself): files that reach each other. */
export function knots(graph: Map<string, string[]>): string[][] {
  const reach = new Map([...graph.keys()].map((v) => [v, reachedFrom(graph, v)]));
  const found = new Set<string>();
  const components: string[][] = [];
  for (const v of [...graph.keys()].sort()) {
    if (found.has(v) || !reach.get(v)!.has(v)) continue;
    const component = [...reach.get(v)!.keys()].filter((w) => reach.get(w)?.has(v)).sort();
    for (const w of component) found.add(w);
    components.push(component);
  }
  return components;
}

/** A shortest closed path inside one strongly connected component, from its first file in sort order. */
function loopThrough(graph: Map<string, string[]>, members: Set<string>): string[] {
  const start = [...members].sort()[0]!;
  const previous = reachedFrom(graph, start, members);
  const path = [start];
  for (let u = previous.get(start); u !== undefined && u !== start; u = previous.get(u)) path.unshift(u);
  return [start, ...path];
}

/** The folders of src (`src/kube`, ...) and, for each folder it imports, the first production file import doing so. */
export function folderGraph(graph: Map<string, string[]>): { graph: Map<string, string[]>; via: Map<string, string> } {
  const folder = (f: string) => f.split('/').slice(0, 2).join('/');
  const folders = new Map<string, string[]>();
  const via = new Map<string, string>();
  for (const [file, edges] of graph) {
    if (file.endsWith('.test.ts')) continue;
    const from = folder(file);
    const out = folders.get(from) ?? [];
    folders.set(from, out);
    for (const target of edges) {
      const to = folder(target);
      if (to === from || out.includes(to)) continue;
      out.push(to);
      via.set(`${from} → ${to}`, `${file} → ${target}`);
    }
  }
  return { graph: folders, via };
}

interface Rule {
  /** The folder whose production files the rule binds. */
  from: string;
  banned: (target: string) => boolean;
  why: string;
}

const LOOPS_BESIDE_WEBHOOK = 'a loop imports the webhook; move what both need to src/claims';
const FORBIDDEN: readonly Rule[] = [
  ...LEAVES.map((leaf) => ({
    from: leaf,
    banned: (target: string) => !target.startsWith(leaf),
    why: `${leaf} is a leaf: it imports nothing of the project outside it`,
  })),
  { from: 'src/controller/', banned: (target) => target.startsWith('src/webhook/'), why: LOOPS_BESIDE_WEBHOOK },
  { from: 'src/allocator/', banned: (target) => target.startsWith('src/webhook/'), why: LOOPS_BESIDE_WEBHOOK },
];

/** Imports from production files that a rule refuses, as `from → to (why)`. */
export function forbiddenImports(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [file, edges] of graph) {
    if (file.endsWith('.test.ts')) continue;
    for (const { from, banned, why } of FORBIDDEN) if (file.startsWith(from)) for (const to of edges) if (banned(to)) out.push(`${file} → ${to} (${why})`);
  }
  return out;
}

describe('import graph of src', () => {
  const graph = importGraph();

  it('reads the specifiers of every import form', () => {
    const text = [
      "import { a } from './a.ts';",
      "import type {\n  B,\n  C,\n} from '../b.ts';",
      "export { d } from './d.ts';",
      "export * from './e.ts';",
      "import './side.ts';",
      "const f = await import('./f.ts');",
      "import { readFileSync } from 'node:fs';",
      'const s = \'not an import from "./g.ts"\';',
    ].join('\n');
    assert.deepEqual(specifiers(text), ['./a.ts', '../b.ts', './d.ts', './e.ts', './side.ts', './f.ts', 'node:fs']);
  });

  it('finds a cycle and names its files in order', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
      ['e', ['e']],
    ]);
    assert.deepEqual(new Set(cycles(g).map((c) => c.join(' → '))), new Set(['a → b → c → a', 'e → e']));
  });

  it('sees the files of src', () => {
    assert.ok(graph.size > 50, `only ${graph.size} files found under src`);
    for (const leaf of LEAVES)
      assert.ok(
        [...graph.keys()].some((f) => f.startsWith(leaf)),
        `no file under ${leaf}`,
      );
  });

  it('has no import cycle', () => {
    const found = knots(graph).map((knot) => {
      const loop = loopThrough(graph, new Set(knot));
      const others = knot.filter((f) => !loop.includes(f));
      return `  ${loop.join(' → ')}${others.length > 0 ? `\n    (in the same knot: ${others.join(', ')})` : ''}`;
    });
    assert.equal(found.length, 0, `import cycle${found.length > 1 ? 's' : ''} in src (type-only imports count):\n${found.join('\n')}`);
  });

  it('has no import cycle between the folders of src', () => {
    const { graph: folders, via } = folderGraph(graph);
    const found = cycles(folders);
    const explain = (c: string[]) =>
      c
        .slice(1)
        .map((to, i) => `    ${c[i]} → ${to} (${via.get(`${c[i]} → ${to}`)})`)
        .join('\n');
    assert.equal(
      found.length,
      0,
      `import cycle${found.length > 1 ? 's' : ''} between folders of src:\n${found.map((c) => `  ${c.join(' → ')}\n${explain(c)}`).join('\n')}`,
    );
  });

  it("names a production file's forbidden import, and no test file's", () => {
    const g = new Map([
      ['src/kube/k.ts', ['src/kube/l.ts']],
      ['src/kube/k.test.ts', ['src/claims/c.ts']],
      ['src/ip/p.ts', ['src/claims/c.ts']],
      ['src/controller/a.ts', ['src/webhook/b.ts', 'src/claims/c.ts']],
      ['src/controller/a.test.ts', ['src/webhook/b.ts']],
      ['src/webhook/b.ts', ['src/allocator/d.ts']],
    ]);
    assert.deepEqual(forbiddenImports(g), [
      'src/ip/p.ts → src/claims/c.ts (src/ip/ is a leaf: it imports nothing of the project outside it)',
      `src/controller/a.ts → src/webhook/b.ts (${LOOPS_BESIDE_WEBHOOK})`,
    ]);
  });

  it('keeps src/kube and src/ip leaves and the loops from importing the webhook', () => {
    const found = forbiddenImports(graph);
    assert.equal(found.length, 0, `forbidden imports:\n${found.map((v) => `  ${v}`).join('\n')}`);
  });
});
