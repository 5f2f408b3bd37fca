// Named cases with their wall time, and the summary line every operability file prints at its end (summaryAtEnd).
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { summaryAtEnd as worldSummary, worldCase } from '../kubevirt/world.ts';
import type { World } from './world.ts';

/** A case of an operability file: the one case wrapper (worldCase), with the test context alone and 180 s. */
export const operabilityCase = (world: World, name: string, fn: (ctx: TestContext) => Promise<void>, opts: { timeoutMs?: number } = {}): void =>
  worldCase(world, name, ({ t }) => fn(t), { timeoutMs: 180_000, ...opts });

/** The summary line every operability file prints at its end: `e2e operability [<area>]: N cases against ...`. */
export const summaryAtEnd = (world: World): void => worldSummary(world, `e2e operability [${world.label}]`);

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
