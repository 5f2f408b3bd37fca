// Runs a reconciler over a work queue with a fixed number of workers, translating each outcome into the queue
// operation controller-runtime would perform, so that retry behaviour is the familiar one.

import { pino, type Logger } from 'pino';
import { type Clock, realClock } from '../kube/clock.ts';
import type { WorkQueue } from './queue.ts';

/** What a reconcile asks for when it returns normally. */
export interface ReconcileResult {
  /** Run again with the key's rate-limited backoff (counts as a retry). */
  requeue?: boolean;
  /** Run again after this many milliseconds; resets the backoff. Wins over `requeue`. */
  requeueAfter?: number;
}

export interface ReconcileContext {
  /** Aborted when the queue's shutdown deadline passes. */
  signal: AbortSignal;
  /** Failures of this key since its last success (0 on a first attempt). */
  retries: number;
}

export type Reconciler = (key: string, ctx: ReconcileContext) => Promise<ReconcileResult | void>;

/**
 * An error that retrying cannot fix (e.g. an object the API server rejects as invalid). The key is not requeued; the
 * next change to the object (or a resync) brings it back.
 */
export class TerminalError extends Error {
  override readonly name: string = 'TerminalError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** An error and its `cause` chain (a cycle ends it). */
function* causeChain(err: unknown): Generator<Error> {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    yield e;
  }
}

/** True for a TerminalError anywhere in the `cause` chain, so wrapping an error does not make it retryable. */
export const isTerminalError = (err: unknown): boolean => [...causeChain(err)].some((e) => e instanceof TerminalError);

/**
 * The wait the server asked for (Retry-After, as `retryAfterSeconds` on the error or anywhere in its `cause`
 * chain, which is where src/kube/errors.ts puts it), in ms; 0 when none. Duck-typed so that this module does not
 * depend on the client.
 */
export function serverRetryDelayMs(err: unknown): number {
  for (const e of causeChain(err)) {
    const s = (e as { retryAfterSeconds?: unknown }).retryAfterSeconds;
    if (typeof s === 'number' && Number.isFinite(s) && s > 0) return s * 1000;
  }
  return 0;
}

export type ReconcileOutcome = 'success' | 'error' | 'requeue' | 'requeue_after';

/** Hooks named after controller-runtime's controller metrics (label `controller` = the queue's name). */
export interface ReconcileMetrics {
  /** controller_runtime_reconcile_total{result} */
  reconcileTotal?(result: ReconcileOutcome): void;
  /** controller_runtime_reconcile_errors_total */
  reconcileErrors?(): void;
  /** controller_runtime_terminal_reconcile_errors_total */
  terminalReconcileErrors?(): void;
  /** controller_runtime_reconcile_time_seconds (histogram) */
  reconcileTime?(seconds: number): void;
  /** controller_runtime_active_workers (gauge) */
  activeWorkers?(value: number): void;
  /** controller_runtime_max_concurrent_reconciles (gauge), reported once at start. */
  maxConcurrentReconciles?(value: number): void;
}

export interface RunWorkersOptions {
  logger?: Logger;
  metrics?: ReconcileMetrics;
  clock?: Clock;
}

export interface WorkerPool {
  /** Resolves when every worker has exited, i.e. after the queue was shut down and handed out its last key. */
  readonly done: Promise<void>;
  /** Workers currently inside a reconcile. */
  active(): number;
}

export function runWorkers(queue: WorkQueue, concurrency: number, reconcile: Reconciler, options: RunWorkersOptions = {}): WorkerPool {
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`work queue ${queue.name}: concurrency must be a positive integer, got ${concurrency}`);
  }
  const logger = (options.logger ?? pino({ level: 'silent' })).child({ controller: queue.name });
  const metrics = options.metrics ?? {};
  const clock = options.clock ?? realClock;
  let active = 0;
  metrics.maxConcurrentReconciles?.(concurrency);

  const handle = async (key: string): Promise<void> => {
    const retries = queue.numRequeues(key);
    const started = clock.now();
    const timed = (): void => metrics.reconcileTime?.((clock.now() - started) / 1000);
    let result: ReconcileResult | void;
    try {
      result = await reconcile(key, { signal: queue.abortSignal, retries });
    } catch (error) {
      timed();
      metrics.reconcileTotal?.('error');
      if (isTerminalError(error)) {
        metrics.terminalReconcileErrors?.();
        queue.forget(key);
        logger.error({ err: error, key }, 'reconcile failed permanently; not retrying until the object changes');
      } else {
        metrics.reconcileErrors?.();
        const serverDelayMs = serverRetryDelayMs(error);
        queue.addRateLimited(key, serverDelayMs);
        logger.warn(
          { err: error, key, retries: retries + 1, ...(serverDelayMs > 0 ? { retryAfterMs: serverDelayMs } : {}) },
          'reconcile failed; retrying with backoff',
        );
      }
      return;
    }
    timed();
    const after = result?.requeueAfter;
    if (after !== undefined && after > 0) {
      metrics.reconcileTotal?.('requeue_after');
      queue.forget(key);
      queue.addAfter(key, after);
    } else if (result?.requeue) {
      metrics.reconcileTotal?.('requeue');
      queue.addRateLimited(key);
    } else {
      metrics.reconcileTotal?.('success');
      queue.forget(key);
    }
  };

  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      active++;
      metrics.activeWorkers?.(active);
      try {
        await handle(key);
      } finally {
        active--;
        metrics.activeWorkers?.(active);
        queue.done(key);
      }
    }
  };

  const done = Promise.all(Array.from({ length: concurrency }, () => worker())).then(() => undefined);
  return { done, active: () => active };
}
