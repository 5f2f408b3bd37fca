// Client-side request throttling in the manner of client-go's QPS/burst limiter: a bucket of `burst` tokens that
// refills at `qps` per second. Callers that find it empty reserve a future token and wait for it, so waiting
// callers are served in arrival order and the long-run rate never exceeds `qps`.

import { type Clock, realClock, sleep } from '../queue/clock.ts';

export interface TokenBucketOptions {
  /** Sustained requests per second. 0 or less (or Infinity) disables throttling. */
  qps: number;
  /** Requests allowed at once after an idle period. At least 1. */
  burst: number;
  clock?: Clock;
}

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  readonly #clock: Clock;
  /** May go negative: each waiting caller holds a reservation on a future token. */
  #tokens: number;
  #last: number;

  constructor(options: TokenBucketOptions) {
    this.qps = options.qps;
    this.burst = Math.max(1, Math.floor(options.burst));
    this.#clock = options.clock ?? realClock;
    this.#tokens = this.burst;
    this.#last = this.#clock.now();
  }

  get unlimited(): boolean {
    return !(this.qps > 0) || this.qps === Infinity;
  }

  /** Tokens available now (negative while callers are waiting). */
  available(): number {
    this.#refill();
    return this.#tokens;
  }

  /** Takes a token if one is available right now, without waiting. */
  tryTake(): boolean {
    if (this.unlimited) return true;
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /**
   * Takes a token, waiting for it if necessary. Rejects with the signal's reason if `signal` aborts first, and then
   * hands the reserved token back so that an abandoned request does not slow down the others.
   */
  async take(signal?: AbortSignal): Promise<void> {
    if (this.unlimited) return;
    if (signal?.aborted) throw signal.reason;
    this.#refill();
    this.#tokens -= 1;
    if (this.#tokens >= 0) return;
    const waitMs = (-this.#tokens / this.qps) * 1000;
    try {
      await sleep(this.#clock, waitMs, signal);
    } catch (err) {
      this.#tokens += 1;
      throw err;
    }
  }

  #refill(): void {
    const now = this.#clock.now();
    const elapsed = now - this.#last;
    this.#last = now;
    if (elapsed > 0) this.#tokens = Math.min(this.burst, this.#tokens + (elapsed / 1000) * this.qps);
  }
}
