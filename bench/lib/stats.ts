// Percentiles and small helpers for the figures.

/** Nearest-rank percentile of `xs` (0 < p ≤ 100). */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[Math.min(s.length, rank) - 1]!;
}

/** The middle value, or the mean of the two middle values of an even count. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** p50, p95, p99 and max of `xs`, rounded to `digits`. */
export function pcts(xs: readonly number[], digits: number): { p50: number; p95: number; p99: number; max: number } {
  const r = (p: number): number => round(percentile(xs, p), digits);
  return { p50: r(50), p95: r(95), p99: r(99), max: round(Math.max(...xs), digits) };
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

export function round(x: number, digits = 2): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Cumulative count over time, as at most `maxPoints` [t, count] points (t in seconds from `origin`). */
export function cumulative(times: Iterable<number>, origin: number, maxPoints = 240): [number, number][] {
  const ts = [...times].map((t) => (t - origin) / 1000).sort((a, b) => a - b);
  if (ts.length === 0) return [];
  const step = Math.max(1, Math.ceil(ts.length / maxPoints));
  const out: [number, number][] = [[0, 0]];
  for (let i = step - 1; i < ts.length; i += step) out.push([round(ts[i]!, 3), i + 1]);
  if (out.at(-1)![1] !== ts.length) out.push([round(ts.at(-1)!, 3), ts.length]);
  return out;
}

/** Counts of `xs` in buckets with the given upper bounds (the last bucket catches the rest). */
export function histogram(xs: readonly number[], bounds: readonly number[]): { le: string; count: number }[] {
  const counts = bounds.map(() => 0);
  let over = 0;
  for (const x of xs) {
    const i = bounds.findIndex((b) => x <= b);
    if (i >= 0) counts[i]!++;
    else over++;
  }
  return [...bounds.map((b, i) => ({ le: `≤${b}`, count: counts[i]! })), { le: `>${bounds.at(-1)}`, count: over }];
}
