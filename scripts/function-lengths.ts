// Weight a reviewer must carry (issue 44): production functions over 80 lines and production files over 450, by the
// TypeScript parser. A function is measured from its first to its last line, nested functions included, so a factory
// closure counts as one function (lift its inner functions to module level to make it shorter). Production code is
// src/**/*.ts without the tests.
//
//   node scripts/function-lengths.ts            lists every function over the limit and every file over it; exits 1
//                                               when one is not in scripts/function-lengths.baseline.json or has
//                                               grown past the length recorded there (a ratchet: the baseline only
//                                               shrinks, and an entry that is now within the limit must be removed)
//   node scripts/function-lengths.ts --write    rewrites the baseline with what is over the limit now
import { globSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';

export const FUNCTION_LIMIT = 80;
export const FILE_LIMIT = 450;
const ROOT = resolve(import.meta.dirname, '..');
const BASELINE = join(ROOT, 'scripts', 'function-lengths.baseline.json');

export interface Measured {
  /** `path:name` for a function, `path` for a file. */
  key: string;
  lines: number;
}

const lineOf = (file: ts.SourceFile, pos: number): number => file.getLineAndCharacterOfPosition(pos).line;

/** The name a reader finds the function by: its own, or the variable, property or method it is assigned to. */
function nameOf(node: ts.Node): string {
  const own = (node as { name?: ts.Node }).name;
  if (own && (ts.isIdentifier(own) || ts.isStringLiteral(own) || ts.isPrivateIdentifier(own))) return own.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && ts.isIdentifier(parent.name))
    return parent.name.text;
  return `(anonymous@${lineOf(node.getSourceFile(), node.getStart()) + 1})`;
}

/** Every function of one file longer than `limit` lines, outermost and nested alike. */
export function longFunctions(path: string, text: string, limit = FUNCTION_LIMIT): Measured[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const out: Measured[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body) {
      const lines = lineOf(file, node.getEnd()) - lineOf(file, node.getStart()) + 1;
      if (lines > limit) out.push({ key: `${path}:${nameOf(node)}`, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

export function measure(root = ROOT): { functions: Measured[]; files: Measured[] } {
  const paths = globSync('src/**/*.ts', { cwd: root })
    .filter((p) => !p.endsWith('.test.ts'))
    .sort();
  const functions: Measured[] = [];
  const files: Measured[] = [];
  for (const path of paths) {
    const text = readFileSync(join(root, path), 'utf8');
    functions.push(...longFunctions(path, text));
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    if (lines > FILE_LIMIT) files.push({ key: path, lines });
  }
  return { functions, files };
}

/** What breaks the ratchet: a function or file over the limit that the baseline does not allow, or allows shorter. */
export function violations(now: readonly Measured[], baseline: Readonly<Record<string, number>>): string[] {
  const out: string[] = [];
  for (const m of now) {
    const allowed = baseline[m.key];
    if (allowed === undefined) out.push(`${m.key}: ${m.lines} lines, new over the limit`);
    else if (m.lines > allowed) out.push(`${m.key}: ${m.lines} lines, grew past its baseline of ${allowed}`);
  }
  const keys = new Set(now.map((m) => m.key));
  for (const key of Object.keys(baseline)) if (!keys.has(key)) out.push(`${key}: within the limit now (or gone); remove it from ${relative(ROOT, BASELINE)}`);
  return out;
}

if (import.meta.main) {
  const { functions, files } = measure();
  const all = [...functions, ...files];
  if (process.argv.includes('--write')) {
    writeFileSync(BASELINE, `${JSON.stringify(Object.fromEntries(all.map((m) => [m.key, m.lines])), null, 2)}\n`);
    process.stdout.write(`function-lengths: wrote ${all.length} entries to ${relative(ROOT, BASELINE)}\n`);
    process.exit(0);
  }
  const baseline = JSON.parse(readFileSync(BASELINE, 'utf8')) as Record<string, number>;
  for (const m of [...functions].sort((a, b) => b.lines - a.lines)) process.stdout.write(`  function ${m.lines.toString().padStart(4)}  ${m.key}\n`);
  for (const m of [...files].sort((a, b) => b.lines - a.lines)) process.stdout.write(`  file     ${m.lines.toString().padStart(4)}  ${m.key}\n`);
  process.stdout.write(
    `function-lengths: ${functions.length} production functions over ${FUNCTION_LIMIT} lines, ${files.length} production files over ${FILE_LIMIT}\n`,
  );
  const broken = violations(all, baseline);
  for (const v of broken) process.stderr.write(`function-lengths: ${v}\n`);
  process.exit(broken.length > 0 ? 1 : 0);
}
