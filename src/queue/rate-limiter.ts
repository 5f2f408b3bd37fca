// Per-key retry delays, with the same defaults as client-go's item exponential failure rate limiter, so that the
// retry cadence of this controller reads like any other controller's to an operator.

export interface ExponentialBackoffOptions {
  /** Delay after the first failure. Default 5 ms. */
  baseDelayMs?: number;
  /** Ceiling for the delay. Default 1000 s. */
  maxDelayMs?: number;
}

export const DEFAULT_BASE_DELAY_MS = 5;
export const DEFAULT_MAX_DELAY_MS = 1_000_000;

/** delay(n) = base · 2ⁿ capped at max, where n counts the earlier failures of the key. */
export class ExponentialFailureRateLimiter {
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  #failures = new Map<string, number>();

  constructor(options: ExponentialBackoffOptions = {}) {
    this.baseDelayMs = options.baseDelayMs ?? DEFAULT_BASE_DELAY_MS;
    this.maxDelayMs = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
    if (!(this.baseDelayMs >= 0) || !(this.maxDelayMs >= this.baseDelayMs)) {
      throw new RangeError(`invalid backoff: base ${this.baseDelayMs} ms, max ${this.maxDelayMs} ms`);
    }
  }

  /** The delay before `key` may be retried; every call counts as one more failure. */
  when(key: string): number {
    const n = this.#failures.get(key) ?? 0;
    this.#failures.set(key, n + 1);
    // 2^n overflows to Infinity long after it passed the cap; Math.min handles both.
    return Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** n);
  }

  /** Clears the failure history of `key` (after a success or when the key is abandoned). */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}
