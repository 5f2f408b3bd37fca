// Test doubles for the Clock. Outside src (tsconfig.build.json's rootDir), so they never ship in dist/ or the npm
// package.
import type { Clock, TimerHandle } from '../src/kube/clock.ts';

interface FakeTimer {
  id: number;
  at: number;
  fn: () => void;
}

/**
 * A manual clock for tests. Timers fire only inside `advance`/`runNext`, in due-time order (ties in creation order),
 * including timers that callbacks schedule within the advanced window.
 */
export class FakeClock implements Clock {
  #now: number;
  #nextId = 1;
  #timers = new Map<number, FakeTimer>();

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.#nextId++;
    this.#timers.set(id, { id, at: this.#now + Math.max(0, ms), fn });
    return { __timer: true, id } as unknown as TimerHandle;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#timers.delete((handle as unknown as { id: number }).id);
  }

  /** Number of timers not yet fired or cleared. */
  get pending(): number {
    return this.#timers.size;
  }

  /** Due times of pending timers, relative to now, ascending. */
  pendingDelays(): number[] {
    return [...this.#timers.values()].map((t) => t.at - this.#now).sort((a, b) => a - b);
  }

  #earliest(): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.#timers.values()) {
      if (!best || t.at < best.at || (t.at === best.at && t.id < best.id)) best = t;
    }
    return best;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const t = this.#earliest();
      if (!t || t.at > target) break;
      this.#timers.delete(t.id);
      this.#now = t.at;
      t.fn();
    }
    this.#now = target;
  }

  /** Jumps to the earliest pending timer and fires it; returns false when none is pending. */
  runNext(): boolean {
    const t = this.#earliest();
    if (!t) return false;
    this.advance(t.at - this.#now);
    return true;
  }
}

/**
 * Lets every pending promise continuation run. It waits for a macrotask turn, not for a duration, so it is as
 * deterministic as the code under test.
 */
export async function flushPromises(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
