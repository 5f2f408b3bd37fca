import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { trimVmiSpec } from '../sources/trim.ts';
import { effectiveVmiSpec } from './effective-spec.ts';

describe('effectiveVmiSpec: the pod network KubeVirt adds to a VMI', () => {
  it('no networks and no interfaces: the default pod network and its interface are added', () => {
    assert.deepEqual(effectiveVmiSpec({}), {
      networks: [{ name: 'default', pod: {} }],
      domain: { devices: { interfaces: [{ name: 'default', masquerade: {} }] } },
    });
    assert.deepEqual(effectiveVmiSpec({ networks: [], domain: { devices: { interfaces: [], autoattachPodInterface: true } } })?.networks, [
      { name: 'default', pod: {} },
    ]);
  });
  it('autoattachPodInterface false, or any network or interface listed: unchanged', () => {
    const off = { domain: { devices: { autoattachPodInterface: false } } };
    assert.equal(effectiveVmiSpec(off), off);
    const one = { networks: [{ name: 'red', multus: { networkName: 'red' } }] };
    assert.equal(effectiveVmiSpec(one), one);
    const iface = { domain: { devices: { interfaces: [{ name: 'x', bridge: {} }] } } };
    assert.equal(effectiveVmiSpec(iface), iface);
    assert.equal(effectiveVmiSpec(undefined), undefined);
  });
  it('idempotent (a VMI from the API was already defaulted by KubeVirt)', () => {
    const once = effectiveVmiSpec({});
    assert.deepEqual(effectiveVmiSpec(once), once);
  });
  it('the informer trim keeps autoattachPodInterface: false (and only that value)', () => {
    assert.deepEqual(trimVmiSpec({ domain: { devices: { autoattachPodInterface: false, disks: [{ name: 'd' }] } } }), {
      domain: { devices: { autoattachPodInterface: false } },
    });
    assert.deepEqual(trimVmiSpec({ domain: { devices: { autoattachPodInterface: true } } }), {});
  });
});
