import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FakeClock, flushPromises } from '../../test/fake-clock.ts';
import { WorkQueue, type WorkQueueMetrics } from './queue.ts';
import { ExponentialFailureRateLimiter } from './rate-limiter.ts';

function newQueue(clock = new FakeClock(), metrics?: WorkQueueMetrics): { q: WorkQueue; clock: FakeClock } {
  return { q: new WorkQueue({ name: 'test', clock, metrics }), clock };
}

/** Gets and finishes every queued key, in the order handed out. */
async function handOutAll(q: WorkQueue): Promise<string[]> {
  const order: string[] = [];
  while (q.len() > 0) {
    const k = (await q.get()) as string;
    order.push(k);
    q.done(k);
  }
  return order;
}

describe('ExponentialFailureRateLimiter', () => {
  it('doubles from the base delay per failure and caps at the maximum', () => {
    const rl = new ExponentialFailureRateLimiter({ baseDelayMs: 5, maxDelayMs: 100 });
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7].map(() => rl.when('a')),
      [5, 10, 20, 40, 80, 100, 100],
    );
    assert.equal(rl.numRequeues('a'), 7);
  });

  it('keeps keys independent and forget resets only the forgotten key', () => {
    const rl = new ExponentialFailureRateLimiter();
    rl.when('a');
    rl.when('a');
    rl.when('b');
    rl.forget('a');
    assert.equal(rl.when('a'), 5);
    assert.equal(rl.when('b'), 10);
  });

  it('defaults to client-go values and stays finite after very many failures', () => {
    const rl = new ExponentialFailureRateLimiter();
    assert.equal(rl.when('k'), 5);
    for (let i = 0; i < 2000; i++) rl.when('k');
    assert.equal(rl.when('k'), 1_000_000);
  });

  it('rejects a maximum below the base', () => {
    assert.throws(() => new ExponentialFailureRateLimiter({ baseDelayMs: 10, maxDelayMs: 5 }), RangeError);
  });
});

describe('WorkQueue', () => {
  it('de-duplicates keys that are waiting', async () => {
    const { q } = newQueue();
    q.add('ns/a');
    q.add('ns/b');
    q.add('ns/a');
    assert.equal(q.len(), 2);
    assert.equal(await q.get(), 'ns/a');
    assert.equal(await q.get(), 'ns/b');
    assert.equal(q.len(), 0);
  });

  it('never hands out a key that is in flight, and hands it out once more after done', async () => {
    const { q } = newQueue();
    q.add('ns/a');
    assert.equal(await q.get(), 'ns/a');
    q.add('ns/a');
    q.add('ns/a');
    assert.equal(q.len(), 0, 'an in-flight key is marked dirty, not queued');
    let second: string | undefined;
    const pending = q.get().then((k) => (second = k));
    await flushPromises();
    assert.equal(second, undefined, 'get must wait while the only key is in flight');
    q.done('ns/a');
    await pending;
    assert.equal(second, 'ns/a');
    q.done('ns/a');
    assert.equal(q.len(), 0, 'exactly one extra run, however many adds happened during processing');
  });

  it('wakes a waiting get when a key arrives', async () => {
    const { q } = newQueue();
    const got = q.get();
    q.add('ns/x');
    assert.equal(await got, 'ns/x');
  });

  it('addAfter delays the key on the injected clock, and the earliest request wins', async () => {
    const { q, clock } = newQueue();
    q.addAfter('ns/a', 100);
    q.addAfter('ns/a', 500);
    q.addAfter('ns/a', 50);
    assert.equal(q.len(), 0);
    assert.equal(q.delayedCount(), 1);
    clock.advance(49);
    assert.equal(q.len(), 0);
    clock.advance(1);
    assert.equal(q.len(), 1);
    assert.equal(clock.pending, 0, 'replaced timers are cancelled');
    assert.equal(await q.get(), 'ns/a');
  });

  it('is idle only with nothing waiting, in flight or delayed', async () => {
    const { q, clock } = newQueue();
    assert.equal(q.idle(), true);
    q.add('ns/a');
    assert.equal(q.idle(), false, 'waiting');
    assert.equal(await q.get(), 'ns/a');
    assert.equal(q.idle(), false, 'in flight');
    q.addAfter('ns/a', 100);
    q.done('ns/a');
    assert.equal(q.idle(), false, 'delayed');
    clock.advance(100);
    assert.equal(await q.get(), 'ns/a');
    q.done('ns/a');
    assert.equal(q.idle(), true);
  });

  it('addAfter with a non-positive delay adds at once', () => {
    const { q } = newQueue();
    q.addAfter('ns/a', 0);
    q.addAfter('ns/b', -5);
    assert.equal(q.len(), 2);
  });

  it('addRateLimited grows the delay per key until forget', () => {
    const { q, clock } = newQueue();
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      q.addRateLimited('ns/a');
      delays.push(clock.pendingDelays()[0] ?? -1);
      clock.runNext();
    }
    assert.deepEqual(delays, [5, 10, 20, 40]);
    assert.equal(q.numRequeues('ns/a'), 4);
    q.forget('ns/a');
    q.addRateLimited('ns/a');
    assert.deepEqual(clock.pendingDelays(), [5]);
  });

  it('addRateLimited waits at least as long as asked, and still counts the failure', () => {
    const { q, clock } = newQueue();
    q.addRateLimited('ns/a', 2000);
    assert.deepEqual(clock.pendingDelays(), [2000], 'the longer of backoff and the asked wait');
    assert.equal(q.numRequeues('ns/a'), 1);
    clock.runNext();
    q.addRateLimited('ns/b', 1);
    assert.deepEqual(clock.pendingDelays(), [5], 'a shorter wish does not shorten the backoff');
  });

  it('reports metrics through the hooks', async () => {
    const seen = { adds: 0, retries: 0, depth: [] as number[], inFlight: [] as number[], queue: [] as number[], work: [] as number[] };
    const clock = new FakeClock();
    const { q } = newQueue(clock, {
      adds: () => seen.adds++,
      retries: () => seen.retries++,
      depth: (v) => seen.depth.push(v),
      inFlight: (v) => seen.inFlight.push(v),
      queueDuration: (s) => seen.queue.push(s),
      workDuration: (s) => seen.work.push(s),
    });
    q.add('a');
    q.add('a');
    clock.advance(2000);
    const k = await q.get();
    clock.advance(3000);
    q.done(k as string);
    q.addRateLimited('a');
    assert.equal(seen.adds, 1);
    assert.equal(seen.retries, 1);
    assert.deepEqual(seen.depth, [1, 0]);
    assert.deepEqual(seen.inFlight, [1, 0]);
    assert.deepEqual(seen.queue, [2]);
    assert.deepEqual(seen.work, [3]);
  });

  describe('shutDown', () => {
    it('without drain drops queued keys, waits for in-flight ones, and ends get', async () => {
      const { q } = newQueue();
      q.add('a');
      q.add('b');
      q.add('c');
      const inflight = await q.get();
      q.add('a');
      let result: unknown;
      const done = q.shutDown().then((r) => (result = r));
      assert.equal(await q.get(), undefined);
      await flushPromises();
      assert.equal(result, undefined, 'must wait for the in-flight key');
      q.done(inflight as string);
      await done;
      assert.deepEqual(result, { timedOut: false, abandoned: [], dropped: ['b', 'c', 'a'] });
    });

    it('with drain hands out every queued key first, including ones made dirty in flight', async () => {
      const { q } = newQueue();
      q.add('a');
      q.add('b');
      const first = await q.get();
      q.add('a');
      let settled = false;
      const done = q.shutDown({ drain: true }).then((r) => {
        settled = true;
        return r;
      });
      q.add('z');
      const handed: string[] = [first as string];
      q.done(first as string);
      for (;;) {
        const k = await q.get();
        if (k === undefined) break;
        handed.push(k);
        assert.equal(settled, false);
        q.done(k);
      }
      assert.deepEqual(handed, ['a', 'b', 'a'], 'adds after shutdown are ignored');
      assert.deepEqual(await done, { timedOut: false, abandoned: [], dropped: [] });
    });

    it('cancels pending delayed adds', () => {
      const { q, clock } = newQueue();
      q.addAfter('a', 1000);
      void q.shutDown();
      assert.equal(clock.pending, 0);
      clock.advance(5000);
      assert.equal(q.len(), 0);
    });

    it('gives up at the deadline, reports abandoned keys and aborts the signal', async () => {
      const { q, clock } = newQueue();
      q.add('a');
      q.add('b');
      await q.get();
      const done = q.shutDown({ drain: true, timeoutMs: 10_000 });
      assert.equal(q.abortSignal.aborted, false);
      clock.advance(10_000);
      assert.deepEqual(await done, { timedOut: true, abandoned: ['a'], dropped: ['b'] });
      assert.equal(q.abortSignal.aborted, true);
      assert.equal(await q.get(), undefined);
    });

    it('is idempotent', async () => {
      const { q } = newQueue();
      const a = q.shutDown();
      const b = q.shutDown({ drain: true });
      assert.equal(a, b);
      assert.deepEqual(await a, { timedOut: false, abandoned: [], dropped: [] });
    });
  });

  it('property: a key is never in flight twice, and every add is followed by a hand-out', async () => {
    const op = fc.oneof(
      fc.record({ t: fc.constant('add' as const), k: fc.constantFrom('a', 'b', 'c') }),
      fc.record({ t: fc.constant('get' as const) }),
      fc.record({ t: fc.constant('done' as const), i: fc.nat(5) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
        const { q } = newQueue();
        const inFlight: string[] = [];
        // Keys added since they were last handed out: each must be handed out again later.
        const owed = new Set<string>();
        for (const o of ops) {
          if (o.t === 'add') {
            q.add(o.k);
            owed.add(o.k);
          } else if (o.t === 'get') {
            if (q.len() === 0) continue;
            const k = (await q.get()) as string;
            assert.ok(!inFlight.includes(k), `key ${k} handed out while in flight`);
            inFlight.push(k);
            owed.delete(k);
          } else if (inFlight.length > 0) {
            const [k] = inFlight.splice(o.i % inFlight.length, 1);
            q.done(k as string);
          }
        }
        for (const k of inFlight.splice(0)) q.done(k);
        for (const k of await handOutAll(q)) owed.delete(k);
        assert.deepEqual([...owed], []);
      }),
    );
  });
});

describe('WorkQueue priorities', () => {
  it('hands out keys of a bulk pass only when no changed key waits, and promotes a waiting low key that changes', async () => {
    const { q } = newQueue();
    for (const k of ['r1', 'r2', 'r3']) q.add(k, { priority: 'low' });
    q.add('new-vm');
    q.add('r3');
    q.add('r1', { priority: 'low' });
    assert.equal(q.len(), 4, 'a promoted key is counted once');
    assert.deepEqual(await handOutAll(q), ['new-vm', 'r3', 'r1', 'r2']);
    assert.equal(q.len(), 0);
  });

  it('keeps the one-at-a-time contract for low keys too, and drops them on shutdown', async () => {
    const { q } = newQueue();
    q.add('a', { priority: 'low' });
    const a = await q.get();
    q.add('a', { priority: 'low' });
    assert.equal(q.len(), 0, 'in flight: queued again only after done');
    q.done(a as string);
    assert.equal(q.len(), 1);
    q.add('b', { priority: 'low' });
    const result = await q.shutDown();
    assert.deepEqual(result.dropped.sort(), ['a', 'b']);
  });

  it('a bulk pass that re-adds a key in flight queues it again behind live keys, unless it changes meanwhile', async () => {
    const { q } = newQueue();
    q.add('a');
    q.add('b');
    const a = (await q.get()) as string;
    const b = (await q.get()) as string;
    q.add('a', { priority: 'low' }); // a resync pass while a is reconciled
    q.add('b', { priority: 'low' });
    q.add('b'); // ... and b changes as well
    q.add('live');
    q.done(a);
    q.done(b);
    assert.deepEqual(await handOutAll(q), ['live', 'b', 'a']);
  });

  it('never loses or duplicates a key, whatever the mix of priorities (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.boolean()), { maxLength: 30 }), async (adds) => {
        const { q } = newQueue();
        for (const [k, low] of adds) q.add(k, low ? { priority: 'low' } : {});
        const expected = new Set(adds.map(([k]) => k));
        assert.equal(q.len(), expected.size);
        assert.deepEqual((await handOutAll(q)).sort(), [...expected].sort());
      }),
    );
  });
});
