import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { resourceVersionAtLeast, WriteOverlay } from './write-overlay.ts';
import type { IPAMClaim } from '../kube/types.ts';

/** The overlay reads a claim's uid, resourceVersion and status only. */
const claim = (rv: string, uid = 'c1', ips?: string[]): IPAMClaim => ({
  metadata: { name: 'vm-a.blue', namespace: 'ns', uid, resourceVersion: rv },
  spec: { network: 'blue', interface: 'pod1' },
  ...(ips ? { status: { ips } } : {}),
});

describe('WriteOverlay', () => {
  it('shows a created claim until the cache has it', () => {
    const overlay = new WriteOverlay();
    overlay.record('ns/vm-a.blue', undefined, claim('5'));
    assert.equal(overlay.view('ns/vm-a.blue', undefined)?.metadata.resourceVersion, '5');
    assert.equal(overlay.view('ns/vm-a.blue', claim('5'))?.metadata.resourceVersion, '5');
    assert.equal(overlay.size, 0, 'the entry is dropped once the cache caught up');
  });

  it('shows a claim as gone after a delete while the cache still holds the old version', () => {
    const overlay = new WriteOverlay();
    overlay.record('ns/vm-a.blue', '7', null);
    assert.equal(overlay.view('ns/vm-a.blue', claim('7')), undefined);
    assert.equal(overlay.view('ns/vm-a.blue', claim('7')), undefined);
  });

  it("yields to the cache once it shows the answer's version or a newer one", () => {
    const overlay = new WriteOverlay();
    overlay.record('ns/vm-a.blue', '7', claim('8'));
    assert.equal(overlay.view('ns/vm-a.blue', claim('9'))?.metadata.resourceVersion, '9');
    assert.equal(overlay.view('ns/vm-a.blue', claim('7'))?.metadata.resourceVersion, '7', 'no entry left to mask it');
  });

  it('forgets a created claim that was deleted before its add reached the cache', () => {
    const overlay = new WriteOverlay();
    overlay.record('ns/vm-a.blue', undefined, claim('5', 'c9'));
    overlay.observeDeleted('ns/vm-a.blue', 'other-uid');
    assert.ok(overlay.view('ns/vm-a.blue', undefined), 'a delete of another incarnation does not end it');
    overlay.observeDeleted('ns/vm-a.blue', 'c9');
    assert.equal(overlay.view('ns/vm-a.blue', undefined), undefined);
  });

  it("ends a delete's entry once the cache no longer shows the claim, and takes a release of the last finalizer for a delete", () => {
    const overlay = new WriteOverlay();
    overlay.record('ns/vm-a.blue', '7', null);
    assert.equal(overlay.view('ns/vm-a.blue', undefined), undefined);
    assert.equal(overlay.size, 0);
    const released = { ...claim('9'), metadata: { ...claim('9').metadata, deletionTimestamp: '2025-01-01T00:00:00Z', finalizers: [] } };
    overlay.record('ns/vm-a.blue', '7', released);
    assert.equal(overlay.view('ns/vm-a.blue', claim('7')), undefined, 'the API server deleted it with that write');
  });

  it('keeps its answer over an older or intermediate state of the claim', () => {
    const overlay = new WriteOverlay();
    overlay.record('ns/vm-a.blue', '7', claim('9'));
    assert.equal(overlay.view('ns/vm-a.blue', claim('8'))?.metadata.resourceVersion, '9');
    assert.equal(overlay.observeUpdated('ns/vm-a.blue', claim('8')), false, "someone else's change before ours: news, not an echo");
    assert.equal(overlay.size, 1);
    assert.equal(overlay.observeUpdated('ns/vm-a.blue', claim('9')), true);
  });

  it('recognises the echo of its own write, ends the expectation on any newer state, and keeps the answer trimmed', () => {
    const overlay = new WriteOverlay();
    const answered = { ...claim('5'), metadata: { ...claim('5').metadata, managedFields: [{ manager: 'persistent-ips' }] } } as IPAMClaim;
    overlay.record('ns/vm-a.blue', undefined, answered);
    assert.equal('managedFields' in (overlay.view('ns/vm-a.blue', undefined)?.metadata ?? {}), false);
    assert.equal(overlay.observeUpdated('ns/vm-a.blue', claim('5')), true, 'the ADDED event of the create');
    assert.equal(overlay.size, 0);
    assert.equal(overlay.observeUpdated('ns/vm-a.blue', claim('5')), false, 'only once');

    overlay.record('ns/vm-a.blue', '7', claim('8'));
    assert.equal(overlay.observeUpdated('ns/vm-a.blue', claim('7')), false, 'the state we wrote against is no echo');
    assert.equal(overlay.size, 1, 'and does not end the expectation');
    assert.equal(overlay.observeUpdated('ns/vm-a.blue', claim('9')), false, 'someone else wrote after us');
    assert.equal(overlay.size, 0);

    overlay.record('ns/vm-a.blue', undefined, claim('5', 'c1'));
    assert.equal(overlay.observeUpdated('ns/vm-a.blue', claim('5', 'c2')), false, 'another incarnation');
  });

  describe('a create whose claim reaches the informer before the answer', () => {
    const key = 'ns/vm-a.blue';

    it('takes the add for the echo, and keeps nothing once the answer shows the same claim', () => {
      const overlay = new WriteOverlay();
      overlay.beginCreate(key);
      assert.equal(overlay.observeUpdated(key, claim('5'), true), true, 'no second reconcile for our own claim');
      assert.equal(overlay.endCreate(key, claim('5')), false);
      assert.equal(overlay.size, 0, 'the cache is already as new as the answer');
      assert.equal(overlay.observeUpdated(key, claim('6')), false, 'a later change is news');
    });

    it('keeps nothing when the create failed, and does not take a second add for an echo', () => {
      const overlay = new WriteOverlay();
      overlay.beginCreate(key);
      assert.equal(overlay.observeUpdated(key, claim('5', 'someone-else'), true), true);
      assert.equal(overlay.observeUpdated(key, claim('9', 'third'), true), false, 'only one add can be the echo of one create');
      assert.equal(overlay.endCreate(key, null), true, "the claim taken for an echo is someone else's: look again");
      assert.equal(overlay.size, 0);
      assert.equal(overlay.observeUpdated(key, claim('10', 'fourth'), true), false, 'no create in flight any more');
      overlay.beginCreate(key);
      assert.equal(overlay.endCreate(key, null), false, 'a failed create with nothing taken for its echo');
    });

    it('never takes an update for the echo of a create', () => {
      const overlay = new WriteOverlay();
      overlay.beginCreate(key);
      assert.equal(overlay.observeUpdated(key, claim('5'), false), false);
    });

    it('bridges the gap as before when the answer comes first', () => {
      const overlay = new WriteOverlay();
      overlay.beginCreate(key);
      overlay.endCreate(key, claim('5', 'ours'));
      assert.equal(overlay.view(key, undefined)?.metadata.uid, 'ours', 'the cache does not show it yet');
      assert.equal(overlay.observeUpdated(key, claim('5', 'ours'), true), true, 'then its add is the echo');
      assert.equal(overlay.size, 0);
    });
  });
});

const sclaim = (rv: string, ips?: string[], uid = 'u1'): IPAMClaim => claim(rv, uid, ips);

describe("WriteOverlay: the allocator's entries", () => {
  it('a write is shown until the cache reaches its resourceVersion, through older events', () => {
    const o = new WriteOverlay();
    o.record('ns/c', '5', sclaim('9', ['10.0.0.1/24']), 'n');
    assert.deepEqual(o.view('ns/c', sclaim('5'))?.status?.ips, ['10.0.0.1/24']);
    assert.deepEqual(o.view('ns/c', sclaim('7'))?.status?.ips, ['10.0.0.1/24'], 'an older event replayed');
    assert.deepEqual(o.view('ns/c', undefined)?.status?.ips, ['10.0.0.1/24'], 'not in the cache yet');
    assert.equal(o.view('ns/c', sclaim('9', ['10.0.0.1/24']))?.metadata.resourceVersion, '9');
    assert.equal(o.size, 0);
  });

  it('a pending write holds until the claim changes after the version it was made against', () => {
    const o = new WriteOverlay();
    o.recordPending('ns/c', 'n', '5', sclaim('5', ['10.0.0.1/24']));
    assert.deepEqual(
      o.pendingOf('n').map((p) => p.resourceVersion),
      ['5'],
    );
    assert.deepEqual(o.view('ns/c', sclaim('4'))?.status?.ips, ['10.0.0.1/24'], 'cache older than the attempt');
    assert.deepEqual(o.view('ns/c', sclaim('5'))?.status?.ips, ['10.0.0.1/24']);
    assert.equal(o.view('ns/c', sclaim('6'))?.status, undefined, 'changed since: the cache is the truth');
    assert.equal(o.size, 0);
  });

  it('seeds, deletes and re-created claims', () => {
    const o = new WriteOverlay();
    o.seed('ns/c', 'n', '3', sclaim('8', ['10.0.0.2/24']));
    assert.deepEqual(o.keysOf('n'), ['ns/c']);
    assert.equal(o.view('ns/c', sclaim('3', undefined, 'other-uid'))?.metadata.uid, 'other-uid', 're-created: the cache wins');
    o.seed('ns/c', 'n', '3', sclaim('8', ['10.0.0.2/24']));
    o.observeDeleted('ns/c', 'u1');
    assert.equal(o.size, 0);
  });

  it('non-numeric resourceVersions fall back to "changed since the write"', () => {
    assert.equal(resourceVersionAtLeast('abc', '5'), undefined);
    assert.equal(resourceVersionAtLeast('10', '9'), true);
    assert.equal(resourceVersionAtLeast('9', '10'), false);
    assert.equal(resourceVersionAtLeast('123456789012345678901', '123456789012345678900'), true);
    const o = new WriteOverlay();
    o.record('ns/c', 'x1', sclaim('x2', ['10.0.0.1/24']), 'n');
    assert.deepEqual(o.view('ns/c', sclaim('x1'))?.status?.ips, ['10.0.0.1/24']);
    assert.equal(o.view('ns/c', sclaim('x3'))?.status, undefined);
  });
});
