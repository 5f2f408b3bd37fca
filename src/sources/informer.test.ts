import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock, flushPromises } from '../../test/fake-clock.ts';
import { KubeClient } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { HttpRequest, HttpResponse, Transport } from '../kube/transport.ts';
import type { IPAMClaim } from '../kube/types.ts';
import { FakeListWatch } from '../../test/fake-list-watch.ts';
import { Informer, InformerStoppedError, type InformerMetrics } from './informer.ts';
import { createSources, kinds, createInformer } from './kinds.ts';
import { CLAIMS_BY_VM, claimsByVm } from './indexes.ts';
import { trimIPAMClaim, trimVirtualMachineInstance } from './trim.ts';

/** A raw IPAMClaim as the API serves it. */
function raw(name: string, rv: string, o: { ips?: string[]; uid?: string; vm?: string; noise?: string } = {}): Record<string, unknown> {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1alpha1',
    kind: 'IPAMClaim',
    metadata: {
      name,
      namespace: 'ns1',
      uid: o.uid ?? `uid-${name}`,
      resourceVersion: rv,
      ...(o.vm ? { labels: { 'kubevirt.io/vm': o.vm } } : {}),
      managedFields: [{ manager: o.noise ?? 'x' }],
    },
    spec: { network: 'net', interface: 'pod0' },
    ...(o.ips ? { status: { ips: o.ips } } : {}),
  };
}

const page = (items: unknown[], resourceVersion: string, cont?: string): { items: unknown[]; resourceVersion: string; continue?: string } =>
  cont ? { items, resourceVersion, continue: cont } : { items, resourceVersion };

const gone = (): KubeApiError =>
  new KubeApiError({ reason: 'gone', code: 410, object: { kind: 'IPAMClaim', namespace: 'ns1' }, verb: 'watch', message: 'too old resource version' });
const transient = (): KubeApiError =>
  new KubeApiError({ reason: 'transient', object: { kind: 'IPAMClaim', namespace: 'ns1' }, verb: 'watch', message: 'connection reset' });

interface Harness {
  inf: Informer<IPAMClaim>;
  lw: FakeListWatch;
  clock: FakeClock;
  events: string[];
  lists: string[];
  restarts: string[];
  completed: () => boolean;
  /** Starts the informer and waits until it has listed and opened its watch. */
  watching: () => Promise<void>;
}

/** The informers harness() made. */
const made: Informer<IPAMClaim>[] = [];

function harness(): Harness {
  const clock = new FakeClock();
  const lw = new FakeListWatch();
  const lists: string[] = [];
  const restarts: string[] = [];
  const metrics: InformerMetrics = { list: (_k, r) => lists.push(r), watchRestart: (_k, r) => restarts.push(r) };
  const inf = new Informer<IPAMClaim>({
    kind: 'IPAMClaim',
    namespace: 'ns1',
    listWatch: lw,
    trim: trimIPAMClaim,
    clock,
    random: () => 0,
    pageSize: 2,
    silentWatchTimeoutMs: 60_000,
    watchTimeoutSeconds: 300,
    metrics,
  });
  made.push(inf);
  const events: string[] = [];
  let done = false;
  inf.events$.subscribe({
    next: (e) => events.push(`${e.type} ${e.object.metadata.name}${e.finalStateUnknown ? '?' : ''}`),
    complete: () => (done = true),
  });
  const watching = async (): Promise<void> => {
    inf.start();
    await inf.synced;
    await flushPromises();
  };
  return { inf, lw, clock, events, lists, restarts, completed: () => done, watching };
}

/** A harness whose informer listed nothing at resourceVersion 10 and is watching. */
async function watchingNothing(): Promise<Harness> {
  const h = harness();
  h.lw.answerList(page([], '10'));
  await h.watching();
  return h;
}

/** The backoff waits of `n` watch attempts in a row that each fail with `failure()`. */
async function failingWaits(h: Harness, n: number, failure: () => Error): Promise<number[]> {
  const waits: number[] = [];
  h.lw.lastWatch?.fail(failure());
  for (let i = 0; i < n; i++) {
    await flushPromises();
    const pending = h.clock.pendingDelays();
    assert.equal(pending.length, 1);
    waits.push(pending[0] as number);
    h.lw.failNextWatch(failure());
    h.clock.advance(pending[0] as number);
  }
  return waits;
}

describe('Informer', () => {
  // Every harness's informer is stopped after its test (stop is idempotent); tests about stopping call it themselves.
  afterEach(async () => {
    for (const inf of made.splice(0)) await inf.stop();
  });

  it('lists page by page, then watches from the list’s resourceVersion with bookmarks', async () => {
    const h = harness();
    h.lw.answerList(page([raw('a', '5'), raw('b', '6')], '10', 'tok'), page([raw('c', '7')], '10'));
    h.inf.start();
    await h.inf.synced;
    assert.deepEqual(h.events, ['add a', 'add b', 'add c']);
    assert.equal(h.inf.hasSynced, true);
    assert.deepEqual(
      h.lw.listRequests.map((r) => [r.limit, r.continue]),
      [
        [2, undefined],
        [2, 'tok'],
      ],
    );
    await flushPromises();
    const w = h.lw.lastWatch;
    assert.ok(w);
    assert.equal(w.request.resourceVersion, '10');
    assert.equal(w.request.allowWatchBookmarks, true);
    assert.equal(w.request.timeoutSeconds, 300);
    assert.equal(h.inf.state, 'watching');
  });

  it('applies watch events, emits only real changes, and keeps the cache consistent with each event', async () => {
    const h = harness();
    const seenInCache: (string | undefined)[] = [];
    h.inf.events$.subscribe((e) => seenInCache.push(h.inf.get('ns1', e.object.metadata.name)?.metadata.resourceVersion));
    h.lw.answerList(page([raw('a', '5'), raw('b', '6')], '10'));
    await h.watching();
    h.lw.lastWatch?.push(
      { type: 'ADDED', object: raw('c', '11') },
      { type: 'MODIFIED', object: raw('a', '12', { ips: ['10.0.0.5/24'] }) },
      { type: 'MODIFIED', object: raw('a', '13', { ips: ['10.0.0.5/24'], noise: 'kubectl' }) },
      { type: 'DELETED', object: raw('b', '14') },
      { type: 'BOOKMARK', object: { metadata: { resourceVersion: '30' } } },
    );
    await flushPromises();
    assert.deepEqual(h.events, ['add a', 'add b', 'add c', 'update a', 'delete b']);
    assert.deepEqual(seenInCache, ['5', '6', '11', '12', undefined]);
    assert.equal(h.inf.get('ns1', 'a')?.metadata.resourceVersion, '13', 'the silent update still refreshed the cache');
    assert.equal(h.inf.resourceVersion, '30');
    assert.ok(Object.isFrozen(h.inf.get('ns1', 'a')?.metadata), 'cached objects are immutable');
  });

  it('resumes at once from the last resourceVersion when the server closes the watch', async () => {
    const h = await watchingNothing();
    h.lw.lastWatch?.push({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '25' } } });
    h.lw.lastWatch?.end();
    await flushPromises();
    assert.equal(h.lw.watches.length, 2);
    assert.equal(h.lw.lastWatch?.request.resourceVersion, '25');
    assert.equal(h.lw.listRequests.length, 1, 'no relist');
    assert.deepEqual(h.restarts, ['closed']);
  });

  it('on a watch ERROR 410 relists and emits the difference against the cache', async () => {
    const h = harness();
    h.lw.answerList(page([raw('a', '1'), raw('b', '1'), raw('c', '1'), raw('r', '1', { uid: 'old' })], '10'));
    await h.watching();
    h.lw.lastWatch?.push({ type: 'MODIFIED', object: raw('a', '11', { ips: ['10.0.0.1/24'] }) });
    await flushPromises();
    h.events.length = 0;
    // While we are disconnected: a changes again, b is untouched, c is deleted, d appears, r is recreated.
    h.lw.answerList(page([raw('a', '15', { ips: ['10.0.0.2/24'] }), raw('b', '1'), raw('d', '16'), raw('r', '17', { uid: 'new' })], '20'));
    h.lw.lastWatch?.push({
      type: 'ERROR',
      object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 410, reason: 'Expired', message: 'too old resource version: 11 (19)' },
    });
    await flushPromises();
    assert.deepEqual(h.events, ['delete c?', 'update a', 'add d', 'delete r?', 'add r']);
    assert.equal(h.lw.listRequests.length, 2, 'relisted at once, without a backoff wait');
    assert.equal(h.lw.lastWatch?.request.resourceVersion, '20');
    assert.deepEqual(h.lists, ['initial', 'gone']);
    assert.deepEqual(h.restarts, ['gone']);
  });

  it('on an HTTP 410 when opening the watch relists too', async () => {
    const h = harness();
    h.lw.answerList(page([raw('a', '1')], '10'), page([raw('b', '2')], '20'));
    h.lw.failNextWatch(gone());
    await h.watching();
    assert.deepEqual(h.events, ['add a', 'delete a?', 'add b']);
    assert.equal(h.lw.watches.length, 1);
    assert.equal(h.lw.lastWatch?.request.resourceVersion, '20');
  });

  it('restarts a silent watch from where it was, without backoff', async () => {
    const h = await watchingNothing();
    const first = h.lw.lastWatch;
    h.clock.advance(59_999);
    first?.push({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '12' } } });
    await flushPromises();
    h.clock.advance(59_999);
    await flushPromises();
    assert.equal(h.lw.watches.length, 1, 'a bookmark proves the watch alive');
    h.clock.advance(1);
    await flushPromises();
    assert.equal(first?.closed, true, 'the silent watch was aborted');
    assert.equal(h.lw.watches.length, 2, 'restarted at once');
    assert.equal(h.lw.lastWatch?.request.resourceVersion, '12');
    assert.deepEqual(h.clock.pendingDelays(), [60_000], 'only the new watch’s silence timer is pending');
    assert.deepEqual(h.restarts, ['silent']);
  });

  it('reconnects after errors with growing jittered backoff, resumes from the same resourceVersion, and resets after progress', async () => {
    const h = harness();
    h.lw.answerList(page([raw('a', '1')], '10'));
    await h.watching();
    h.lw.lastWatch?.fail(transient());
    await flushPromises();
    assert.equal(h.inf.state, 'backoff');
    assert.deepEqual(h.clock.pendingDelays(), [400]);
    h.clock.advance(400);
    await flushPromises();
    assert.equal(h.lw.watches.length, 2);
    assert.equal(h.lw.lastWatch?.request.resourceVersion, '10');
    h.lw.lastWatch?.fail(transient());
    await flushPromises();
    assert.deepEqual(h.clock.pendingDelays(), [800], 'second failure in a row waits longer');
    h.clock.advance(800);
    await flushPromises();
    h.lw.lastWatch?.push({ type: 'MODIFIED', object: raw('a', '11', { ips: ['10.0.0.1/24'] }) });
    h.lw.lastWatch?.fail(transient());
    await flushPromises();
    assert.deepEqual(h.clock.pendingDelays(), [400], 'a watch that made progress resets the backoff');
    h.clock.advance(400);
    await flushPromises();
    assert.equal(h.lw.lastWatch?.request.resourceVersion, '11');
    assert.equal(h.lw.listRequests.length, 1, 'errors other than 410 never relist');
    assert.deepEqual(h.events, ['add a', 'update a']);
  });

  it('after an outage, a 410 relists at once instead of inheriting the outage backoff, and an unanswered server is retried within seconds', async () => {
    const h = harness();
    h.lw.answerList(page([raw('a', '1')], '10'), page([raw('a', '1'), raw('b', '2')], '30'));
    await h.watching();
    // The server is gone: every reconnect fails without an answer. The waits grow, but stay short.
    const waits = await failingWaits(h, 8, transient);
    await flushPromises();
    assert.deepEqual(waits, [400, 800, 1600, 1600, 1600, 1600, 1600, 1600], 'capped at 3.2 s (half of it with this jitter)');
    // Back, with the resume point compacted away: the 410 is answered by a relist with no wait.
    const wait = h.clock.pendingDelays()[0] as number;
    h.lw.failNextWatch(gone());
    h.clock.advance(wait);
    await flushPromises();
    assert.equal(h.lw.listRequests.length, 2, 'relisted');
    assert.deepEqual(h.lists, ['initial', 'gone']);
    assert.ok(h.events.includes('add b'), 'the change made during the outage is seen');
    assert.equal(h.lw.lastWatch?.request.resourceVersion, '30', 'watching again from the new list');
  });

  it('keeps the long backoff for failures the server answers (5xx)', async () => {
    const h = await watchingNothing();
    const unavailable = (): KubeApiError =>
      new KubeApiError({ reason: 'transient', code: 503, object: { kind: 'IPAMClaim' }, verb: 'watch', message: 'unavailable' });
    const waits = await failingWaits(h, 8, unavailable);
    assert.deepEqual(waits, [400, 800, 1600, 3200, 6400, 12_800, 15_000, 15_000]);
  });

  it('treats a watch ERROR other than 410 as a connection error', async () => {
    const h = await watchingNothing();
    h.lw.lastWatch?.push({ type: 'ERROR', object: { kind: 'Status', code: 500, reason: 'InternalError', message: 'etcd hiccup' } });
    await flushPromises();
    assert.deepEqual(h.clock.pendingDelays(), [400]);
    assert.equal(h.lw.listRequests.length, 1);
  });

  it('backs off when a watch closes at once without any event', async () => {
    const h = await watchingNothing();
    h.lw.lastWatch?.end();
    await flushPromises();
    assert.equal(h.inf.state, 'backoff');
    assert.deepEqual(h.clock.pendingDelays(), [400]);
    h.clock.advance(400);
    await flushPromises();
    h.clock.advance(5_000);
    h.lw.lastWatch?.end();
    await flushPromises();
    assert.equal(h.lw.watches.length, 3, 'a quiet watch that lasted a while is resumed at once');
  });

  it('retries a failed initial list and becomes synced after it succeeds', async () => {
    const h = harness();
    h.lw.answerList(new KubeApiError({ reason: 'transient', code: 503, object: { kind: 'IPAMClaim' }, verb: 'list' }), page([raw('a', '1')], '10'));
    h.inf.start();
    await flushPromises();
    assert.equal(h.inf.hasSynced, false);
    assert.deepEqual(h.clock.pendingDelays(), [400]);
    h.clock.advance(400);
    await h.inf.synced;
    assert.deepEqual(h.lists, ['initial', 'retry']);
    assert.deepEqual(h.events, ['add a']);
  });

  it('stop during backoff ends everything: no restart, no timers, stream completed', async () => {
    const h = await watchingNothing();
    h.lw.lastWatch?.fail(transient());
    await flushPromises();
    assert.equal(h.inf.state, 'backoff');
    await h.inf.stop();
    assert.equal(h.inf.state, 'stopped');
    assert.equal(h.clock.pending, 0);
    assert.equal(h.completed(), true);
    h.clock.advance(3_600_000);
    await flushPromises();
    assert.equal(h.lw.watches.length, 1);
    assert.equal(h.lw.listRequests.length, 1);
    assert.throws(() => h.inf.start(), InformerStoppedError);
  });

  it('stop while watching aborts the watch request', async () => {
    const h = await watchingNothing();
    await h.inf.stop();
    assert.equal(h.lw.lastWatch?.request.signal.aborted, true);
    assert.equal(h.lw.watches.length, 1);
    assert.equal(h.clock.pending, 0);
    assert.deepEqual(h.restarts, []);
  });

  it('stop before the first list rejects synced and aborts the list', async () => {
    const h = harness();
    h.inf.start();
    await flushPromises();
    await h.inf.stop();
    await assert.rejects(h.inf.synced, InformerStoppedError);
    assert.equal(h.lw.listRequests[0]?.signal?.aborted, true);
  });

  it('maintains indexes from list and watch events', async () => {
    const h = harness();
    h.inf.addIndex(CLAIMS_BY_VM, claimsByVm);
    h.lw.answerList(page([raw('vm1.a', '1', { vm: 'vm1' })], '10'));
    await h.watching();
    h.lw.lastWatch?.push({ type: 'ADDED', object: raw('vm1.b', '11', { vm: 'vm1' }) }, { type: 'DELETED', object: raw('vm1.a', '12', { vm: 'vm1' }) });
    await flushPromises();
    assert.deepEqual(h.inf.indexKeys(CLAIMS_BY_VM, 'ns1/vm1'), ['ns1/vm1.b']);
  });
});

describe('Informer steady state', () => {
  it('emits nothing for VMI status churn, but does for activePods and deletion', async () => {
    const lw = new FakeListWatch();
    const clock = new FakeClock();
    const inf = new Informer({ kind: 'VirtualMachineInstance', listWatch: lw, trim: trimVirtualMachineInstance, clock, random: () => 0 });
    const events: string[] = [];
    inf.events$.subscribe((e) => events.push(e.type));
    const vmi = (rv: string, status: Record<string, unknown>): Record<string, unknown> => ({
      metadata: { name: 'vm1', namespace: 'ns1', uid: 'u', resourceVersion: rv, managedFields: [{ manager: rv }] },
      spec: { networks: [{ name: 'n', multus: { networkName: 'nad' } }] },
      status: { phase: 'Running', activePods: { p1: 'node1' }, ...status },
    });
    lw.answerList(page([vmi('1', {})], '1'));
    inf.start();
    await inf.synced;
    await flushPromises();
    for (let i = 2; i < 50; i++) {
      lw.lastWatch?.push({
        type: 'MODIFIED',
        object: vmi(String(i), { conditions: [{ type: 'Ready', lastProbeTime: String(i) }], interfaces: [{ ipAddress: `10.0.0.${i}` }] }),
      });
    }
    await flushPromises();
    assert.deepEqual(events, ['add'], '48 status updates, zero events');
    lw.lastWatch?.push({ type: 'MODIFIED', object: vmi('60', { activePods: { p1: 'node1', p2: 'node2' } }) });
    lw.lastWatch?.push({ type: 'DELETED', object: vmi('61', { activePods: { p1: 'node1', p2: 'node2' } }) });
    await flushPromises();
    assert.deepEqual(events, ['add', 'update', 'delete']);
    await inf.stop();
  });
});

describe('createInformer over KubeClient', () => {
  it('scopes list and watch to the namespace and resumes from the listed resourceVersion', async () => {
    const requests: HttpRequest[] = [];
    const enc = new TextEncoder();
    const transport: Transport = {
      server: 'https://127.0.0.1:6443',
      async request(req): Promise<HttpResponse> {
        requests.push(req);
        if (!req.query?.watch) {
          const body = JSON.stringify({ items: [raw('vm1.a', '5')], metadata: { resourceVersion: '10' } });
          return { status: 200, headers: {}, text: async () => body, stream: () => null };
        }
        const stream = new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(enc.encode(JSON.stringify({ type: 'ADDED', object: raw('vm1.b', '11') }) + '\n'));
            req.signal?.addEventListener('abort', () => c.error(req.signal?.reason));
          },
        });
        return { status: 200, headers: {}, text: async () => '', stream: () => stream };
      },
    };
    const inf = createInformer(new KubeClient(transport), kinds.ipamClaims, { namespace: 'ns1' }, { clock: new FakeClock(), watchTimeoutSeconds: 400 });
    const seen: string[] = [];
    inf.events$.subscribe((e) => seen.push(`${e.type} ${e.object.metadata.name}`));
    inf.start();
    await inf.synced;
    await flushPromises();
    await inf.stop();
    assert.deepEqual(seen, ['add vm1.a', 'add vm1.b']);
    assert.equal(requests[0]?.path, '/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims');
    assert.equal(requests[1]?.path, '/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims');
    assert.equal(requests[1]?.query?.resourceVersion, '10');
    assert.equal(requests[1]?.query?.allowWatchBookmarks, true);
    assert.equal(requests[1]?.query?.timeoutSeconds, 400);
    assert.equal(requests[1]?.signal?.aborted, true, 'stop closed the watch request');
  });

  it('createSources wires five informers with the controller’s indexes', async () => {
    const transport: Transport = { server: 'x', request: () => new Promise(() => undefined) };
    const s = createSources(new KubeClient(transport), { namespace: 'ns1', clock: new FakeClock() });
    assert.deepEqual(
      s.all.map((i) => i.kind),
      ['VirtualMachine', 'VirtualMachineInstance', 'NetworkAttachmentDefinition', 'IPAMClaim', 'KubeVirt'],
    );
    assert.equal(s.kubeVirts.namespace, undefined, 'the KubeVirt CR is looked for in every namespace by default');
    assert.deepEqual(s.claims.byIndex(CLAIMS_BY_VM, 'ns1/vm1'), []);
    await s.stop();
  });
});
