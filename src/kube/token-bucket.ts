// Client-side request throttling in the manner of client-go's QPS/burst limiter: a bucket of `burst` tokens that
// refills at `qps` per second. Callers that find it empty reserve a future token and wait for it, so waiting
// callers are served in arrival order and the long-run rate never exceeds `qps`.
//
// A waiting caller is released at the first multiple of `releaseQuantumMs` at or after its token is due, never
// before. At the rate limit this lets the callers of one quantum go out together instead of one per 1/qps (at 200
// qps and a 50 ms quantum, ten requests at once instead of one every 5 ms). Each wake-up of the process costs about
// as much as the request it sends, so the grouping saves a large share of a client's CPU per request, while the
// rate and the burst are what they were. A quantum holds at most `burst - 1`
// tokens: then the tokens that fall due while their callers wait for the grid never fill the bucket, none is lost
// to its cap, and the releases are exactly those of a token bucket that is only looked at on the grid, so no
// window sees more than burst + qps · its length. With a burst of 1 there is no grouping.

import { type Clock, realClock, sleep } from './clock.ts';

export interface TokenBucketOptions {
  /** Sustained requests per second. 0 or less (or Infinity) disables throttling. */
  qps: number;
  /** Requests allowed at once after an idle period. At least 1. */
  burst: number;
  clock?: Clock;
  /** Waiting callers are released on this grid (ms). Default 50; 0 releases each exactly when its token is due. */
  releaseQuantumMs?: number;
}

const DEFAULT_RELEASE_QUANTUM_MS = 50;

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  readonly #clock: Clock;
  readonly #quantum: number;
  /** May go negative: each waiting caller holds a reservation on a future token. */
  #tokens: number;
  #last: number;

  constructor(options: TokenBucketOptions) {
    this.qps = options.qps;
    this.burst = Math.max(1, Math.floor(options.burst));
    this.#clock = options.clock ?? realClock;
    this.#quantum = Math.max(0, Math.min(options.releaseQuantumMs ?? DEFAULT_RELEASE_QUANTUM_MS, ((this.burst - 1) / this.qps) * 1000));
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
    const now = this.#clock.now();
    const due = now + (-this.#tokens / this.qps) * 1000;
    // The tolerance keeps float noise in the token count (a due time of 5000.0000001) from costing a whole quantum.
    const releaseAt = this.#quantum > 0 ? Math.ceil((due - 1e-6) / this.#quantum) * this.#quantum : due;
    try {
      await sleep(this.#clock, releaseAt - now, signal);
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
