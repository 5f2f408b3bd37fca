// Time is injected everywhere a delay or a duration matters, so that tests drive it by hand instead of sleeping.

/** An opaque timer handle; only the clock that made it can cancel it. */
export type TimerHandle = { readonly __timer: true };

export interface Clock {
  /** Milliseconds since an arbitrary epoch; only differences are meaningful except for the real clock. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.max(0, ms)) as unknown as TimerHandle,
  clearTimeout: (handle) => clearTimeout(handle as unknown as NodeJS.Timeout),
};

/** Resolves after `ms` on `clock`, or rejects with the signal's reason as soon as `signal` aborts. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(handle);
      reject(signal?.reason);
    };
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * What `start()` resolves to, or a rejection with the signal's reason as soon as `signal` aborts, for a promise that
 * may ignore the signal. The abort listener lives only until the promise settles: one listener for the life of a
 * long watch, raced against each read, would keep every read (and event) reachable until the watch ends.
 */
export function abortable<T>(start: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return start();
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    start()
      .finally(() => signal.removeEventListener('abort', onAbort))
      .then(resolve, reject);
  });
}
