// Named cases with their wall time, and the summary lines every operability file prints at its end (see
// summaryAtEnd): the last file of a run prints the run's total,
//   e2e operability: N cases against Kubernetes v1.34.2 (P passed, F failed; <areas>)
import { appendFileSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it, type TestContext } from 'node:test';
import type { World } from './world.ts';

export interface Tally {
  area: string;
  ran: number;
  passed: number;
  failed: number;
  startedAt: number;
}

export function tally(area: string): Tally {
  return { area, ran: 0, passed: 0, failed: 0, startedAt: Date.now() };
}

/** A case: counted, timed (wall time as a diagnostic), and a failure keeps the work directory. */
export function operabilityCase(world: World, t: Tally, name: string, fn: (ctx: TestContext) => Promise<void>, opts: { timeoutMs?: number } = {}): void {
  it(name, { timeout: opts.timeoutMs ?? 180_000 }, async (ctx) => {
    t.ran++;
    const t0 = Date.now();
    try {
      await fn(ctx);
      t.passed++;
    } catch (err) {
      t.failed++;
      world.failed = true;
      throw err;
    } finally {
      ctx.diagnostic(`wall time ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  });
}

/**
 * Where the files of one `node --test` run add up their counts: the runner is the parent of every file's process
 * (NODE_TEST_CONTEXT is set there), so its pid and start time name the run. Outside the runner, no total is kept.
 */
function runTallyFile(): string | undefined {
  if (!process.env['NODE_TEST_CONTEXT']) return undefined;
  let started = '';
  try {
    const stat = readFileSync(`/proc/${process.ppid}/stat`, 'utf8');
    started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    /* not Linux: the pid alone */
  }
  return join(tmpdir(), `${TALLY_PREFIX}${process.ppid}-${started}.jsonl`);
}
const TALLY_PREFIX = 'persistent-ips-operability-tally-';

/** Adds this file's counts to the run's and returns the run's totals so far (this file's alone outside the runner). */
function addToRun(t: Tally): { ran: number; passed: number; failed: number; areas: string[] } {
  const file = runTallyFile();
  const mine = { area: t.area, ran: t.ran, passed: t.passed, failed: t.failed };
  if (!file) return { ...mine, areas: [t.area] };
  // Tallies of runs long gone.
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(TALLY_PREFIX)) continue;
    const path = join(tmpdir(), name);
    try {
      if (path !== file && Date.now() - statSync(path).mtimeMs > 3_600_000) rmSync(path, { force: true });
    } catch {
      /* gone meanwhile */
    }
  }
  appendFileSync(file, `${JSON.stringify(mine)}\n`);
  const all = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as typeof mine);
  return {
    ran: all.reduce((n, x) => n + x.ran, 0),
    passed: all.reduce((n, x) => n + x.passed, 0),
    failed: all.reduce((n, x) => n + x.failed, 0),
    areas: all.map((x) => x.area),
  };
}

/**
 * Registers the file's summary (a root-level after hook: printed once every case has run): this file's counts, then
 * the line for every operability file of this run so far, which after the last file is the total:
 *   e2e operability: N cases against Kubernetes v1.34.2 (P passed, F failed; areas ...)
 */
export function summaryAtEnd(world: World, t: Tally): void {
  after((ctx) => {
    const version = world.cp?.version ?? '(no cluster)';
    ctx.diagnostic(
      `e2e operability [${t.area}]: ${t.ran} cases (${t.passed} passed, ${t.failed} failed) in ${((Date.now() - t.startedAt) / 1000).toFixed(0)} s`,
    );
    const run = addToRun(t);
    ctx.diagnostic(`e2e operability: ${run.ran} cases against Kubernetes ${version} (${run.passed} passed, ${run.failed} failed; ${run.areas.join(', ')})`);
  });
}

/** Milliseconds as seconds with one decimal. */
export const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
