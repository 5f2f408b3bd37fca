// A scripted ListWatch for tests of informers and of whatever consumes them: each list call takes the next scripted
// answer, each watch call opens a stream the test pushes events into, ends or fails. It fakes the two functions the
// informer depends on, not an API server.

import type { ListPage, PageRequest } from '../src/kube/pager.ts';
import type { WatchEvent } from '../src/kube/watch-stream.ts';
import type { ListWatch, WatchRequest } from '../src/sources/informer.ts';

export class ScriptedWatch implements AsyncIterable<WatchEvent> {
  readonly request: WatchRequest;
  #buffer: WatchEvent[] = [];
  #ended = false;
  #error: unknown;
  #waiting: { resolve: (r: IteratorResult<WatchEvent>) => void; reject: (e: unknown) => void } | undefined;
  /** Set once the consumer stopped reading or the request was aborted. */
  closed = false;

  constructor(request: WatchRequest) {
    this.request = request;
    request.signal.addEventListener('abort', () => this.#fail(request.signal.reason, true), { once: true });
  }

  push(...events: WatchEvent[]): void {
    for (const e of events) this.#buffer.push(e);
    this.#drain();
  }

  /** The server closes the watch normally (e.g. timeoutSeconds elapsed). */
  end(): void {
    this.#ended = true;
    this.#drain();
  }

  /** The connection breaks. */
  fail(err: unknown): void {
    this.#fail(err, false);
  }

  #fail(err: unknown, abort: boolean): void {
    if (abort) this.closed = true;
    if (this.#ended || this.#error !== undefined) return;
    this.#error = err ?? new Error('watch failed');
    this.#drain();
  }

  #drain(): void {
    const w = this.#waiting;
    if (!w || (this.#buffer.length === 0 && this.#error === undefined && !this.#ended)) return;
    this.#waiting = undefined;
    const next = this.#buffer.shift();
    if (next) w.resolve({ value: next, done: false });
    else if (this.#error !== undefined) w.reject(this.#error);
    else w.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<WatchEvent> {
    return {
      next: () =>
        new Promise<IteratorResult<WatchEvent>>((resolve, reject) => {
          this.#waiting = { resolve, reject };
          this.#drain();
        }),
      return: async () => {
        this.closed = true;
        return { value: undefined, done: true };
      },
    };
  }
}

export type ListAnswer = ListPage<unknown> | Error | ((req: PageRequest) => ListPage<unknown> | Promise<ListPage<unknown>>);

export class FakeListWatch implements ListWatch {
  readonly listRequests: PageRequest[] = [];
  readonly watches: ScriptedWatch[] = [];
  #answers: ListAnswer[] = [];
  #watchErrors: unknown[] = [];

  /** Queues answers for the next list calls (a page, an error to throw, or a function of the request). */
  answerList(...answers: ListAnswer[]): void {
    this.#answers.push(...answers);
  }

  /** Makes the next watch call fail before streaming (e.g. HTTP 410). */
  failNextWatch(err: unknown): void {
    this.#watchErrors.push(err);
  }

  get lastWatch(): ScriptedWatch | undefined {
    return this.watches.at(-1);
  }

  async list(req: PageRequest): Promise<ListPage<unknown>> {
    this.listRequests.push(req);
    const a = this.#answers.shift();
    if (a === undefined) {
      // An unscripted list waits, as a slow server would, until the request is aborted.
      return new Promise((_, reject) => req.signal?.addEventListener('abort', () => reject(req.signal?.reason), { once: true }));
    }
    if (a instanceof Error) throw a;
    return typeof a === 'function' ? a(req) : a;
  }

  watch(req: WatchRequest): AsyncIterable<WatchEvent> {
    const err = this.#watchErrors.shift();
    if (err !== undefined) {
      return {
        [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(err) }),
      };
    }
    const w = new ScriptedWatch(req);
    this.watches.push(w);
    return w;
  }
}
