import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock, flushPromises } from '../../test/fake-clock.ts';
import { WorkQueue } from './queue.ts';
import { runWorkers, serverRetryDelayMs, TerminalError, isTerminalError, type ReconcileMetrics, type ReconcileResult, type Reconciler } from './runner.ts';
import { startResync } from './resync.ts';

/** A queue on a fake clock with `concurrency` workers running `reconcile`; stop() shuts the queue down and waits for them. */
function workers(concurrency: number, reconcile: Reconciler, metrics?: ReconcileMetrics) {
  const clock = new FakeClock();
  const q = new WorkQueue({ name: 'test', clock });
  const pool = runWorkers(q, concurrency, reconcile, { clock, metrics });
  const stop = async (): Promise<void> => {
    await q.shutDown();
    await pool.done;
  };
  return { q, clock, pool, stop };
}

describe('runWorkers', () => {
  it('runs a key once more, and only once, when it changes during its reconcile', async () => {
    const calls: string[] = [];
    const gate = Promise.withResolvers<void>();
    let first = true;
    const { q, stop } = workers(4, async (key) => {
      calls.push(key);
      if (first) {
        first = false;
        await gate.promise;
      }
    });
    q.add('ns/vm');
    await flushPromises();
    assert.deepEqual(calls, ['ns/vm']);
    q.add('ns/vm');
    q.add('ns/vm');
    q.add('ns/vm');
    await flushPromises();
    assert.deepEqual(calls, ['ns/vm'], 'not run concurrently although 3 workers are idle');
    gate.resolve();
    await flushPromises();
    assert.deepEqual(calls, ['ns/vm', 'ns/vm']);
    await stop();
  });

  it('never runs more reconciles at once than the concurrency', async () => {
    let running = 0;
    let peak = 0;
    const gates: PromiseWithResolvers<void>[] = [];
    const { q, pool, stop } = workers(3, async () => {
      running++;
      peak = Math.max(peak, running);
      const g = Promise.withResolvers<void>();
      gates.push(g);
      await g.promise;
      running--;
    });
    for (let i = 0; i < 10; i++) q.add(`ns/k${i}`);
    await flushPromises();
    assert.equal(running, 3);
    assert.equal(pool.active(), 3);
    assert.equal(q.len(), 7);
    while (gates.length > 0) {
      gates.shift()?.resolve();
      await flushPromises();
    }
    assert.equal(peak, 3);
    assert.equal(q.len(), 0);
    await stop();
  });

  it('retries a failing key with growing backoff and resets it after a success', async () => {
    let failuresLeft = 3;
    const retriesSeen: number[] = [];
    const outcomes: string[] = [];
    const failThrice: Reconciler = async (_key, ctx) => {
      retriesSeen.push(ctx.retries);
      if (failuresLeft-- > 0) throw new Error('apiserver unavailable');
    };
    const { q, clock, stop } = workers(1, failThrice, { reconcileTotal: (r) => outcomes.push(r) });
    q.add('ns/a');
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      await flushPromises();
      delays.push(clock.pendingDelays()[0] ?? -1);
      clock.runNext();
    }
    await flushPromises();
    assert.deepEqual(delays, [5, 10, 20]);
    assert.deepEqual(retriesSeen, [0, 1, 2, 3]);
    assert.deepEqual(outcomes, ['error', 'error', 'error', 'success']);
    assert.equal(q.numRequeues('ns/a'), 0, 'success forgets the backoff');
    assert.equal(clock.pending, 0);

    failuresLeft = 1;
    q.add('ns/a');
    await flushPromises();
    assert.deepEqual(clock.pendingDelays(), [5], 'backoff starts over after a success');
    await stop();
  });

  it("retries no sooner than the server's Retry-After, even when the error is wrapped", async () => {
    const throttled = Object.assign(new Error('429 Too Many Requests'), { retryAfterSeconds: 3 });
    const failures = [new Error('while reconciling', { cause: throttled }), new Error('connection reset')];
    let calls = 0;
    const { q, clock, stop } = workers(1, async () => {
      const err = failures[calls++];
      if (err) throw err;
    });
    q.add('ns/a');
    await flushPromises();
    assert.deepEqual(clock.pendingDelays(), [3000], 'the server asked for 3 s; the backoff alone would be 5 ms');
    clock.runNext();
    await flushPromises();
    assert.deepEqual(clock.pendingDelays(), [10], 'no Retry-After: the backoff, which the throttled failure advanced');
    clock.runNext();
    await flushPromises();
    assert.equal(calls, 3);
    assert.equal(clock.pending, 0);
    await stop();
  });

  it('serverRetryDelayMs reads retryAfterSeconds along the cause chain', () => {
    assert.equal(serverRetryDelayMs(Object.assign(new Error('x'), { retryAfterSeconds: 1.5 })), 1500);
    assert.equal(serverRetryDelayMs(new Error('x', { cause: Object.assign(new Error('y'), { retryAfterSeconds: 2 }) })), 2000);
    assert.equal(serverRetryDelayMs(Object.assign(new Error('x'), { retryAfterSeconds: undefined })), 0);
    assert.equal(serverRetryDelayMs('not an error'), 0);
    const loop = new Error('a');
    (loop as { cause?: unknown }).cause = loop;
    assert.equal(serverRetryDelayMs(loop), 0);
  });

  it('does not retry terminal errors, even wrapped ones, and forgets their backoff', async () => {
    let calls = 0;
    const metrics = { terminal: 0, errors: 0 };
    const reject: Reconciler = async (key) => {
      calls++;
      if (key === 'ns/a') throw new TerminalError('claim spec is invalid');
      throw new Error('while reconciling', { cause: new TerminalError('rejected by the API server') });
    };
    const { q, clock, stop } = workers(2, reject, { terminalReconcileErrors: () => metrics.terminal++, reconcileErrors: () => metrics.errors++ });
    q.addRateLimited('ns/a');
    clock.runNext();
    q.add('ns/b');
    await flushPromises();
    assert.equal(calls, 2);
    assert.equal(clock.pending, 0, 'nothing scheduled');
    assert.equal(q.len(), 0);
    assert.equal(q.numRequeues('ns/a'), 0);
    assert.deepEqual(metrics, { terminal: 2, errors: 0 });
    await stop();
  });

  it('honours requeue and requeueAfter results', async () => {
    const results: ReconcileResult[] = [{ requeue: true }, { requeue: true }, { requeueAfter: 30_000, requeue: true }, {}];
    let calls = 0;
    const { q, clock, stop } = workers(1, async () => results[calls++] ?? {});
    q.add('ns/a');
    await flushPromises();
    assert.deepEqual(clock.pendingDelays(), [5]);
    clock.runNext();
    await flushPromises();
    assert.deepEqual(clock.pendingDelays(), [10], 'requeue counts as a retry');
    clock.runNext();
    await flushPromises();
    assert.deepEqual(clock.pendingDelays(), [30_000], 'requeueAfter wins');
    assert.equal(q.numRequeues('ns/a'), 0, 'requeueAfter resets the backoff');
    clock.runNext();
    await flushPromises();
    assert.equal(calls, 4);
    assert.equal(clock.pending, 0);
    await stop();
  });

  it('a graceful shutdown with drain finishes in-flight and queued work, then the workers exit', async () => {
    const gate = Promise.withResolvers<void>();
    const finished: string[] = [];
    const { q, pool } = workers(1, async (key) => {
      if (key === 'ns/a') await gate.promise;
      finished.push(key);
    });
    q.add('ns/a');
    q.add('ns/b');
    await flushPromises();
    const stopped = q.shutDown({ drain: true, timeoutMs: 60_000 });
    q.add('ns/c');
    gate.resolve();
    const result = await stopped;
    await pool.done;
    assert.deepEqual(finished, ['ns/a', 'ns/b']);
    assert.deepEqual(result, { timedOut: false, abandoned: [], dropped: [] });
  });

  it('a shutdown deadline aborts the signal handed to reconcilers', async () => {
    let aborted = false;
    const { q, clock, pool } = workers(
      1,
      (_key, ctx) =>
        new Promise<void>((resolve) => {
          ctx.signal.addEventListener('abort', () => {
            aborted = true;
            resolve();
          });
        }),
    );
    q.add('ns/stuck');
    await flushPromises();
    const stopped = q.shutDown({ timeoutMs: 5_000 });
    clock.advance(5_000);
    assert.deepEqual(await stopped, { timedOut: true, abandoned: ['ns/stuck'], dropped: [] });
    await pool.done;
    assert.equal(aborted, true);
  });

  it('rejects a non-positive concurrency', () => {
    assert.throws(() => runWorkers(new WorkQueue({ name: 'test' }), 0, async () => {}), RangeError);
  });
});

describe('isTerminalError', () => {
  it('finds TerminalError in the cause chain and tolerates cycles', () => {
    assert.equal(isTerminalError(new TerminalError('x')), true);
    assert.equal(isTerminalError(new Error('x', { cause: new Error('y', { cause: new TerminalError('z') }) })), true);
    assert.equal(isTerminalError(new Error('x')), false);
    assert.equal(isTerminalError('x'), false);
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    assert.equal(isTerminalError(a), false);
  });
});

describe('startResync', () => {
  it('adds every known key once per interval until stopped', () => {
    const clock = new FakeClock();
    const added: string[] = [];
    let keys = ['ns/a', 'ns/b'];
    const r = startResync({ add: (k) => added.push(k) }, { intervalMs: 60_000, keys: () => keys, clock });
    clock.advance(59_999);
    assert.deepEqual(added, []);
    clock.advance(1);
    assert.deepEqual(added, ['ns/a', 'ns/b']);
    keys = ['ns/c'];
    clock.advance(60_000);
    assert.deepEqual(added, ['ns/a', 'ns/b', 'ns/c']);
    r.stop();
    clock.advance(600_000);
    assert.equal(added.length, 3);
    assert.equal(clock.pending, 0);
  });

  it('survives a failing key source', () => {
    const clock = new FakeClock();
    let calls = 0;
    const r = startResync(
      { add: () => {} },
      {
        intervalMs: 10,
        keys: () => {
          calls++;
          throw new Error('cache not ready');
        },
        clock,
      },
    );
    clock.advance(30);
    assert.equal(calls, 3);
    r.stop();
  });
});
