import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FakeClock, flushPromises } from '../../test/fake-clock.ts';
import { TokenBucket } from './token-bucket.ts';

describe('TokenBucket', () => {
  it('allows a burst at once, then refills at qps', () => {
    const clock = new FakeClock();
    const b = new TokenBucket({ qps: 10, burst: 3, clock });
    assert.deepEqual([b.tryTake(), b.tryTake(), b.tryTake(), b.tryTake()], [true, true, true, false]);
    clock.advance(99);
    assert.equal(b.tryTake(), false);
    clock.advance(1);
    assert.equal(b.tryTake(), true);
  });

  it('never holds more than burst tokens after a long idle time', () => {
    const clock = new FakeClock();
    const b = new TokenBucket({ qps: 100, burst: 2, clock });
    clock.advance(3_600_000);
    assert.equal(b.available(), 2);
  });

  it('queues waiters in arrival order, one token interval apart', async () => {
    const clock = new FakeClock();
    const b = new TokenBucket({ qps: 5, burst: 1, clock });
    const order: number[] = [];
    const all = [0, 1, 2].map((i) => b.take().then(() => order.push(i)));
    await flushPromises();
    assert.deepEqual(order, [0]);
    assert.deepEqual(clock.pendingDelays(), [200, 400]);
    clock.advance(200);
    await flushPromises();
    assert.deepEqual(order, [0, 1]);
    clock.advance(200);
    await Promise.all(all);
    assert.deepEqual(order, [0, 1, 2]);
  });

  it('releases the waiters whose tokens fall due within one quantum together, none before its token', async () => {
    const clock = new FakeClock();
    const b = new TokenBucket({ qps: 200, burst: 11, clock, releaseQuantumMs: 50 });
    const released: number[] = [];
    for (let i = 0; i < 11; i++) await b.take();
    // Tokens due at 5, 10, ..., 60 ms: the first ten go out at 50, the last two at 100.
    const all = Array.from({ length: 12 }, () => b.take().then(() => released.push(clock.now())));
    assert.deepEqual(clock.pendingDelays(), [...Array<number>(10).fill(50), 100, 100]);
    clock.advance(49);
    await flushPromises();
    assert.deepEqual(released, []);
    clock.advance(1);
    await flushPromises();
    assert.equal(released.length, 10);
    clock.advance(50);
    await Promise.all(all);
    assert.deepEqual(released.slice(10), [100, 100]);
  });

  // A quantum of 50 ms would hold 5 tokens at 100 qps; with a burst of 3 it shrinks to 2 tokens' worth, 20 ms.
  for (const [name, qps, burst, takes, delays] of [
    ['shrinks the quantum to what burst - 1 tokens take to fall due', 100, 3, 7, [20, 20, 40, 40]],
    ['does not group at all with a burst of 1', 200, 1, 4, [5, 10, 15]],
  ] as const) {
    it(name, () => {
      const clock = new FakeClock();
      const b = new TokenBucket({ qps, burst, clock, releaseQuantumMs: 50 });
      for (let i = 0; i < takes; i++) void b.take();
      assert.deepEqual(clock.pendingDelays(), delays);
    });
  }

  it('returns the reserved token when a waiter gives up', async () => {
    const clock = new FakeClock();
    const b = new TokenBucket({ qps: 1, burst: 1, clock });
    await b.take();
    const ac = new AbortController();
    const waiting = b.take(ac.signal);
    assert.equal(b.available(), -1);
    ac.abort(new Error('request cancelled'));
    await assert.rejects(waiting, /request cancelled/);
    assert.equal(b.available(), 0);
    assert.equal(clock.pending, 0);
  });

  it('is a no-op when qps is 0 (throttling disabled)', async () => {
    const b = new TokenBucket({ qps: 0, burst: 1, clock: new FakeClock() });
    for (let i = 0; i < 1000; i++) assert.equal(b.tryTake(), true);
    await b.take();
  });

  it('property: with a quantum, each waiter is released on the grid, at or after its token, within one quantum; any window holds at most burst + qps · its length', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 400 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 100 }),
        fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 300, size: 'max' }),
        (qps, burst, quantumMs, gaps) => {
          // The same arrivals into a bucket without a quantum (each waiter released exactly when its token is due)
          // and one with it; a waiter's timer is set synchronously inside take(), in arrival order.
          const releases = (quantum: number): { grants: number[]; timers: number[] } => {
            const clock = new FakeClock();
            const grants: number[] = [];
            const timers: number[] = [];
            const recording = {
              now: () => clock.now(),
              clearTimeout: clock.clearTimeout.bind(clock),
              setTimeout: (fn: () => void, ms: number) => {
                timers.push(clock.now() + Math.max(0, ms));
                return clock.setTimeout(fn, ms);
              },
            };
            const b = new TokenBucket({ qps, burst, clock: recording, releaseQuantumMs: quantum });
            for (const gap of gaps) {
              clock.advance(gap);
              const before = timers.length;
              void b.take();
              if (timers.length === before) grants.push(clock.now());
            }
            return { grants, timers };
          };
          const exact = releases(0);
          const grouped = releases(quantumMs);
          assert.deepEqual(grouped.grants, exact.grants);
          assert.equal(grouped.timers.length, exact.timers.length);
          const q = Math.max(0, Math.min(quantumMs, ((burst - 1) / qps) * 1000));
          grouped.timers.forEach((at, i) => {
            const due = exact.timers[i]!;
            assert.ok(at >= due - 1e-6 && at <= Math.max(due, due + q - 1e-9) + 1e-6, `waiter ${i}: released at ${at}, token due at ${due}, quantum ${q}`);
            if (q > 0) assert.ok(Math.abs(at / q - Math.round(at / q)) < 1e-6, `waiter ${i}: released at ${at}, off the ${q} ms grid`);
          });
          const all = [...grouped.grants, ...grouped.timers].sort((x, y) => x - y);
          for (let i = 0; i < all.length; i++) {
            for (let j = i; j < all.length; j++) {
              const bound = burst + (qps * (all[j]! - all[i]!)) / 1000;
              assert.ok(j - i + 1 <= bound + 1e-6, `${j - i + 1} releases in [${all[i]}, ${all[j]}] > ${bound}`);
            }
          }
        },
      ),
    );
  });

  it('property: over any window, grants never exceed burst + qps · elapsed', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 500 }), { maxLength: 200 }),
        (qps, burst, gaps) => {
          const clock = new FakeClock();
          const b = new TokenBucket({ qps, burst, clock });
          let granted = 0;
          for (const gap of gaps) {
            clock.advance(gap);
            if (b.tryTake()) granted++;
          }
          const bound = burst + (qps * clock.now()) / 1000;
          assert.ok(granted <= bound + 1e-9, `${granted} > ${bound}`);
        },
      ),
    );
  });
});
