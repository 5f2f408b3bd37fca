// What a V8 heap snapshot (node --heapsnapshot-signal=SIGUSR2, or v8.writeHeapSnapshot) holds: self size and count
// by node type and constructor/name, largest first. A first look at "where does the memory go", without DevTools.
//
//   node bench/heap-summary.ts FILE.heapsnapshot [--top 30] [--strings 10]
//
// --strings N also lists the N most common string prefixes (first 60 characters), which shows e.g. cached JSON.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] }; node_count: number };
  nodes: number[];
  strings: string[];
}

export function summarizeHeap(snap: Snapshot, opts: { top?: number; strings?: number } = {}): string {
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const iType = fields.indexOf('type');
  const iName = fields.indexOf('name');
  const iSize = fields.indexOf('self_size');
  const byKey = new Map<string, { size: number; count: number }>();
  const byType = new Map<string, { size: number; count: number }>();
  const stringPrefixes = new Map<string, { size: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + iType]!] ?? '?';
    const name = snap.strings[snap.nodes[i + iName]!] ?? '';
    const size = snap.nodes[i + iSize]!;
    total += size;
    const add = (m: Map<string, { size: number; count: number }>, k: string): void => {
      const e = m.get(k) ?? { size: 0, count: 0 };
      e.size += size;
      e.count++;
      m.set(k, e);
    };
    add(byType, type);
    const short =
      type === 'string' || type === 'concatenated string' || type === 'sliced string' ? '(string)' : name.length > 80 ? `${name.slice(0, 80)}…` : name;
    add(byKey, `${type}: ${short}`);
    if (opts.strings && (type === 'string' || type === 'concatenated string' || type === 'sliced string'))
      add(stringPrefixes, name.slice(0, 60).replace(/\s+/g, ' '));
  }
  const mb = (b: number): string => `${(b / 2 ** 20).toFixed(1).padStart(7)} MiB`;
  const list = (m: Map<string, { size: number; count: number }>, n: number): string[] =>
    [...m.entries()]
      .sort((a, b) => b[1].size - a[1].size)
      .slice(0, n)
      .map(([k, v]) => `  ${mb(v.size)}  ${String(v.count).padStart(9)}  ${k}`);
  return [
    `heap: ${mb(total)} in ${snap.snapshot.node_count} nodes (self sizes)`,
    'by node type:            size      count',
    ...list(byType, 20),
    'by type and constructor/name:',
    ...list(byKey, opts.top ?? 30),
    ...(opts.strings ? ['most common strings (by total size):', ...list(stringPrefixes, opts.strings)] : []),
  ].join('\n');
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' }, strings: { type: 'string' } } });
  const file = positionals[0];
  if (!file) {
    process.stderr.write('usage: node bench/heap-summary.ts FILE.heapsnapshot [--top 30] [--strings 10]\n');
    process.exit(2);
  }
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  process.stdout.write(`${summarizeHeap(snap, { top: Number(values.top ?? 30), strings: Number(values.strings ?? 0) })}\n`);
}
