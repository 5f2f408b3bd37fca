// The life of a leader's queue: workers and periodic resync while `signal` is live, then a bounded drain. Shared
// by every controller loop of the process, so they all stop the same way when leadership ends.

import type { Logger } from 'pino';
import type { WorkQueue } from './queue.ts';
import { startResync } from './resync.ts';
import { runWorkers, type ReconcileMetrics, type Reconciler } from './runner.ts';

export interface ServeOptions {
  concurrency: number;
  reconcile: Reconciler;
  /** Every key, for the periodic full pass. */
  keys: () => Iterable<string>;
  resyncIntervalMs: number;
  /** How long in-flight reconciles may take to finish once `signal` aborts. */
  drainTimeoutMs: number;
  logger: Logger;
  metrics?: ReconcileMetrics;
}

/**
 * An abort reason that cancels in-flight work at once instead of draining it: a leader that lost its Lease may already
 * have a successor, and whatever it still wrote could race what the successor decides (two allocator passes choosing
 * from different views could hand one address out twice).
 */
export class AbandonInFlight extends Error {
  override readonly name = 'AbandonInFlight';
}

export async function serveQueue(queue: WorkQueue, options: ServeOptions, signal: AbortSignal): Promise<void> {
  const { logger } = options;
  const pool = runWorkers(queue, options.concurrency, options.reconcile, { logger, metrics: options.metrics });
  const resync = startResync(queue, { intervalMs: options.resyncIntervalMs, keys: options.keys, logger });
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  resync.stop();
  const result = await queue.shutDown({ timeoutMs: signal.reason instanceof AbandonInFlight ? 0 : options.drainTimeoutMs });
  if (result.timedOut) logger.warn({ queue: queue.name, abandoned: result.abandoned }, 'work still running at the shutdown deadline');
  await pool.done;
  logger.info({ queue: queue.name }, 'workers stopped');
}
