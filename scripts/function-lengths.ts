// Weight a reviewer must carry (issue 44): production functions over 80 lines and production files over 450, by the
// TypeScript parser. A function is measured from its first to its last line, nested functions included, so a factory
// closure counts as one function (lift its inner functions to module level to make it shorter). Production code is
// src/**/*.ts without the tests.
//
//   node scripts/function-lengths.ts    lists every production function over the limit and every production file over
//                                       it, and exits 1 when there is one (npm run lint runs it)
import { globSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';

export const FUNCTION_LIMIT = 80;
export const FILE_LIMIT = 450;
const ROOT = resolve(import.meta.dirname, '..');

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

if (import.meta.main) {
  const { functions, files } = measure();
  for (const m of [...functions].sort((a, b) => b.lines - a.lines)) process.stdout.write(`  function ${m.lines.toString().padStart(4)}  ${m.key}\n`);
  for (const m of [...files].sort((a, b) => b.lines - a.lines)) process.stdout.write(`  file     ${m.lines.toString().padStart(4)}  ${m.key}\n`);
  process.stdout.write(
    `function-lengths: ${functions.length} production functions over ${FUNCTION_LIMIT} lines, ${files.length} production files over ${FILE_LIMIT}\n`,
  );
  process.exit(functions.length + files.length > 0 ? 1 : 0);
}
