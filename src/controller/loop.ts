// The one builder of a reconcile loop, used by the claims controller and the allocator alike (the shape of
// controller-runtime's pkg/reconcile and pkg/internal/controller): a work queue of keys, workers that run only while
// this replica leads, a periodic resync, and a reconciler of one shape. A key is a typed request `{namespace, name}`
// (`namespace/name` in the queue; a cluster-wide object has the empty namespace); its reconcile is
//   gather (caches, and the few API reads the caches cannot answer) → decide (pure: plan from input) → at most one
//   more gather, when the plan shows a read only it could ask for, and decide again → apply (writes, Events), and
//   apply's result says whether and when to run the key again.
// Keys come from declarative watches (controller-runtime's Watches + EnqueueRequestsFromMapFunc): each source's events
// mapped to the keys they concern.
// The queue (src/queue) keeps controller-runtime's contract: a key waits at most once, runs on one worker at a time,
// and runs once more if it was added while running.

import { type ObjectKey, parseKey } from '../kube/key.ts';
import type { Logger } from 'pino';
import type { Observable, Subscription } from 'rxjs';
import { type ReconcileContext, type ReconcileResult, WorkQueue } from '../queue/index.ts';
import { serveQueue, type ServeOptions } from '../queue/serve.ts';
import { reconcileMetrics, workQueueMetrics } from '../telemetry/bindings.ts';
import type { Metrics } from '../telemetry/metrics.ts';

/** What one reconcile is about: an object, or for a cluster-wide one (an allocator network) the empty namespace. */
export type Request = ObjectKey;

export interface LoopReconciler<Input, Plan> {
  gather(request: Request, ctx: ReconcileContext): Promise<Input>;
  /** Pure: every rule of the loop is here, none in gather or apply. */
  decide(input: Input): Plan;
  /** The input with the reads `plan` still needs (the loop then decides once more), or undefined when it needs none. */
  gatherMore?(input: Input, plan: Plan, ctx: ReconcileContext): Promise<Input | undefined>;
  apply(request: Request, input: Input, plan: Plan, ctx: ReconcileContext): Promise<ReconcileResult>;
}

export interface LoopOptions<Input, Plan> {
  /** The queue's name, its metrics' `name` label and the reconcile metrics' `controller` label. */
  name: string;
  reconciler: LoopReconciler<Input, Plan>;
  /** Every key, for the periodic full pass. */
  keys: () => Iterable<string>;
  /** The events that bring keys into the queue. */
  watches?: readonly Watch[];
  log: Logger;
  metrics?: Metrics;
}

/** A source of events mapped to the keys each event concerns, subscribed by the loop to its queue. */
export type Watch = (queue: WorkQueue) => Subscription;

/**
 * Every key `toKeys` gives for an event of `source` goes into the queue; with `listsLow`, behind live changes when
 * the event comes from a full list (every object at start-up, the differences after a relist).
 */
export function watch<E extends { fromList?: true }>(
  source: Observable<E>,
  toKeys: (event: E) => Iterable<string>,
  options: { listsLow?: boolean } = {},
): Watch {
  return (queue) =>
    source.subscribe((e) => {
      for (const key of toKeys(e)) queue.add(key, options.listsLow && e.fromList ? { priority: 'low' } : {});
    });
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
  /** Stops mapping events to keys (call after the sources stopped). */
  dispose(): void;
}

type Reconciler = (key: string, ctx: ReconcileContext) => Promise<ReconcileResult>;

/** One reconcile of a queue key: gather, decide (once more after the reads the first plan asks for), apply. */
export function reconcileOf<Input, Plan>(reconciler: LoopReconciler<Input, Plan>): Reconciler {
  return async (key, ctx) => {
    const request = parseKey(key);
    let input = await reconciler.gather(request, ctx);
    let plan = reconciler.decide(input);
    const more = await reconciler.gatherMore?.(input, plan, ctx);
    if (more !== undefined) plan = reconciler.decide((input = more));
    return reconciler.apply(request, input, plan, ctx);
  };
}

/** Create before the sources start, so that their initial events reach the queue. */
export function createLoop<Input, Plan>(options: LoopOptions<Input, Plan>): Loop {
  const { name, reconciler, log, metrics } = options;
  const queue = new WorkQueue({ name, ...(metrics ? { metrics: workQueueMetrics(metrics, name) } : {}) });
  const reconcile = reconcileOf(reconciler);
  const subscriptions = (options.watches ?? []).map((subscribe) => subscribe(queue));
  return {
    queue,
    reconcile,
    dispose: () => {
      for (const s of subscriptions) s.unsubscribe();
    },
    serve: (serve, signal, wrapped = reconcile) =>
      serveQueue(
        queue,
        { ...serve, reconcile: wrapped, keys: options.keys, logger: log, ...(metrics ? { metrics: reconcileMetrics(metrics, name) } : {}) },
        signal,
      ),
  };
}
