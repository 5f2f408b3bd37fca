// Turning results into what people read: a table per scenario (stdout and Markdown), a JSON file and an SVG chart
// per scenario, and a summary page.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export type Row = [string, string];

export interface Section {
  /** File stem: `<id>.json`, `<id>.md`, `<id>.svg`. */
  id: string;
  title: string;
  rows: Row[];
  notes?: string[];
  json: unknown;
  svg?: string;
}

export function textTable(title: string, rows: Row[]): string {
  const width = Math.max(...rows.map(([k]) => k.length), 10);
  const line = '-'.repeat(Math.min(100, width + 2 + Math.max(...rows.map(([, v]) => v.length), 5)));
  return [title, line, ...rows.map(([k, v]) => (v === '' ? k : `${k.padEnd(width)}  ${v}`)), ''].join('\n');
}

function mdEscape(s: string): string {
  return s.replace(/\|/g, '\\|');
}

function markdownTable(rows: Row[]): string {
  return ['| | |', '|---|---|', ...rows.map(([k, v]) => (v === '' ? `| **${mdEscape(k)}** | |` : `| ${mdEscape(k)} | ${mdEscape(v)} |`))].join('\n');
}

function sectionMarkdown(s: Section): string {
  return [
    `## ${s.title}`,
    '',
    markdownTable(s.rows),
    '',
    ...(s.notes && s.notes.length > 0 ? [...s.notes.map((n) => `- ${n}`), ''] : []),
    ...(s.svg ? [`![${s.title}](${s.id}.svg)`, ''] : []),
  ].join('\n');
}

/** Writes `<id>.md/.svg` for each section, `results.json` (every section's figures) and `summary.md`. Returns the paths written. */
export function writeReport(
  outDir: string,
  meta: { rows: Row[]; json: Record<string, unknown>; title: string; intro: string[] },
  sections: Section[],
): string[] {
  mkdirSync(outDir, { recursive: true });
  const written: string[] = [];
  const put = (name: string, text: string): void => {
    const path = join(outDir, name);
    writeFileSync(path, text);
    written.push(path);
  };
  const metaMd = ['## Run', '', markdownTable(meta.rows), ''].join('\n');
  for (const s of sections) {
    put(`${s.id}.md`, `# ${s.title}\n\n${sectionMarkdown({ ...s, title: 'Figures' })}\n${metaMd}`);
    if (s.svg) put(`${s.id}.svg`, s.svg);
  }
  put('results.json', `${JSON.stringify({ meta: meta.json, ...Object.fromEntries(sections.map((s) => [s.id, s.json])) }, null, 2)}\n`);
  put('summary.md', [`# ${meta.title}`, '', ...meta.intro, '', metaMd, ...sections.map((s) => sectionMarkdown(s))].join('\n'));
  return written;
}

export const fmtS = (s: number | undefined): string => (s === undefined || !Number.isFinite(s) ? 'n/a' : `${s.toFixed(2)} s`);
export const fmtMs = (ms: number): string => `${ms.toFixed(1)} ms`;
export const fmtN = (n: number): string => n.toLocaleString('en-US');
export const verdict = (ok: boolean): string => (ok ? 'met' : 'MISSED');
/** Some of a result's millisecond figures, e.g. "3.1 ms / 9.8 ms" for fmtMsOf(latency, 'p50', 'p99'). */
export const fmtMsOf = <K extends string>(x: Record<NoInfer<K>, number>, ...keys: K[]): string => keys.map((k) => fmtMs(x[k])).join(' / ');
/** "target ≤ 80: met" */
export const atMost = (x: number, max: number): string => `target ≤ ${max}: ${verdict(x <= max)}`;
