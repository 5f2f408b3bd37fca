// Prometheus histograms, on the samples e2e/local/controller-process.ts parses.
import type { Sample } from '../../e2e/local/controller-process.ts';

/** Cumulative buckets (`le` → count) of histogram `name` for samples matching `match`, summed over other labels. */
export function buckets(samples: readonly Sample[], name: string, match: Record<string, string> = {}): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${name}_bucket`) continue;
    if (!Object.entries(match).every(([k, v]) => s.labels[k] === v)) continue;
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

/** `after - before`, bucket by bucket. */
export function bucketDelta(after: Map<number, number>, before: Map<number, number>): Map<number, number> {
  const out = new Map<number, number>();
  for (const [le, v] of after) out.set(le, v - (before.get(le) ?? 0));
  return out;
}

/** Prometheus' histogram_quantile: linear interpolation inside the bucket that holds the q-quantile. */
export function histogramQuantile(q: number, cumulative: Map<number, number>): number {
  const b = [...cumulative.entries()].sort((x, y) => x[0] - y[0]);
  const total = b.at(-1)?.[1] ?? 0;
  if (total <= 0) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of b) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      return prevLe + ((le - prevLe) * (rank - prevCount)) / Math.max(1e-12, count - prevCount);
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

/** Counter `name` summed by the key `by` makes of each sample's labels. */
export function countBy(samples: readonly Sample[], name: string, by: (labels: Record<string, string>) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) if (s.name === name) out[by(s.labels)] = (out[by(s.labels)] ?? 0) + s.value;
  return out;
}
