import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MULTUS_NETWORKS_ANNOTATION } from '../claims/constants.ts';
import { parseNetworkSelection } from '../claims/network-selection.ts';
import type { NetworkSelectionElement, Pod } from '../kube/types.ts';
import { carryOverReferences } from './carry-over.ts';
import { applyJsonPatch } from '../../test/json-patch.ts';

const pod = (elements: NetworkSelectionElement[]): Pod =>
  ({ metadata: { name: 'virt-launcher-vm1-abcde', namespace: 'vms', annotations: { [MULTUS_NETWORKS_ANNOTATION]: JSON.stringify(elements) } } }) as Pod;
const elementsOf = (p: Pod): NetworkSelectionElement[] => {
  const parsed = parseNetworkSelection(p.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION] ?? '');
  assert.ok(parsed.ok);
  return parsed.elements;
};

describe('carry-over of what the webhook wrote at CREATE', () => {
  // virt-controller rebuilds a running launcher pod's networks annotation from the VMI spec (hotplug of another NIC):
  // the element of the allocator's network comes back without the reference and without the addresses.
  const created = pod([{ name: 'red', namespace: 'vms', interface: 'pod16367aacb67', 'ipam-claim-reference': 'vm1.red', ips: ['10.0.0.7/24'] }]);
  // The rebuilt element names the NAD the VMI spec names now: the same one (a hotplug of another NIC), or another on
  // the same pod interface (a NAD swap on the running VM, then a hotplug before the migration).
  for (const nad of ['red', 'nad-b']) {
    it(`the element (NAD ${nad}) gets back its reference and the addresses it started with; the new element is left to decide`, () => {
      const again = pod([
        { name: nad, namespace: 'vms', interface: 'pod16367aacb67' },
        { name: 'blue', namespace: 'vms', interface: 'podb1b' },
      ]);
      const result = carryOverReferences(created, again, 'vms');
      assert.deepEqual(result.refusals, []);
      assert.deepEqual(result.fresh, [1]);
      assert.deepEqual(elementsOf(result.pod)[0], {
        name: nad,
        namespace: 'vms',
        interface: 'pod16367aacb67',
        'ipam-claim-reference': 'vm1.red',
        ips: ['10.0.0.7/24'],
      });
      assert.deepEqual(elementsOf(result.pod)[1], { name: 'blue', namespace: 'vms', interface: 'podb1b' });
      assert.deepEqual(result.carried, [{ annotation: MULTUS_NETWORKS_ANNOTATION, element: `vms/${nad}@pod16367aacb67`, claim: 'vm1.red' }]);
      // The patch, applied to the request's object, gives the same pod.
      assert.deepEqual(elementsOf(applyJsonPatch(again, result.patch)), elementsOf(result.pod));
    });
  }

  it('addresses the new element names are its own: only a missing list is carried', () => {
    const withIps = pod([{ name: 'red', namespace: 'vms', interface: 'pod16367aacb67', ips: ['10.0.0.9/24'] }]);
    const result = carryOverReferences(created, withIps, 'vms');
    assert.deepEqual(elementsOf(result.pod)[0]?.ips, ['10.0.0.9/24']);
    assert.equal(elementsOf(result.pod)[0]?.['ipam-claim-reference'], 'vm1.red');
  });

  it('an element whose reference is still there is not touched', () => {
    const kept = pod([{ name: 'red', namespace: 'vms', interface: 'pod16367aacb67', 'ipam-claim-reference': 'vm1.red' }]);
    const result = carryOverReferences(created, kept, 'vms');
    assert.deepEqual(result.patch, []);
    assert.equal(elementsOf(result.pod)[0]?.ips, undefined);
  });

  // After a NAD swap: another claim named on that interface, or the interface gone.
  it('naming another claim on that interface is a changed reference: refused', () => {
    const renamed = pod([{ name: 'nad-b', namespace: 'vms', interface: 'pod16367aacb67', 'ipam-claim-reference': 'vm1.red-0123456789' }]);
    const result = carryOverReferences(created, renamed, 'vms');
    assert.equal(result.refusals.length, 1);
    assert.match(result.refusals[0]!, /would change its IPAMClaim reference from vm1\.red to vm1\.red-0123456789/);
  });

  it('an element gone with its interface (an unplug) goes with its reference', () => {
    const unplugged = pod([{ name: 'nad-b', namespace: 'vms', interface: 'podb1b' }]);
    const result = carryOverReferences(created, unplugged, 'vms');
    assert.deepEqual(result.carried, []);
    assert.deepEqual(result.fresh, [0]);
    assert.equal(elementsOf(result.pod)[0]?.['ipam-claim-reference'], undefined);
  });

  it('an ordinal interface (net<N>) names a position, not a network: no reference crosses NADs on it', () => {
    const ordinal = pod([
      { name: 'nad-a', namespace: 'vms', interface: 'net1', 'ipam-claim-reference': 'vm1.a' },
      { name: 'nad-b', namespace: 'vms', interface: 'net2', 'ipam-claim-reference': 'vm1.b' },
    ]);
    const result = carryOverReferences(ordinal, pod([{ name: 'nad-b', namespace: 'vms', interface: 'net1' }]), 'vms');
    assert.deepEqual(result.carried, []);
    assert.deepEqual(result.fresh, [0]);
  });
  // Found by the property test: a repeated NAD and interface (invalid for Multus, yet text anyone may write) once let
  // the last old reference win for every repeat, copying one claim onto two elements and losing the other.
  it('repeats of one NAD and interface are matched in order: each keeps its own reference, none gains another', () => {
    const twice = pod([
      { name: 'red', namespace: 'vms', interface: 'pod16367aacb67', 'ipam-claim-reference': 'vm1.a' },
      { name: 'red', namespace: 'vms', interface: 'pod16367aacb67', 'ipam-claim-reference': 'vm1.b' },
    ]);
    const rebuilt = pod([
      { name: 'red', namespace: 'vms', interface: 'pod16367aacb67' },
      { name: 'red', namespace: 'vms', interface: 'pod16367aacb67' },
      { name: 'red', namespace: 'vms', interface: 'pod16367aacb67' },
    ]);
    const result = carryOverReferences(twice, rebuilt, 'vms');
    assert.deepEqual(result.refusals, []);
    assert.deepEqual(
      elementsOf(result.pod).map((e) => e['ipam-claim-reference']),
      ['vm1.a', 'vm1.b', undefined],
    );
    assert.deepEqual(result.fresh, [2]);
  });
});
