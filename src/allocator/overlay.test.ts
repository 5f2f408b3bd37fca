import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim } from '../kube/types.ts';
import { StatusOverlay, resourceVersionAtLeast } from './overlay.ts';

const claim = (rv: string, ips?: string[], uid = 'u1'): IPAMClaim => ({
  metadata: { name: 'c', namespace: 'ns', uid, resourceVersion: rv },
  spec: { network: 'n', interface: 'pod0' },
  ...(ips ? { status: { ips } } : {}),
});

describe('StatusOverlay', () => {
  it('a write is shown until the cache reaches its resourceVersion, through older events', () => {
    const o = new StatusOverlay();
    o.recordWrite('ns/c', 'n', '5', claim('9', ['10.0.0.1/24']));
    assert.deepEqual(o.view('ns/c', claim('5'))?.status?.ips, ['10.0.0.1/24']);
    assert.deepEqual(o.view('ns/c', claim('7'))?.status?.ips, ['10.0.0.1/24'], 'an older event replayed');
    assert.deepEqual(o.view('ns/c', undefined)?.status?.ips, ['10.0.0.1/24'], 'not in the cache yet');
    assert.equal(o.view('ns/c', claim('9', ['10.0.0.1/24']))?.metadata.resourceVersion, '9');
    assert.equal(o.size, 0);
  });

  it('a pending write holds until the claim changes after the version it was made against', () => {
    const o = new StatusOverlay();
    o.recordPending('ns/c', 'n', '5', claim('5', ['10.0.0.1/24']));
    assert.deepEqual(o.pendingOf('n').map((p) => p.resourceVersion), ['5']);
    assert.deepEqual(o.view('ns/c', claim('4'))?.status?.ips, ['10.0.0.1/24'], 'cache older than the attempt');
    assert.deepEqual(o.view('ns/c', claim('5'))?.status?.ips, ['10.0.0.1/24']);
    assert.equal(o.view('ns/c', claim('6'))?.status, undefined, 'changed since: the cache is the truth');
    assert.equal(o.size, 0);
  });

  it('seeds, deletes and re-created claims', () => {
    const o = new StatusOverlay();
    o.seed('ns/c', 'n', '3', claim('8', ['10.0.0.2/24']));
    assert.deepEqual(o.keysOf('n'), ['ns/c']);
    assert.equal(o.view('ns/c', claim('3', undefined, 'other-uid'))?.metadata.uid, 'other-uid', 're-created: the cache wins');
    o.seed('ns/c', 'n', '3', claim('8', ['10.0.0.2/24']));
    o.observeDeleted('ns/c', 'u1');
    assert.equal(o.size, 0);
  });

  it('non-numeric resourceVersions fall back to "changed since the write"', () => {
    assert.equal(resourceVersionAtLeast('abc', '5'), undefined);
    assert.equal(resourceVersionAtLeast('10', '9'), true);
    assert.equal(resourceVersionAtLeast('9', '10'), false);
    const o = new StatusOverlay();
    o.recordWrite('ns/c', 'n', 'x1', claim('x2', ['10.0.0.1/24']));
    assert.deepEqual(o.view('ns/c', claim('x1'))?.status?.ips, ['10.0.0.1/24']);
    assert.equal(o.view('ns/c', claim('x3'))?.status, undefined);
  });
});
