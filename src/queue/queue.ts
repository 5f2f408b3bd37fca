// A work queue over string keys with controller-runtime's contract: a key waits at most once (de-duplication), is
// handed to at most one worker at a time, and a key added while it is being processed is processed exactly once
// more after `done`. Together these make reconciles level-triggered: any burst of events for one object costs at
// most one reconcile in flight plus one queued.
//
// Two priorities, as controller-runtime's priority queue: keys added by a full pass (the initial list, a relist, a
// resync) wait behind keys added because something changed. A resync of 10,000 VMs enqueues 10,000 keys with
// nothing to do; a VM created meanwhile must not wait for all of them.

import { type Clock, type TimerHandle, realClock } from '../kube/clock.ts';
import { ExponentialFailureRateLimiter } from './rate-limiter.ts';

/**
 * Hooks named after controller-runtime's workqueue metrics (label `name` = the queue's name), so that telemetry can
 * bind prom-client collectors without this module depending on it. Every hook is optional.
 */
export interface WorkQueueMetrics {
  /** workqueue_depth (gauge): keys waiting to be handed out. */
  depth?(value: number): void;
  /** workqueue_adds_total (counter): adds that were not de-duplicated away. */
  adds?(): void;
  /** workqueue_queue_duration_seconds (histogram): time from add to hand-out. */
  queueDuration?(seconds: number): void;
  /** workqueue_work_duration_seconds (histogram): time from hand-out to `done`. */
  workDuration?(seconds: number): void;
  /** workqueue_retries_total (counter): calls to `addRateLimited`. */
  retries?(): void;
  /** Keys currently handed out (controller_runtime_active_workers when one queue feeds one pool). */
  inFlight?(value: number): void;
}

export interface WorkQueueOptions {
  /** Used in logs and as the metrics label. */
  name?: string;
  clock?: Clock;
  metrics?: WorkQueueMetrics;
}

export interface AddOptions {
  /** 'low': a bulk pass (list, resync), handed out only when no key of normal priority waits. A later add of
   * normal priority promotes a waiting low key. */
  priority?: 'low';
}

export interface ShutDownOptions {
  /** true: keys already queued are still handed out before the queue reports completion. Default false. */
  drain?: boolean;
  /** Give up waiting after this long; keys still in flight are reported as abandoned. Default: wait forever. */
  timeoutMs?: number;
}

export interface ShutDownResult {
  /** The deadline passed before every in-flight key was done. */
  timedOut: boolean;
  /** Keys still being processed when the deadline passed. */
  abandoned: string[];
  /** Keys that were queued but never handed out (all queued keys without drain; leftovers at the deadline). */
  dropped: string[];
}

/** A FIFO whose shift is O(1) amortised; Array.prototype.shift is O(n) and queues can hold every key. */
class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  takeAll(): T[] {
    const all = this.#items.slice(this.#head);
    this.#items = [];
    this.#head = 0;
    return all;
  }
}

interface Shutdown {
  drain: boolean;
  expired: boolean;
  dropped: string[];
  promise: Promise<ShutDownResult>;
  resolve: (r: ShutDownResult) => void;
  timer?: TimerHandle;
  settled: boolean;
}

export class WorkQueue {
  readonly name: string;
  readonly #clock: Clock;
  /** client-go's defaults: 5 ms doubling up to 1000 s. */
  readonly #limiter = new ExponentialFailureRateLimiter();
  readonly #metrics: WorkQueueMetrics;

  readonly #queue = new Fifo<string>();
  /** Keys of low priority; the FIFO may hold stale entries for keys promoted or handed out since. */
  readonly #low = new Fifo<string>();
  readonly #lowKeys = new Set<string>();
  /** In-flight keys re-added by a bulk pass only: `done` queues them at low priority, not ahead of live keys. */
  readonly #lowAfterDone = new Set<string>();
  /** Keys that must be processed (again): queued ones, and in-flight ones that changed meanwhile. */
  readonly #dirty = new Set<string>();
  /** In-flight keys → hand-out time. */
  readonly #processing = new Map<string, number>();
  /** Dirty keys → time of the add that made them dirty, for the queue-duration metric. */
  readonly #addedAt = new Map<string, number>();
  readonly #delayed = new Map<string, { at: number; handle: TimerHandle }>();
  #waiters: (() => void)[] = [];
  #shutdown: Shutdown | undefined;
  readonly #abort = new AbortController();

  constructor(options: WorkQueueOptions = {}) {
    this.name = options.name ?? 'queue';
    this.#clock = options.clock ?? realClock;
    this.#metrics = options.metrics ?? {};
  }

  /** Aborted when a shutdown deadline passes: reconcilers still running should give up. */
  get abortSignal(): AbortSignal {
    return this.#abort.signal;
  }

  get shuttingDown(): boolean {
    return this.#shutdown !== undefined;
  }

  /** Keys waiting to be handed out. */
  len(): number {
    return this.#queue.length + this.#lowKeys.size;
  }

  /** Keys scheduled by addAfter/addRateLimited whose delay has not passed yet. */
  delayedCount(): number {
    return this.#delayed.size;
  }

  /** Nothing waiting, in flight, or waiting out a delay: every key added so far has been handled. */
  idle(): boolean {
    return this.len() === 0 && this.#processing.size === 0 && this.#delayed.size === 0;
  }

  add(key: string, options: AddOptions = {}): void {
    if (this.#shutdown) return;
    const low = options.priority === 'low';
    if (this.#dirty.has(key)) {
      // Waiting at low priority and now wanted because something changed: move it up.
      if (!low && this.#lowKeys.delete(key)) this.#push(key);
      if (!low) this.#lowAfterDone.delete(key);
      return;
    }
    this.#metrics.adds?.();
    this.#dirty.add(key);
    this.#addedAt.set(key, this.#clock.now());
    // In flight: `done` puts it back, so that one worker never holds the same key twice.
    if (this.#processing.has(key)) {
      if (low) this.#lowAfterDone.add(key);
      return;
    }
    this.#push(key, low);
  }

  addAfter(key: string, delayMs: number): void {
    if (this.#shutdown) return;
    if (!(delayMs > 0)) {
      this.add(key);
      return;
    }
    const at = this.#clock.now() + delayMs;
    const existing = this.#delayed.get(key);
    // The earliest wish wins: a later one would only postpone work somebody asked to see sooner.
    if (existing && existing.at <= at) return;
    if (existing) this.#clock.clearTimeout(existing.handle);
    const handle = this.#clock.setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.#delayed.set(key, { at, handle });
  }

  /**
   * Retries `key` after its backoff, or after `atLeastMs` when that is longer: the API server's Retry-After on a
   * 429 from API Priority and Fairness is the server saying how long it needs, and retrying sooner only adds load.
   */
  addRateLimited(key: string, atLeastMs = 0): void {
    if (this.#shutdown) return;
    this.#metrics.retries?.();
    this.addAfter(key, Math.max(this.#limiter.when(key), atLeastMs));
  }

  forget(key: string): void {
    this.#limiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.#limiter.numRequeues(key);
  }

  /**
   * Waits for the next key and marks it in flight; the caller must call `done(key)` afterwards. Resolves to
   * undefined once the queue is shut down and has nothing more to hand out: the worker should exit.
   */
  async get(): Promise<string | undefined> {
    for (;;) {
      if (this.#handingOut()) {
        const key = this.#next();
        if (key !== undefined) {
          const now = this.#clock.now();
          this.#dirty.delete(key);
          this.#processing.set(key, now);
          const addedAt = this.#addedAt.get(key);
          this.#addedAt.delete(key);
          if (addedAt !== undefined) this.#metrics.queueDuration?.((now - addedAt) / 1000);
          this.#metrics.depth?.(this.len());
          this.#metrics.inFlight?.(this.#processing.size);
          return key;
        }
      }
      if (this.#shutdown) return undefined;
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** The next key to hand out: normal priority first, then low (skipping entries promoted meanwhile). */
  #next(): string | undefined {
    const key = this.#queue.shift();
    if (key !== undefined) return key;
    for (let k = this.#low.shift(); k !== undefined; k = this.#low.shift()) {
      if (this.#lowKeys.delete(k)) return k;
    }
    return undefined;
  }

  done(key: string): void {
    const started = this.#processing.get(key);
    if (started === undefined) return;
    this.#processing.delete(key);
    this.#metrics.workDuration?.((this.#clock.now() - started) / 1000);
    this.#metrics.inFlight?.(this.#processing.size);
    const low = this.#lowAfterDone.delete(key);
    if (this.#dirty.has(key)) {
      if (this.#handingOut()) this.#push(key, low);
      else {
        this.#dirty.delete(key);
        this.#addedAt.delete(key);
        this.#shutdown?.dropped.push(key);
      }
    }
    this.#settleShutdownIfIdle();
  }

  /**
   * Stops accepting keys (adds become no-ops, pending delays are cancelled) and resolves once nothing is in flight
   * (and, with `drain`, nothing is queued), or when `timeoutMs` passes. Idempotent: later calls get the first
   * call's result.
   */
  shutDown(options: ShutDownOptions = {}): Promise<ShutDownResult> {
    if (this.#shutdown) return this.#shutdown.promise;
    const { promise, resolve } = Promise.withResolvers<ShutDownResult>();
    const drain = options.drain ?? false;
    const sd: Shutdown = { drain, expired: false, dropped: [], promise, resolve, settled: false };
    this.#shutdown = sd;

    for (const { handle } of this.#delayed.values()) this.#clock.clearTimeout(handle);
    this.#delayed.clear();
    if (!drain) this.#dropQueued(sd);

    if (options.timeoutMs !== undefined) {
      sd.timer = this.#clock.setTimeout(() => {
        sd.timer = undefined;
        if (sd.settled) return;
        sd.expired = true;
        this.#dropQueued(sd);
        const abandoned = [...this.#processing.keys()];
        this.#abort.abort(new Error(`work queue ${this.name}: shutdown deadline passed with ${abandoned.length} keys in flight`));
        this.#settle({ timedOut: true, abandoned, dropped: sd.dropped });
      }, options.timeoutMs);
    }
    this.#wakeAll();
    this.#settleShutdownIfIdle();
    return promise;
  }

  #handingOut(): boolean {
    const sd = this.#shutdown;
    return sd === undefined || (sd.drain && !sd.expired);
  }

  #push(key: string, low = false): void {
    if (low) {
      this.#low.push(key);
      this.#lowKeys.add(key);
    } else this.#queue.push(key);
    this.#metrics.depth?.(this.len());
    this.#waiters.shift()?.();
  }

  #wakeAll(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  #dropQueued(sd: Shutdown): void {
    const low = this.#low.takeAll().filter((k) => this.#lowKeys.delete(k));
    for (const key of [...this.#queue.takeAll(), ...low]) {
      this.#dirty.delete(key);
      this.#addedAt.delete(key);
      sd.dropped.push(key);
    }
    this.#metrics.depth?.(0);
  }

  #settleShutdownIfIdle(): void {
    const sd = this.#shutdown;
    if (!sd || sd.settled) return;
    if (this.#processing.size > 0) return;
    if (this.#handingOut() && this.len() > 0) return;
    this.#settle({ timedOut: false, abandoned: [], dropped: sd.dropped });
  }

  #settle(result: ShutDownResult): void {
    const sd = this.#shutdown;
    if (!sd || sd.settled) return;
    sd.settled = true;
    if (sd.timer !== undefined) this.#clock.clearTimeout(sd.timer);
    this.#wakeAll();
    sd.resolve(result);
  }
}
