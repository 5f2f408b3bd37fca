import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { WorkQueue } from './queue.ts';
import { AbandonInFlight, serveQueue } from './serve.ts';

const logger = pino({ level: 'silent' });

describe('serveQueue', () => {
  it('reconciles queued keys while the signal is live, then lets the one in flight finish before resolving', async () => {
    const queue = new WorkQueue({ name: 'test' });
    const seen: string[] = [];
    const { promise: inFlight, resolve: release } = Promise.withResolvers<void>();
    const { promise: startedB, resolve: started } = Promise.withResolvers<void>();
    let finishedB = false;
    const reconcile = async (key: string) => {
      seen.push(key);
      if (key === 'b') {
        started();
        await inFlight;
        finishedB = true;
      }
    };
    const leader = new AbortController();
    queue.add('a');
    queue.add('b');
    const serving = serveQueue(
      queue,
      { concurrency: 2, reconcile, keys: () => [], resyncIntervalMs: 3_600_000, drainTimeoutMs: 60_000, logger },
      leader.signal,
    );
    await startedB;
    leader.abort();
    let resolved = false;
    void serving.then(() => (resolved = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(resolved, false, 'waits for the reconcile still running');
    release();
    await serving;
    assert.equal(finishedB, true);
    assert.deepEqual([...seen].sort(), ['a', 'b']);
    assert.equal(queue.shuttingDown, true, 'the queue takes no more work');
  });

  it('a lost lease (AbandonInFlight): the reconcile in flight is cancelled at once, not drained', async () => {
    for (const lost of [true, false]) {
      const queue = new WorkQueue({ name: 'test' });
      const { promise: started, resolve: start } = Promise.withResolvers<void>();
      let cancelled = false;
      const reconcile = async (_key: string, ctx: { signal: AbortSignal }) => {
        start();
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
        cancelled = true;
      };
      const leader = new AbortController();
      queue.add('a');
      const serving = serveQueue(
        queue,
        // A lost lease must not wait for a drain this long; a graceful stop's drain ends the case soon.
        { concurrency: 1, reconcile, keys: () => [], resyncIntervalMs: 3_600_000, drainTimeoutMs: lost ? 3_600_000 : 200, logger },
        leader.signal,
      );
      await started;
      leader.abort(lost ? new AbandonInFlight('lease not renewed') : new Error('shutting down'));
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(cancelled, lost, lost ? 'cancelled without waiting for the drain' : 'a graceful stop lets it run');
      await serving;
    }
  });

  it('returns at once when leadership ended before it started', async () => {
    const queue = new WorkQueue({ name: 'test' });
    const seen: string[] = [];
    queue.add('a');
    await serveQueue(
      queue,
      { concurrency: 1, reconcile: async (k) => void seen.push(k), keys: () => [], resyncIntervalMs: 1000, drainTimeoutMs: 1000, logger },
      AbortSignal.abort(),
    );
    assert.equal(queue.shuttingDown, true);
  });
});
