// Named cases with their wall time, and the summary line every operability file prints at its end (summaryAtEnd).
import { after, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { worldCase } from '../kubevirt/world.ts';
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

/** A case of an operability file: the one case wrapper (worldCase), with the test context alone and 180 s. */
export const operabilityCase = (world: World, name: string, fn: (ctx: TestContext) => Promise<void>, opts: { timeoutMs?: number } = {}): void =>
  worldCase(world, name, ({ t }) => fn(t), { timeoutMs: 180_000, ...opts });

/**
 * Registers the file's summary (a root-level after hook: printed once every case has run):
 *   e2e operability [<area>]: N cases against Kubernetes v1.34.2 (P passed, F failed) in S s
 */
export function summaryAtEnd(world: World): void {
  after((ctx) => {
    const t = world.tally;
    const version = world.cp?.version ?? '(no cluster)';
    const wall = ((Date.now() - t.startedAt) / 1000).toFixed(0);
    ctx.diagnostic(`e2e operability [${t.area}]: ${t.ran} cases against Kubernetes ${version} (${t.passed} passed, ${t.failed} failed) in ${wall} s`);
  });
}

/** Milliseconds as seconds with one decimal. */
export const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** Runs `step` every `periodMs` (a pace, not a wait for something to happen; a slow step delays the next) until `done()`. */
export async function paced(periodMs: number, done: () => boolean, step: (i: number) => Promise<unknown>): Promise<void> {
  const t0 = Date.now();
  for (let i = 0; !done(); i++) {
    await step(i);
    await sleep(Math.max(0, t0 + (i + 1) * periodMs - Date.now()));
  }
}
