// Reconnect delays for list/watch: exponential with a cap, as client-go's reflector (800 ms doubling to 30 s), and
// jittered so that many informers (or replicas) that lost the API server together do not return in lockstep.

export interface BackoffPolicy {
  /** Delay after the first failure (before jitter). Default 800 ms. */
  initialMs?: number;
  /** Ceiling (before jitter). Default 30 s. */
  maxMs?: number;
  /** Growth per failure. Default 2. */
  factor?: number;
}

export const DEFAULT_RECONNECT_BACKOFF: Required<BackoffPolicy> = { initialMs: 800, maxMs: 30_000, factor: 2 };

/**
 * The delay before reconnect attempt `failures` (1 = after the first failure). "Equal jitter": half the capped
 * exponential plus a random share of the other half, so the delay never exceeds the cap and never drops below
 * half of it. `random` returns a number in [0, 1).
 */
export function reconnectDelay(failures: number, policy: BackoffPolicy = {}, random: () => number = Math.random): number {
  if (failures <= 0) return 0;
  const p = { ...DEFAULT_RECONNECT_BACKOFF, ...policy };
  const base = Math.min(p.maxMs, p.initialMs * p.factor ** (failures - 1));
  return base / 2 + (random() * base) / 2;
}
