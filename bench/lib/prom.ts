// Prometheus text format, just enough for counters and gauges: `name{label="value",...} number`.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Samples of the metrics whose names pass `want` (all when omitted). */
export function parseMetrics(text: string, want?: (name: string) => boolean): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const name = m[1]!;
    if (want && !want(name)) continue;
    const labels: Record<string, string> = {};
    if (m[3]) for (const l of m[3].matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, '$1');
    out.push({ name, labels, value: Number(m[4]) });
  }
  return out;
}

/** The sum of the samples of `name` whose labels match `match`. */
export function sum(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  let total = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
  }
  return total;
}

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
