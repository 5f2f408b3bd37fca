// The list+watch loop of one kind. It keeps a trimmed cache equal to the API server's state and emits the changes,
// surviving what a long-running watch meets: connection errors (reconnect with capped, jittered backoff, resuming
// from the last resourceVersion), an expired resourceVersion (410: relist and emit the difference), a watch that
// went silent without closing (restart it), and a server-side timeout (resume at once). The list and watch calls
// are injected, so tests script them; src/sources/kinds.ts binds them to the real client.

import type { Observable } from 'rxjs';
import { Subject } from '../streams/rx.ts';
import { deepFreeze } from './intern.ts';
import { pino, type Logger } from 'pino';
import { abortable, type Clock, type TimerHandle, realClock, sleep } from '../kube/clock.ts';
import { errorFromWatchStatus, isGone, isTransient, KubeApiError, type ApiStatus } from '../kube/errors.ts';
import { type ListPage, type PageRequest, DEFAULT_PAGE_SIZE, listAllPages } from '../kube/pager.ts';
import type { KubeObject } from '../kube/types.ts';
import type { WatchEvent } from '../kube/watch-stream.ts';
import { DEFAULT_MAX_MS, reconnectDelay } from './backoff.ts';
import { type ChangeEvent, type ChangeType, type IndexFn, Store } from './store.ts';
import { type Trim, UntrimmableObjectError } from './trim.ts';

export interface WatchRequest {
  resourceVersion: string;
  timeoutSeconds: number;
  allowWatchBookmarks: boolean;
  signal: AbortSignal;
}

/** The two API calls an informer needs, already scoped to one resource (and namespace, label selector). */
export interface ListWatch {
  list(req: PageRequest): Promise<ListPage<unknown>>;
  /** Ends normally when the server closes the watch; throws on failure; should stop promptly when `signal` aborts. */
  watch(req: WatchRequest): AsyncIterable<WatchEvent>;
}

export type InformerState = 'idle' | 'listing' | 'watching' | 'backoff' | 'stopped';

export type RestartReason = 'closed' | 'silent' | 'gone' | 'error';

/** Optional hooks for telemetry. */
export interface InformerMetrics {
  /** A full list: the first one, or one forced by 410 Gone, or a retry after a failed list. */
  list?(kind: string, reason: 'initial' | 'gone' | 'retry'): void;
  /** A new watch request after the previous one ended, and why it ended. */
  watchRestart?(kind: string, reason: RestartReason): void;
  /** An emitted event. */
  event?(kind: string, type: ChangeType): void;
}

export interface InformerOptions<T extends KubeObject> {
  /** The kind, for logs and errors. */
  kind: string;
  /** Informational: the namespace the ListWatch is scoped to (undefined = all). */
  namespace?: string;
  listWatch: ListWatch;
  trim: Trim<T>;
  logger?: Logger;
  clock?: Clock;
  /** In [0, 1); jitter for backoff and watch timeouts. */
  random?: () => number;
  pageSize?: number;
  /** Restart a watch that delivered neither an event nor a bookmark for this long. Default 150 s (the API server
   * sends a bookmark about every minute to watchers that allow them). */
  silentWatchTimeoutMs?: number;
  /** Server-side watch duration per request. Default: random in [300, 600) s, like client-go. */
  watchTimeoutSeconds?: number;
  metrics?: InformerMetrics;
}

/** `synced` rejects with this when the informer is stopped before its first list completed. */
export class InformerStoppedError extends Error {
  override readonly name: string = 'InformerStoppedError';
}

// The backoff's ceiling while the API server does not answer at all (connection refused, reset, timeout): such
// attempts cost the server nothing, and a short ceiling notices within seconds that it is back. Answered failures
// (5xx, 429) keep the usual ceiling.
const UNREACHABLE_MAX_MS = 3200;
// A watch that ends normally sooner than this with no event is a failure (backoff), so that a server or proxy that
// closes watches at once does not make us spin.
const MIN_WATCH_MS = 1000;

/** Why a watch was abandoned; used as the abort reason so the loop can tell it from other failures. */
class SilentWatch extends Error {}

export class Informer<T extends KubeObject> {
  readonly kind: string;
  readonly namespace: string | undefined;
  /** Every change, in order. Subscribe before `start()` to see the initial adds. Completes on `stop()`. */
  readonly events$: Observable<ChangeEvent<T>>;
  /** Resolves once the first full list is in the cache (its add events already emitted). */
  readonly synced: Promise<void>;

  readonly #store = new Store<T>();
  readonly #subject = new Subject<ChangeEvent<T>>();
  readonly #lw: ListWatch;
  readonly #trim: Trim<T>;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #pageSize: number;
  readonly #silentMs: number;
  readonly #watchTimeoutSeconds: number | undefined;
  readonly #metrics: InformerMetrics;

  #state: InformerState = 'idle';
  #hasSynced = false;
  #resolveSynced!: () => void;
  #rejectSynced!: (e: unknown) => void;
  #resourceVersion: string | undefined;
  #stopped = false;
  readonly #stop = new AbortController();
  #current: AbortController | undefined;
  /** Events the current watch delivered: a watch that made progress resets the backoff, even if it then fails. */
  #roundEvents = 0;
  #loop: Promise<void> | undefined;

  constructor(options: InformerOptions<T>) {
    this.kind = options.kind;
    this.namespace = options.namespace;
    this.#lw = options.listWatch;
    this.#trim = options.trim;
    this.#logger = (options.logger ?? pino({ level: 'silent' })).child({
      informer: options.kind,
      ...(options.namespace ? { namespace: options.namespace } : {}),
    });
    this.#clock = options.clock ?? realClock;
    this.#random = options.random ?? Math.random;
    this.#pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
    this.#silentMs = options.silentWatchTimeoutMs ?? 150_000;
    this.#watchTimeoutSeconds = options.watchTimeoutSeconds;
    this.#metrics = options.metrics ?? {};
    this.events$ = this.#subject.asObservable();
    this.synced = new Promise<void>((resolve, reject) => {
      this.#resolveSynced = resolve;
      this.#rejectSynced = reject;
    });
    // Nobody has to await `synced`; a stop before sync must not become an unhandled rejection.
    this.synced.catch(() => undefined);
  }

  get state(): InformerState {
    return this.#state;
  }

  get hasSynced(): boolean {
    return this.#hasSynced;
  }

  /** The resourceVersion the next watch resumes from. */
  get resourceVersion(): string | undefined {
    return this.#resourceVersion;
  }

  // The cache's reads and index registration, as the store answers them.
  readonly get = (namespace: string | undefined, name: string): T | undefined => this.#store.get(namespace, name);
  readonly getByKey = (key: string): T | undefined => this.#store.getByKey(key);
  readonly list = (namespace?: string): T[] => this.#store.list(namespace);
  readonly keys = (namespace?: string): string[] => this.#store.keys(namespace);
  readonly addIndex = (name: string, fn: IndexFn<T>): void => this.#store.addIndex(name, fn);
  readonly byIndex = (name: string, value: string): T[] => this.#store.byIndex(name, value);
  readonly indexKeys = (name: string, value: string): string[] => this.#store.indexKeys(name, value);

  get size(): number {
    return this.#store.size;
  }

  /** Starts the loop (idempotent). */
  start(): void {
    if (this.#stopped) throw new InformerStoppedError(`informer ${this.kind} was stopped; create a new one`);
    this.#loop ??= this.#run().catch((err: unknown) => {
      // The loop handles every failure itself; reaching this is a bug, and the informer must not die silently.
      this.#logger.fatal({ err }, 'informer loop crashed');
      this.#state = 'stopped';
    });
  }

  /** Ends the loop and the event stream. Resolves when no request is left open. No restart follows. */
  async stop(): Promise<void> {
    if (!this.#stopped) {
      this.#stopped = true;
      const reason = new InformerStoppedError(`informer ${this.kind} stopped`);
      this.#stop.abort(reason);
      this.#current?.abort(reason);
      if (!this.#hasSynced) this.#rejectSynced(reason);
    }
    await this.#loop;
    this.#state = 'stopped';
    this.#subject.complete();
  }

  async #run(): Promise<void> {
    let needList = true;
    let listReason: 'initial' | 'gone' | 'retry' = 'initial';
    let failures = 0;
    /** 410s in a row: a server that keeps answering 410 to fresh lists gets a backoff; a single one does not. */
    let goneStreak = 0;
    while (!this.#stopped) {
      const ac = new AbortController();
      this.#current = ac;
      this.#roundEvents = 0;
      let delay = 0;
      try {
        if (needList) {
          this.#state = 'listing';
          this.#metrics.list?.(this.kind, listReason);
          await this.#list(ac.signal);
          needList = false;
          failures = 0;
          goneStreak = 0;
        }
        if (this.#stopped) break;
        this.#state = 'watching';
        const outcome = await this.#watch(ac);
        if (outcome.events > 0) failures = 0;
        if (outcome.ending === 'silent') {
          // Not a failure of the server: restart at once from where we are, without growing the backoff.
          this.#logger.warn({ silentMs: this.#silentMs, resourceVersion: this.#resourceVersion }, 'watch silent; restarting it');
          this.#metrics.watchRestart?.(this.kind, 'silent');
        } else if (outcome.events === 0 && outcome.durationMs < MIN_WATCH_MS) {
          failures++;
          delay = reconnectDelay(failures, DEFAULT_MAX_MS, this.#random);
          this.#logger.warn({ durationMs: outcome.durationMs, delayMs: Math.round(delay) }, 'watch closed at once without events; backing off');
          this.#metrics.watchRestart?.(this.kind, 'error');
        } else {
          this.#logger.debug({ resourceVersion: this.#resourceVersion, events: outcome.events }, 'watch closed by the server; resuming');
          this.#metrics.watchRestart?.(this.kind, 'closed');
        }
      } catch (err) {
        if (this.#stopped) break;
        if (this.#roundEvents > 0) failures = 0;
        if (isGone(err)) {
          // The resume point expired: only a full list can tell what changed meanwhile. A 410 is an answer, so the
          // server is up: the failures that came before it (an outage, typically) say nothing about now, and the
          // relist goes at once. Only a server that keeps answering 410 gets a backoff.
          failures = 0;
          delay = reconnectDelay(goneStreak, DEFAULT_MAX_MS, this.#random);
          goneStreak++;
          needList = true;
          listReason = 'gone';
          this.#logger.info({ err, resourceVersion: this.#resourceVersion, delayMs: Math.round(delay) }, 'resourceVersion expired; relisting');
          this.#metrics.watchRestart?.(this.kind, 'gone');
        } else {
          failures++;
          const unreachable = isTransient(err) && err instanceof KubeApiError && err.code === undefined;
          delay = reconnectDelay(failures, unreachable ? UNREACHABLE_MAX_MS : DEFAULT_MAX_MS, this.#random);
          if (needList) listReason = 'retry';
          this.#logger.warn(
            { err, failures, delayMs: Math.round(delay), listing: needList },
            needList ? 'list failed; retrying' : 'watch failed; reconnecting',
          );
          if (!needList) this.#metrics.watchRestart?.(this.kind, 'error');
        }
      } finally {
        // Whatever happened, the request of this round must not outlive it.
        ac.abort(new Error('round over'));
        this.#current = undefined;
      }
      if (delay > 0 && !this.#stopped) {
        this.#state = 'backoff';
        try {
          await sleep(this.#clock, delay, this.#stop.signal);
        } catch {
          break;
        }
      }
    }
  }

  async #list(signal: AbortSignal): Promise<void> {
    const { items, resourceVersion } = await listAllPages((req) => this.#lw.list(req), {
      pageSize: this.#pageSize,
      signal,
      map: (raw) => this.#trimOrSkip(raw),
    });
    if (this.#stopped) return;
    const objects = items.filter((o): o is T => o !== undefined);
    this.#resourceVersion = resourceVersion;
    const events = this.#store.replace(objects);
    for (const e of events) e.fromList = true;
    this.#logger.info({ objects: objects.length, resourceVersion, changes: events.length }, this.#hasSynced ? 'relisted' : 'listed');
    this.#emit(events);
    if (!this.#hasSynced) {
      this.#hasSynced = true;
      this.#resolveSynced();
    }
  }

  async #watch(ac: AbortController): Promise<{ ending: 'closed' | 'silent'; events: number; durationMs: number }> {
    const started = this.#clock.now();
    const timeoutSeconds = this.#watchTimeoutSeconds ?? Math.floor(300 + this.#random() * 300);
    const iterator = this.#lw
      .watch({ resourceVersion: this.#resourceVersion ?? '', timeoutSeconds, allowWatchBookmarks: true, signal: ac.signal })
      [Symbol.asyncIterator]();
    let timer: TimerHandle | undefined;
    const arm = (): void => {
      if (timer !== undefined) this.#clock.clearTimeout(timer);
      timer = this.#clock.setTimeout(() => ac.abort(new SilentWatch()), this.#silentMs);
    };
    arm();
    try {
      for (;;) {
        // stop() and the silence timer work even if a watch implementation ignores its signal.
        const next = await abortable(() => iterator.next(), ac.signal);
        if (next.done) break;
        arm();
        // Counted after handling, so an ERROR event is not mistaken for progress.
        this.#handle(next.value);
        this.#roundEvents++;
      }
    } catch (err) {
      if (ac.signal.reason instanceof SilentWatch) return { ending: 'silent', events: this.#roundEvents, durationMs: this.#clock.now() - started };
      throw err;
    } finally {
      if (timer !== undefined) this.#clock.clearTimeout(timer);
      if (!ac.signal.aborted) ac.abort(new Error('watch over'));
      // Not awaited: a generator blocked in a read only returns once the abort has failed that read.
      Promise.resolve()
        .then(() => iterator.return?.())
        .catch(() => undefined);
    }
    return { ending: 'closed', events: this.#roundEvents, durationMs: this.#clock.now() - started };
  }

  #handle(ev: WatchEvent): void {
    if (ev.type === 'ERROR') {
      throw errorFromWatchStatus(ev.object as ApiStatus, { kind: this.kind, namespace: this.namespace });
    }
    const rv = (ev.object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
    if (ev.type === 'BOOKMARK') {
      if (typeof rv === 'string' && rv !== '') this.#resourceVersion = rv;
      return;
    }
    const obj = this.#trimOrSkip(ev.object);
    if (typeof rv === 'string' && rv !== '') this.#resourceVersion = rv;
    if (!obj) return;
    this.#emit(ev.type === 'DELETED' ? this.#store.delete(obj) : this.#store.upsert(obj));
  }

  #trimOrSkip(raw: unknown): T | undefined {
    try {
      return deepFreeze(this.#trim(raw));
    } catch (err) {
      if (!(err instanceof UntrimmableObjectError)) throw err;
      this.#logger.error({ err }, 'skipping an object without a name');
      return undefined;
    }
  }

  #emit(events: ChangeEvent<T>[]): void {
    for (const e of events) {
      this.#metrics.event?.(this.kind, e.type);
      this.#subject.next(e);
    }
  }
}
