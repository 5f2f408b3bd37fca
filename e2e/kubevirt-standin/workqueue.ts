// A small keyed work queue for the KubeVirt stand-in (test infrastructure, see standin.ts), with the semantics of
// client-go's: a key is processed by one worker at a time, a key added while it is being processed is processed
// again afterwards, failures are retried with per-key exponential backoff, and a success resets the backoff.
import type { Logger } from 'pino';

export type Reconcile = (key: string) => Promise<void>;

export interface WorkQueueOptions {
  workers?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Errors retried without a warning for their first attempts (lost races). */
  isQuiet?: (err: unknown) => boolean;
}

const QUIET_ATTEMPTS = 5;

export class WorkQueue {
  readonly #reconcile: Reconcile;
  readonly #log: Logger;
  readonly #workers: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #isQuiet: (err: unknown) => boolean;
  readonly #ready: string[] = [];
  readonly #queued = new Set<string>();
  readonly #active = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #running = new Set<Promise<void>>();
  #stopped = false;

  constructor(reconcile: Reconcile, log: Logger, opts: WorkQueueOptions = {}) {
    this.#reconcile = reconcile;
    this.#log = log;
    this.#workers = opts.workers ?? 4;
    this.#baseDelayMs = opts.baseDelayMs ?? 50;
    this.#maxDelayMs = opts.maxDelayMs ?? 5_000;
    this.#isQuiet = opts.isQuiet ?? (() => false);
  }

  /** Queues `key` now (or after `delayMs`); a key already waiting is not queued twice. */
  add(key: string, delayMs = 0): void {
    if (this.#stopped) return;
    if (delayMs > 0) {
      if (this.#timers.has(key)) return;
      const t = setTimeout(() => {
        this.#timers.delete(key);
        this.add(key);
      }, delayMs);
      t.unref();
      this.#timers.set(key, t);
      return;
    }
    if (this.#active.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    this.#ready.push(key);
    this.#pump();
  }

  #pump(): void {
    while (!this.#stopped && this.#active.size < this.#workers) {
      const idx = this.#ready.findIndex((k) => !this.#active.has(k));
      if (idx < 0) break;
      const key = this.#ready.splice(idx, 1)[0]!;
      this.#queued.delete(key);
      this.#active.add(key);
      const run = this.#process(key);
      this.#running.add(run);
      void run.finally(() => this.#running.delete(run));
    }
  }

  async #process(key: string): Promise<void> {
    try {
      await this.#reconcile(key);
      this.#failures.delete(key);
    } catch (err) {
      const n = (this.#failures.get(key) ?? 0) + 1;
      this.#failures.set(key, n);
      const delay = Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** (n - 1));
      const fields = { key, attempt: n, retryInMs: delay, err: err instanceof Error ? err.message : String(err) };
      if (this.#isQuiet(err) && n <= QUIET_ATTEMPTS) this.#log.debug(fields, 'lost a race, reconciling again');
      else this.#log.warn(fields, 'reconcile failed, will retry');
      this.add(key, delay);
    } finally {
      this.#active.delete(key);
      if (this.#dirty.delete(key)) this.add(key);
      this.#pump();
    }
  }

  /** Stops taking work and waits for the reconciles in flight. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
    this.#ready.length = 0;
    this.#queued.clear();
    await Promise.allSettled([...this.#running]);
  }
}
