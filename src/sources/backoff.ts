// Reconnect delays for list/watch: exponential with a cap, as client-go's reflector (800 ms doubling to 30 s), and
// jittered so that many informers (or replicas) that lost the API server together do not return in lockstep.

/** Delay after the first failure, before jitter; it doubles with every further failure up to the ceiling. */
const INITIAL_MS = 800;
/** The ceiling (before jitter). */
export const DEFAULT_MAX_MS = 30_000;

/**
 * The delay before reconnect attempt `failures` (1 = after the first failure). "Equal jitter": half the capped
 * exponential plus a random share of the other half, so the delay never exceeds the cap and never drops below
 * half of it. `random` returns a number in [0, 1).
 */
export function reconnectDelay(failures: number, maxMs: number = DEFAULT_MAX_MS, random: () => number = Math.random): number {
  if (failures <= 0) return 0;
  const base = Math.min(maxMs, INITIAL_MS * 2 ** (failures - 1));
  return base / 2 + (random() * base) / 2;
}
