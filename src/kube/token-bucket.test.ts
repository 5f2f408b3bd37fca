import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FakeClock, flushPromises } from '../queue/testing.ts';
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
