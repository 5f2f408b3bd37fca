// V8 sized for memory, once the process has reached its steady state.
//
// The controller's working set is a cache that grows with the cluster and is then read far more than written, and it
// runs under a container memory limit: V8's default heuristics (grow the heap 1.1-4x past what is live, keep freed
// pages pooled) trade resident memory for fewer collections, which is the wrong trade for the long steady state.
// --optimize-for-size keeps the committed heap close to what is live, which lowers the steady resident memory.
//
// During a burst (the cold start's list and writes, a relist) the same flag makes V8 collect more often while the
// heap grows: more CPU per claim for a slightly lower peak, a poor trade while claims are being made. So the process
// starts with V8's defaults and switches when the burst is over: caches synced and the work queues drained (nothing queued, in flight or in backoff). A standby
// never drains its queue (only the leader's workers do), and a leader under constant churn may not either, so the
// switch happens at the latest a fixed time after the caches synced. V8 reads the flag at run time, and Node does not
// admit it in NODE_OPTIONS, hence v8.setFlagsFromString. It is never switched back (V8 flags are not meant to be
// toggled).
// PERSISTENT_IPS_V8_DEFAULTS=1 leaves V8's defaults alone (to compare, or if a future Node stops honouring it).
import { setFlagsFromString } from 'node:v8';

/** At the latest this long after the caches synced, V8 is sized for memory whatever the queues hold. */
export const STEADY_STATE_AT_THE_LATEST_MS = 120_000;

export interface SteadyStateInput {
  /** Every informer has listed once. */
  synced: boolean;
  /** No key waiting or in flight in any work queue. */
  queuesIdle: boolean;
  /** Since the caches first synced. */
  sinceSyncedMs: number;
}

/** Whether the start-up burst is over. */
export function steadyState(s: SteadyStateInput): boolean {
  return s.synced && (s.queuesIdle || s.sinceSyncedMs >= STEADY_STATE_AT_THE_LATEST_MS);
}

let sized = false;

/** Sets --optimize-for-size once; false when it was already set or the environment asks for V8's defaults. */
export function sizeV8ForMemory(env: NodeJS.ProcessEnv = process.env, setFlags: (flags: string) => void = setFlagsFromString): boolean {
  if (sized || env.PERSISTENT_IPS_V8_DEFAULTS === '1') return false;
  setFlags('--optimize-for-size');
  sized = true;
  return true;
}

/**
 * Checks every `everyMs` (from now, which should be when the caches synced) and calls `onSteady` once, the first time
 * steadyState() holds. Returns a function that stops the checks.
 */
export function whenSteady(opts: { queuesIdle: () => boolean; onSteady: () => void; everyMs?: number; now?: () => number }): () => void {
  const now = opts.now ?? Date.now;
  const syncedAt = now();
  const timer = setInterval(() => {
    if (!steadyState({ synced: true, queuesIdle: opts.queuesIdle(), sinceSyncedMs: now() - syncedAt })) return;
    clearInterval(timer);
    opts.onSteady();
  }, opts.everyMs ?? 1000);
  timer.unref();
  return () => clearInterval(timer);
}
