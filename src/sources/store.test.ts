import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { IPAMClaim } from '../kube/types.ts';
import { reconnectDelay } from './backoff.ts';
import { claimsByOwnerUid, claimsByVm, nadKeysOf, CLAIMS_BY_OWNER_UID, CLAIMS_BY_VM } from './indexes.ts';
import { keyString } from '../kube/key.ts';
import { type ChangeEvent, Store, deepEqual } from './store.ts';

function claim(name: string, o: { ns?: string; vm?: string; owner?: string; uid?: string; rv?: string; ips?: string[] } = {}): IPAMClaim {
  const c: IPAMClaim = {
    metadata: { name, namespace: o.ns ?? 'ns1', uid: o.uid ?? `uid-${name}`, resourceVersion: o.rv ?? '1' },
    spec: { network: 'net', interface: 'pod0' },
  };
  if (o.vm) c.metadata.labels = { 'kubevirt.io/vm': o.vm };
  if (o.owner) c.metadata.ownerReferences = [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: o.vm ?? 'x', uid: o.owner }];
  if (o.ips) c.status = { ips: o.ips };
  return c;
}

function newStore(): Store<IPAMClaim> {
  const s = new Store<IPAMClaim>();
  s.addIndex(CLAIMS_BY_VM, claimsByVm);
  s.addIndex(CLAIMS_BY_OWNER_UID, claimsByOwnerUid);
  return s;
}

const names = (xs: IPAMClaim[]): string[] => xs.map((x) => x.metadata.name).sort();

describe('Store', () => {
  it('emits add, then update only when content changes, keeping the newest resourceVersion silently', () => {
    const s = newStore();
    assert.deepEqual(
      s.upsert(claim('a', { rv: '1' })).map((e) => e.type),
      ['add'],
    );
    assert.deepEqual(s.upsert(claim('a', { rv: '2' })), [], 'a new resourceVersion alone is no event');
    assert.equal(s.get('ns1', 'a')?.metadata.resourceVersion, '2');
    const ev = s.upsert(claim('a', { rv: '3', ips: ['10.0.0.1/24'] }));
    assert.deepEqual(
      ev.map((e) => e.type),
      ['update'],
    );
    assert.equal(ev[0]?.old?.metadata.resourceVersion, '2');
  });

  it('always emits deletes, even for an object it never saw', () => {
    const s = newStore();
    s.upsert(claim('a'));
    const [d] = s.delete(claim('a', { rv: '5' }));
    assert.equal(d?.type, 'delete');
    assert.equal(d?.old?.metadata.name, 'a');
    assert.equal(s.size, 0);
    assert.deepEqual(
      s.delete(claim('never')).map((e) => e.type),
      ['delete'],
    );
  });

  it('reports a recreated object (new uid) as delete + add', () => {
    const s = newStore();
    s.upsert(claim('a', { uid: 'u1' }));
    const ev = s.upsert(claim('a', { uid: 'u2' }));
    assert.deepEqual(
      ev.map((e) => [e.type, e.object.metadata.uid]),
      [
        ['delete', 'u1'],
        ['add', 'u2'],
      ],
    );
  });

  it('lists by namespace and maintains indexes through updates and deletes', () => {
    const s = newStore();
    s.upsert(claim('vm1.a', { vm: 'vm1', owner: 'o1' }));
    s.upsert(claim('vm1.b', { vm: 'vm1', owner: 'o1' }));
    s.upsert(claim('vm1.a', { ns: 'ns2', vm: 'vm1', owner: 'o9' }));
    assert.deepEqual(names(s.list('ns1')), ['vm1.a', 'vm1.b']);
    assert.deepEqual(names(s.list('ns2')), ['vm1.a']);
    assert.deepEqual(s.list('nope'), []);
    assert.deepEqual(names(s.byIndex(CLAIMS_BY_VM, 'ns1/vm1')), ['vm1.a', 'vm1.b']);
    assert.deepEqual(s.indexKeys(CLAIMS_BY_OWNER_UID, 'o9'), ['ns2/vm1.a']);

    s.upsert(claim('vm1.b', { vm: 'vm2', owner: 'o2', rv: '2' }));
    assert.deepEqual(names(s.byIndex(CLAIMS_BY_VM, 'ns1/vm1')), ['vm1.a']);
    assert.deepEqual(names(s.byIndex(CLAIMS_BY_VM, 'ns1/vm2')), ['vm1.b']);
    assert.deepEqual(s.byIndex(CLAIMS_BY_OWNER_UID, 'o1').length, 1);

    s.delete(claim('vm1.a', { vm: 'vm1' }));
    assert.deepEqual(s.byIndex(CLAIMS_BY_VM, 'ns1/vm1'), []);
    assert.deepEqual(s.byIndex(CLAIMS_BY_OWNER_UID, 'o1'), []);
  });

  it('keeps an index value right as it goes from one object to several and back to none', () => {
    const s = newStore();
    for (const n of ['a', 'b', 'c']) s.upsert(claim(`vm1.${n}`, { vm: 'vm1', owner: 'o1' }));
    assert.deepEqual(s.indexKeys(CLAIMS_BY_OWNER_UID, 'o1').sort(), ['ns1/vm1.a', 'ns1/vm1.b', 'ns1/vm1.c']);
    s.delete(claim('vm1.a'));
    s.delete(claim('vm1.c'));
    assert.deepEqual(s.indexKeys(CLAIMS_BY_OWNER_UID, 'o1'), ['ns1/vm1.b']);
    s.upsert(claim('vm1.b', { vm: 'vm1', owner: 'o1', rv: '2', ips: ['10.0.0.1/24'] }));
    assert.deepEqual(names(s.byIndex(CLAIMS_BY_OWNER_UID, 'o1')), ['vm1.b']);
    s.upsert(claim('vm1.d', { vm: 'vm1', owner: 'o1' }));
    assert.deepEqual(names(s.byIndex(CLAIMS_BY_OWNER_UID, 'o1')), ['vm1.b', 'vm1.d']);
    s.delete(claim('vm1.b'));
    s.delete(claim('vm1.d'));
    assert.deepEqual(s.indexKeys(CLAIMS_BY_OWNER_UID, 'o1'), []);
  });

  it('answers index queries like a plain model through any sequence of adds and deletes (one, a few, many keys)', () => {
    // Deletes are rarer than adds, so that index values grow past the array size into a Set and shrink back.
    const op = fc.record({ del: fc.integer({ min: 0, max: 3 }).map((x) => x === 0), n: fc.integer({ min: 0, max: 11 }), owner: fc.constantFrom('o1', 'o2') });
    fc.assert(
      fc.property(fc.array(op, { minLength: 10, maxLength: 80, size: 'max' }), (ops) => {
        const s = newStore();
        const model = new Map<string, string>(); // claim name -> owner uid
        for (const { del, n, owner } of ops) {
          const name = `vm.n${n}`;
          if (del) {
            s.delete(claim(name));
            model.delete(name);
          } else {
            s.upsert(claim(name, { vm: 'vm', owner, rv: String(Math.random()) }));
            model.set(name, owner);
          }
          for (const o of ['o1', 'o2']) {
            const want = [...model]
              .filter(([, v]) => v === o)
              .map(([k]) => `ns1/${k}`)
              .sort();
            assert.deepEqual(s.indexKeys(CLAIMS_BY_OWNER_UID, o).sort(), want);
          }
          assert.deepEqual(s.indexKeys(CLAIMS_BY_VM, 'ns1/vm').sort(), [...model.keys()].map((k) => `ns1/${k}`).sort());
        }
      }),
      { numRuns: 300 },
    );
  });

  it('indexes existing objects when an index is added late, and rejects unknown or duplicate indexes', () => {
    const s = new Store<IPAMClaim>();
    s.upsert(claim('vm1.a', { vm: 'vm1' }));
    s.addIndex(CLAIMS_BY_VM, claimsByVm);
    assert.equal(s.byIndex(CLAIMS_BY_VM, 'ns1/vm1').length, 1);
    assert.throws(() => s.addIndex(CLAIMS_BY_VM, claimsByVm), /already exists/);
    assert.throws(() => s.byIndex('nope', 'x'), /no index named nope/);
  });

  it('replace emits the difference: synthetic deletes, adds, updates; nothing for the unchanged', () => {
    const s = newStore();
    s.replace([claim('keep'), claim('change'), claim('vanish'), claim('recreate', { uid: 'old' })]);
    const ev = s.replace([claim('keep', { rv: '9' }), claim('change', { ips: ['10.0.0.2/24'] }), claim('new'), claim('recreate', { uid: 'new' })]);
    const summary = ev.map((e) => `${e.type} ${e.object.metadata.name}${e.finalStateUnknown ? ' (unknown final state)' : ''}`);
    assert.deepEqual(summary, ['delete vanish (unknown final state)', 'update change', 'add new', 'delete recreate (unknown final state)', 'add recreate']);
    assert.deepEqual(names(s.list()), ['change', 'keep', 'new', 'recreate']);
    assert.equal(s.get('ns1', 'keep')?.metadata.resourceVersion, '9');
  });

  it('property: replace makes the cache equal to the list, and the events replay old → new', () => {
    const arbClaim = fc.record({
      name: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
      ns: fc.constantFrom('ns1', 'ns2'),
      vm: fc.option(fc.constantFrom('vm1', 'vm2'), { nil: undefined }),
      owner: fc.option(fc.constantFrom('o1', 'o2'), { nil: undefined }),
      uid: fc.constantFrom('u1', 'u2'),
      ips: fc.option(
        fc.constantFrom('10.0.0.1/24', '10.0.0.2/24').map((ip) => [ip]),
        { nil: undefined },
      ),
    });
    const toClaim = (c: { name: string; ns: string; vm?: string; owner?: string; uid: string; ips?: string[] }): IPAMClaim => claim(c.name, c);
    fc.assert(
      fc.property(fc.array(arbClaim, { maxLength: 8 }), fc.array(arbClaim, { maxLength: 8 }), (before, after) => {
        const s = newStore();
        s.replace(before.map(toClaim));
        const replica = new Map(s.list().map((o) => [keyString(o.metadata), o]));
        const events: ChangeEvent<IPAMClaim>[] = s.replace(after.map(toClaim));
        for (const e of events) {
          if (e.type === 'delete') replica.delete(keyString(e.object.metadata));
          else replica.set(keyString(e.object.metadata), e.object);
        }
        const want = new Map(after.map(toClaim).map((o) => [keyString(o.metadata), o]));
        assert.deepEqual(new Map([...s.list().map((o) => [keyString(o.metadata), o] as const)]), want);
        assert.equal(replica.size, want.size);
        for (const [k, o] of want) assert.ok(replica.has(k) && deepEqual(replica.get(k)?.spec, o.spec), k);
        // Indexes equal a recomputation from scratch.
        const fresh = newStore();
        fresh.replace([...want.values()]);
        for (const v of ['ns1/vm1', 'ns1/vm2', 'ns2/vm1', 'ns2/vm2'])
          assert.deepEqual(names(s.byIndex(CLAIMS_BY_VM, v)), names(fresh.byIndex(CLAIMS_BY_VM, v)));
        for (const v of ['o1', 'o2']) assert.deepEqual(names(s.byIndex(CLAIMS_BY_OWNER_UID, v)), names(fresh.byIndex(CLAIMS_BY_OWNER_UID, v)));
      }),
    );
  });
});

describe('deepEqual', () => {
  it('ignores key order and undefined members, not array order', () => {
    assert.equal(deepEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }), true);
    assert.equal(deepEqual({ a: 1, x: undefined }, { a: 1 }), true);
    assert.equal(deepEqual([1, 2], [2, 1]), false);
    assert.equal(deepEqual({ a: [] }, { a: {} }), false);
    assert.equal(deepEqual(null, {}), false);
  });
});

describe('nadKeysOf', () => {
  it('resolves plain and namespaced references, skipping pod networks and malformed ones', () => {
    const keys = nadKeysOf('ns1', {
      networks: [
        { name: 'default', pod: {} },
        { name: 'a', multus: { networkName: 'nad-a' } },
        { name: 'b', multus: { networkName: 'other/nad-b' } },
        { name: 'c', multus: { networkName: 'nad-a' } },
        { name: 'd', multus: { networkName: 'x/y/z' } },
        { name: 'e', multus: { networkName: '/nad' } },
      ],
    });
    assert.deepEqual(keys, ['ns1/nad-a', 'other/nad-b']);
  });
});

describe('reconnectDelay', () => {
  it('grows from the initial delay to the cap, jittered within [half, full]', () => {
    const lo = [1, 2, 3, 4, 10].map((n) => reconnectDelay(n, undefined, () => 0));
    const hi = [1, 2, 3, 4, 10].map((n) => reconnectDelay(n, undefined, () => 0.999999));
    assert.deepEqual(lo, [400, 800, 1600, 3200, 15_000]);
    for (const [i, h] of hi.entries()) assert.ok(h > (lo[i] as number) * 1.99 && h < (lo[i] as number) * 2 + 1e-6);
    assert.equal(reconnectDelay(0), 0);
    assert.ok(reconnectDelay(1000, 5000) <= 5000);
  });
});
