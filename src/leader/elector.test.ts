import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, flushPromises } from '../../test/fake-clock.ts';
import { createLogger } from '../telemetry/logger.ts';
import { createLeaderElector, type LeaseClient } from './elector.ts';
import type { Lease } from './lease.ts';

const logger = createLogger('silent');
const ref = { namespace: 'ns', name: 'persistent-ips-leader' };

/** One Lease in memory with the API server's optimistic concurrency: resourceVersion preconditions. */
class FakeLeaseApi {
  lease: Lease | undefined;
  #rv = 0;
  writes: { by: string; holder: string | null | undefined; at: number }[] = [];
  readonly clock: FakeClock;
  constructor(clock: FakeClock) {
    this.clock = clock;
  }

  client(name: string, mode: Mode = { down: false }): LeaseClient {
    const guard = <T>(signal: AbortSignal, fn: () => T): Promise<T> => {
      if (mode.down === 'reject') return Promise.reject(new Error('connection refused'));
      if (mode.down === 'hang') {
        return new Promise<T>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
      }
      return Promise.resolve().then(fn);
    };
    return {
      get: (signal) => guard(signal, () => (this.lease ? structuredClone(this.lease) : undefined)),
      create: (lease, signal) =>
        guard(signal, () => {
          if (this.lease) throw new Error('AlreadyExists');
          return this.#store(name, lease);
        }),
      update: (lease, signal) =>
        guard(signal, () => {
          if (!this.lease || lease.metadata.resourceVersion !== this.lease.metadata.resourceVersion) throw new Error('Conflict');
          return this.#store(name, lease);
        }),
    };
  }

  #store(by: string, lease: Lease): Lease {
    this.lease = { ...structuredClone(lease), metadata: { ...lease.metadata, resourceVersion: String(++this.#rv) } };
    this.writes.push({ by, holder: lease.spec?.holderIdentity, at: this.clock.now() });
    return structuredClone(this.lease);
  }
}

/** Advances the fake clock timer by timer, letting promise chains run between timers. */
async function advance(clock: FakeClock, ms: number): Promise<void> {
  let left = ms;
  await flushPromises();
  for (;;) {
    const next = clock.pendingDelays()[0];
    if (next === undefined || next > left) {
      clock.advance(left);
      await flushPromises();
      return;
    }
    clock.advance(next);
    left -= next;
    await flushPromises();
  }
}

interface Recorder {
  events: { what: string; who: string; at: number }[];
  signals: AbortSignal[];
}

type Mode = { down: false | 'reject' | 'hang' };

/** A Lease API on a fake clock, and elector `a` (in `mode`, doing `work`) once it has had its first go at the Lease. */
async function withA(options: { now?: number; mode?: Mode; work?: (signal: AbortSignal) => Promise<void> } = {}) {
  const clock = new FakeClock(options.now ?? 0);
  const api = new FakeLeaseApi(clock);
  const rec: Recorder = { events: [], signals: [] };
  const a = elector(api, 'a', rec, options.mode, options.work);
  await advance(clock, 0);
  return { clock, api, rec, a };
}

/** A running elector; its stop() resolves once its run() has. */
function elector(api: FakeLeaseApi, who: string, rec: Recorder, mode: Mode = { down: false }, work?: (signal: AbortSignal) => Promise<void>) {
  const e = createLeaderElector({
    lease: ref,
    identity: who,
    client: api.client(who, mode),
    logger,
    clock: api.clock,
    random: () => 0,
    callbacks: {
      onStartedLeading: (signal) => {
        rec.signals.push(signal);
        rec.events.push({ what: 'start', who, at: api.clock.now() });
        return work?.(signal);
      },
      onStoppedLeading: () => rec.events.push({ what: 'stop', who, at: api.clock.now() }),
    },
  });
  void e.run();
  return e;
}

describe('leader elector', () => {
  it('acquires a missing Lease, then renews it every retry period without reading it', async () => {
    const { clock, api, rec, a } = await withA({ now: 1_000_000 });
    assert.equal(a.isLeader(), true);
    assert.deepEqual(rec.events, [{ what: 'start', who: 'a', at: 1_000_000 }]);
    assert.equal(api.lease?.spec?.holderIdentity, 'a');
    await advance(clock, 10_000);
    assert.equal(api.writes.length, 1 + 5, 'one create, then one renewal per 2 s');
    assert.equal(a.isLeader(), true);
    await a.stop();
  });

  it('a standby waits while the leader renews, and never leads at the same time', async () => {
    const { clock, api, rec, a } = await withA();
    const b = elector(api, 'b', rec);
    await advance(clock, 60_000);
    assert.equal(a.isLeader(), true);
    assert.equal(b.isLeader(), false);
    assert.equal(b.leader(), 'a');
    await b.stop();
    await a.stop();
  });

  for (const failure of ['reject', 'hang'] as const) {
    it(`a leader whose renewals ${failure === 'hang' ? 'hang' : 'fail'} stops at the renew deadline, before a standby can take over`, async () => {
      const modeA: Mode = { down: false };
      const { clock, api, rec, a } = await withA({ mode: modeA });
      const b = elector(api, 'b', rec);
      await advance(clock, 3_000);
      const lastRenewal = api.writes.filter((w) => w.by === 'a').at(-1)!.at;
      modeA.down = failure;
      await advance(clock, 30_000);

      const stopA = rec.events.find((e) => e.what === 'stop' && e.who === 'a');
      const startB = rec.events.find((e) => e.what === 'start' && e.who === 'b');
      assert.ok(stopA && startB, JSON.stringify(rec.events));
      assert.equal(stopA.at, lastRenewal + 10_000, 'stops exactly at the renew deadline');
      assert.equal(rec.signals[0]!.aborted, true);
      assert.ok(startB.at >= lastRenewal + 15_000, 'the standby waits a full lease duration after the last renewal');
      assert.ok(stopA.at < startB.at);
      assert.equal(a.isLeader(), false);
      assert.equal(b.isLeader(), true);
      await a.stop();
      await b.stop();
    });
  }

  it('a leader that finds another holder in the Lease stops at once', async () => {
    const { clock, api, rec, a } = await withA();
    // Someone overwrites the Lease (e.g. an operator, or a replica with a broken clock).
    api.lease = { ...api.lease!, metadata: { ...api.lease!.metadata, resourceVersion: '999' }, spec: { ...api.lease!.spec, holderIdentity: 'intruder' } };
    await advance(clock, 2_000);
    assert.equal(a.isLeader(), false);
    assert.deepEqual(
      rec.events.map((e) => e.what),
      ['start', 'stop'],
    );
    assert.equal(rec.events[1]!.at, 2_000);
    await a.stop();
  });

  it('stop() waits for the leader work, renewing meanwhile, then releases so a standby takes over at its next retry', async () => {
    let finishWork!: () => void;
    const work = (signal: AbortSignal): Promise<void> =>
      new Promise<void>((resolve) => signal.addEventListener('abort', () => (finishWork = resolve), { once: true }));
    const { clock, api, rec, a } = await withA({ work });
    const b = elector(api, 'b', rec);
    await advance(clock, 1_000);

    const stopping = a.stop();
    await advance(clock, 0);
    assert.equal(rec.signals[0]!.aborted, true, 'the leader signal fires at once');
    assert.equal(a.isLeader(), false);
    // The work takes 12 s to wind down: longer than the renew deadline, so the lease must be kept renewed.
    await advance(clock, 12_000);
    assert.equal(api.lease?.spec?.holderIdentity, 'a', 'still held while the old leader winds down');
    assert.equal(b.isLeader(), false);
    finishWork();
    await stopping;
    assert.equal(api.lease?.spec?.holderIdentity, '');
    assert.equal(api.lease?.spec?.leaseDurationSeconds, 1);
    const releasedAt = clock.now();
    await advance(clock, 2_400);
    const startB = rec.events.find((e) => e.what === 'start' && e.who === 'b');
    assert.ok(startB, 'the standby took over');
    assert.ok(startB.at - releasedAt <= 2_400, 'within one (jittered) retry period of the release');
    await b.stop();
  });

  it('after losing the Lease it competes again and can lead a new term with a fresh signal', async () => {
    const mode: Mode = { down: false };
    const { clock, rec, a } = await withA({ mode });
    mode.down = 'reject';
    await advance(clock, 12_000);
    assert.equal(a.isLeader(), false);
    mode.down = false;
    await advance(clock, 4_000);
    assert.equal(a.isLeader(), true);
    assert.deepEqual(
      rec.events.map((e) => e.what),
      ['start', 'stop', 'start'],
    );
    assert.equal(rec.signals[0]!.aborted, true);
    assert.equal(rec.signals[1]!.aborted, false);
    await a.stop();
  });

  it('stop() on a standby does not touch the Lease', async () => {
    const { clock, api, rec, a } = await withA();
    const b = elector(api, 'b', rec);
    await advance(clock, 1_000);
    const writes = api.writes.length;
    await b.stop();
    assert.equal(api.writes.length, writes);
    assert.equal(api.lease?.spec?.holderIdentity, 'a');
    await a.stop();
  });
});

describe('leader elector release', () => {
  it('releases even when its last write is stale (someone updated the Lease metadata meanwhile)', async () => {
    const { api, a } = await withA();
    api.lease = { ...api.lease!, metadata: { ...api.lease!.metadata, resourceVersion: '1000', labels: { touched: 'yes' } } };
    await a.stop();
    assert.equal(api.lease?.spec?.holderIdentity, '');
    assert.deepEqual(api.lease?.metadata.labels, { touched: 'yes' });
  });
});
