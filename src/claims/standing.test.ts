import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim, VirtualMachineInstance } from '../kube/types.ts';
import { claimStanding, ownerUidsOf } from './standing.ts';

const claim = (meta: Partial<IPAMClaim['metadata']>, network = 'tenant-red'): IPAMClaim => ({
  metadata: { name: 'vm1.red', namespace: 'ns', uid: 'claim-uid', ...meta },
  spec: { network, interface: 'pod1' },
});
const owner = (kind: string, uid: string, name = 'vm1') => ({ apiVersion: 'kubevirt.io/v1', kind, name, uid, controller: true });

const vmiOfVm: VirtualMachineInstance = { metadata: { name: 'vm1', namespace: 'ns', uid: 'vmi-uid', ownerReferences: [owner('VirtualMachine', 'vm-uid')] } };
const standalone: VirtualMachineInstance = { metadata: { name: 'vm1', namespace: 'ns', uid: 'vmi-uid' } };

describe('ownerUidsOf', () => {
  it('the VMI and its controlling VM', () => {
    assert.deepEqual(ownerUidsOf(vmiOfVm), { name: 'vm1', vmiUid: 'vmi-uid', vmUid: 'vm-uid' });
    assert.deepEqual(ownerUidsOf(standalone), { name: 'vm1', vmiUid: 'vmi-uid' });
  });
  it('a VM owner reference that is not the controller does not count', () => {
    const vmi: VirtualMachineInstance = {
      metadata: { name: 'vm1', uid: 'vmi-uid', ownerReferences: [{ ...owner('VirtualMachine', 'vm-uid'), controller: false }] },
    };
    assert.deepEqual(ownerUidsOf(vmi), { name: 'vm1', vmiUid: 'vmi-uid' });
  });
});

describe('claimStanding', () => {
  const owners = ownerUidsOf(vmiOfVm);
  const reason = (c: IPAMClaim | undefined, expected?: string) => {
    const s = claimStanding(c, 'vm1.red', owners, expected);
    return s.usable ? 'usable' : s.reason;
  };

  it('owned by the VM (by uid) or by the VMI, not terminating, same network: usable', () => {
    assert.equal(reason(claim({ ownerReferences: [owner('VirtualMachine', 'vm-uid')] }), 'tenant-red'), 'usable');
    assert.equal(reason(claim({ ownerReferences: [owner('VirtualMachineInstance', 'vmi-uid')] }), 'tenant-red'), 'usable');
    assert.equal(reason(claim({ ownerReferences: [owner('VirtualMachine', 'vm-uid')] })), 'usable', 'no network to compare');
  });

  it('missing: ClaimNotFound, naming the claim', () => {
    const s = claimStanding(undefined, 'vm1.red', owners);
    assert.equal(s.usable, false);
    assert.ok(!s.usable && s.reason === 'ClaimNotFound' && s.message.includes('vm1.red'));
  });

  it('an earlier VM of the same name (same name, other uid): ClaimOwnedByAnotherObject, whether terminating or not', () => {
    assert.equal(reason(claim({ ownerReferences: [owner('VirtualMachine', 'old-vm-uid')] })), 'ClaimOwnedByAnotherObject');
    assert.equal(
      reason(claim({ ownerReferences: [owner('VirtualMachine', 'old-vm-uid')], deletionTimestamp: '2026-01-01T00:00:00Z' })),
      'ClaimOwnedByAnotherObject',
    );
  });

  it('another VM whose name collides on the claim name: ClaimOwnedByAnotherObject', () => {
    const s = claimStanding(claim({ ownerReferences: [owner('VirtualMachine', 'other-uid', 'vm1.x')] }), 'vm1.red', owners);
    assert.ok(!s.usable && s.reason === 'ClaimOwnedByAnotherObject' && s.message.includes('vm1.x') && s.message.includes('other-uid'));
  });

  it('the name matching is by uid only: an owner reference with our name but another uid is not ours', () => {
    assert.equal(reason(claim({ ownerReferences: [owner('VirtualMachineInstance', 'not-vmi-uid')] })), 'ClaimOwnedByAnotherObject');
  });

  it('no owner: ClaimNotOwned', () => {
    assert.equal(reason(claim({})), 'ClaimNotOwned');
  });

  it('ours but being deleted: ClaimTerminating', () => {
    assert.equal(reason(claim({ ownerReferences: [owner('VirtualMachine', 'vm-uid')], deletionTimestamp: '2026-01-01T00:00:00Z' })), 'ClaimTerminating');
  });

  it('ours, for another network than the NAD now names: ClaimNetworkMismatch', () => {
    assert.equal(reason(claim({ ownerReferences: [owner('VirtualMachine', 'vm-uid')] }, 'old-net'), 'tenant-red'), 'ClaimNetworkMismatch');
  });

  it('messages carry nothing that changes between retries (same denial, same Event)', () => {
    const a = claimStanding(claim({ ownerReferences: [owner('VirtualMachine', 'old')], resourceVersion: '1' }), 'vm1.red', owners);
    const b = claimStanding(claim({ ownerReferences: [owner('VirtualMachine', 'old')], resourceVersion: '2' }), 'vm1.red', owners);
    assert.deepEqual(a, b);
  });
});
