// The one builder of a reconcile loop, used by the claims controller and the allocator alike (the shape of
// controller-runtime's pkg/reconcile and pkg/internal/controller): a work queue of keys, workers that run only while
// this replica leads, a periodic resync, and a reconciler of one shape. A key is a typed request `{namespace, name}`
// (`namespace/name` in the queue; a cluster-wide object has the empty namespace); its reconcile is
//   gather (caches, and the few API reads the caches cannot answer) → decide (pure: plan from input) → apply (writes,
//   Events), and apply's result says whether and when to run the key again.
// The queue (src/queue) keeps controller-runtime's contract: a key waits at most once, runs on one worker at a time,
// and runs once more if it was added while running.

import type { Logger } from 'pino';
import { type ReconcileContext, type ReconcileResult, WorkQueue } from '../queue/index.ts';
import { serveQueue, type ServeOptions } from '../queue/serve.ts';
import { reconcileMetrics, workQueueMetrics } from '../telemetry/bindings.ts';
import type { Metrics } from '../telemetry/metrics.ts';

/** What one reconcile is about: an object, or for a cluster-wide one (an allocator network) the empty namespace. */
export interface Request {
  namespace: string;
  name: string;
}

/** The queue key of a request. */
export const requestKey = (namespace: string, name: string): string => `${namespace}/${name}`;

/** The request of a queue key (the name may itself hold a `/`: only the first one separates). */
export function requestOf(key: string): Request {
  const slash = key.indexOf('/');
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

export interface LoopReconciler<Input, Plan> {
  gather(request: Request, ctx: ReconcileContext): Promise<Input>;
  /** Pure: every rule of the loop is here, none in gather or apply. */
  decide(input: Input): Plan;
  apply(request: Request, input: Input, plan: Plan, ctx: ReconcileContext): Promise<ReconcileResult>;
}

export interface LoopOptions<Input, Plan> {
  /** The queue's name, its metrics' `name` label and the reconcile metrics' `controller` label. */
  name: string;
  reconciler: LoopReconciler<Input, Plan>;
  /** Every key, for the periodic full pass. */
  keys: () => Iterable<string>;
  log: Logger;
  metrics?: Metrics;
}

export interface Loop {
  readonly queue: WorkQueue;
  /** One reconcile of a key, as a worker runs it (tests and callers that wrap it). */
  reconcile: Reconciler;
  /**
   * Runs the workers and the resync until `signal` aborts, then lets in-flight reconciles finish within
   * `drainTimeoutMs` (call only as the leader). `reconcile` may wrap this loop's own (to count).
   */
  serve(options: Pick<ServeOptions, 'concurrency' | 'resyncIntervalMs' | 'drainTimeoutMs'>, signal: AbortSignal, reconcile?: Reconciler): Promise<void>;
}

type Reconciler = (key: string, ctx: ReconcileContext) => Promise<ReconcileResult>;

/** One reconcile of a queue key: gather, decide, apply. */
export function reconcileOf<Input, Plan>(reconciler: LoopReconciler<Input, Plan>): Reconciler {
  return async (key, ctx) => {
    const request = requestOf(key);
    const input = await reconciler.gather(request, ctx);
    return reconciler.apply(request, input, reconciler.decide(input), ctx);
  };
}

/** Create before the sources start, so that their initial events reach the queue. */
export function createLoop<Input, Plan>(options: LoopOptions<Input, Plan>): Loop {
  const { name, reconciler, log, metrics } = options;
  const queue = new WorkQueue({ name, ...(metrics ? { metrics: workQueueMetrics(metrics, name) } : {}) });
  const reconcile = reconcileOf(reconciler);
  return {
    queue,
    reconcile,
    serve: (serve, signal, wrapped = reconcile) =>
      serveQueue(
        queue,
        { ...serve, reconcile: wrapped, keys: options.keys, logger: log, ...(metrics ? { metrics: reconcileMetrics(metrics, name) } : {}) },
        signal,
      ),
  };
}
