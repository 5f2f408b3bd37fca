// Where a V8 CPU profile (node --cpu-prof) spends its time: self time by package/file and by function, and the
// total ("inclusive") time of selected functions.
//
//   node bench/profile-summary.ts PROFILE.cpuprofile [--top 25] [--from SECONDS] [--to SECONDS]
//
// --from/--to restrict the samples to a time window (seconds from the start of the profile), e.g. to the part of a
// cold start after the caches synced.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function where(url: string): string {
  if (url === '') return '(native/VM)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return `npm:${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (url.startsWith('node:')) return url;
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return url.slice(dist + 1);
  return url.replace(/^file:\/\//, '');
}

export function summarize(profile: Profile, opts: { top?: number; fromS?: number; toS?: number } = {}): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  let t = 0;
  let total = 0;
  const from = (opts.fromS ?? 0) * 1e6;
  const to = (opts.toS ?? Infinity) * 1e6;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt;
    if (t < from || t > to) continue;
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + dt);
    total += dt;
  }
  const byPlace = new Map<string, number>();
  const byFn = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const cf = n.callFrame;
    const place =
      cf.functionName === '(idle)'
        ? '(idle)'
        : cf.functionName === '(garbage collector)'
          ? '(garbage collector)'
          : cf.functionName === '(program)'
            ? '(program)'
            : where(cf.url);
    byPlace.set(place, (byPlace.get(place) ?? 0) + us);
    const fn = `${cf.functionName || '(anonymous)'} ${where(cf.url)}:${cf.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
    // Inclusive time per function name + place, counted once per sample stack.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const c = byId.get(cur)!.callFrame;
      const key = `${c.functionName || '(anonymous)'} ${where(c.url)}`;
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + us);
    }
  }
  const top = opts.top ?? 25;
  const pct = (us: number): string => `${((100 * us) / Math.max(1, total)).toFixed(1).padStart(5)} %  ${(us / 1e6).toFixed(2).padStart(6)} s`;
  const list = (m: Map<string, number>, n: number): string[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => `  ${pct(us)}  ${k}`);
  return [
    `profile: ${(total / 1e6).toFixed(2)} s of samples${opts.fromS !== undefined || opts.toS !== undefined ? ` in [${opts.fromS ?? 0}, ${opts.toS ?? 'end'}] s` : ''}`,
    'self time by package / file:',
    ...list(byPlace, top),
    'self time by function:',
    ...list(byFn, top),
    'inclusive time by function:',
    ...list(inclusive, top),
  ].join('\n');
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' } } });
  const file = positionals[0];
  if (!file) {
    process.stderr.write('usage: node bench/profile-summary.ts PROFILE.cpuprofile [--top 25] [--from S] [--to S]\n');
    process.exit(2);
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  process.stdout.write(
    `${summarize(profile, {
      ...(values.top ? { top: Number(values.top) } : {}),
      ...(values.from ? { fromS: Number(values.from) } : {}),
      ...(values.to ? { toS: Number(values.to) } : {}),
    })}\n`,
  );
}
