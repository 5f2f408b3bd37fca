import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { claimsByOwnerName } from '../sources/indexes.ts';
import { keysOfClaim, keysOfNadChange } from './keys.ts';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';

const claim = (meta: Partial<IPAMClaim['metadata']>): IPAMClaim => ({
  metadata: { name: 'vm-a.blue', namespace: 'ns', ...meta },
  spec: { network: 'blue', interface: 'pod123' },
});
const nad = (name: string, config: object): NetworkAttachmentDefinition => ({
  metadata: { name, namespace: 'ns' },
  spec: { config: JSON.stringify(config) },
});

describe('event → key mapping', () => {
  it('a claim maps to its VM owner, its VMI owner and its label, once each', () => {
    const c = claim({
      labels: { 'kubevirt.io/vm': 'vm-a' },
      ownerReferences: [
        { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm-a', uid: 'u1' },
        { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vmi-b', uid: 'u2' },
        { apiVersion: 'v1', kind: 'ConfigMap', name: 'other', uid: 'u3' },
      ],
    });
    assert.deepEqual(keysOfClaim(c).sort(), ['ns/vm-a', 'ns/vmi-b']);
    assert.deepEqual(claimsByOwnerName(c).sort(), ['ns/vm-a', 'ns/vmi-b']);
  });

  it('a hand-made claim with neither owner nor label concerns no key', () => {
    assert.deepEqual(keysOfClaim(claim({})), []);
  });

  it('a secondary NAD concerns exactly the VMs that reference it', () => {
    const lookup = { referencing: (k: string) => (k === 'ns/blue' ? ['ns/vm-a', 'ns/vm-b'] : []), inNamespace: () => ['ns/vm-a', 'ns/vm-b', 'ns/vm-c'] };
    assert.deepEqual([...keysOfNadChange(nad('blue', { name: 'blue' }), undefined, lookup)].sort(), ['ns/vm-a', 'ns/vm-b']);
  });

  it('a primary NAD, or one that stopped being primary, concerns its whole namespace', () => {
    const lookup = { referencing: () => [], inNamespace: (ns: string) => (ns === 'ns' ? ['ns/vm-a', 'ns/vm-c'] : []) };
    const primary = nad('udn', { name: 'udn', role: 'primary' });
    const secondary = nad('udn', { name: 'udn', role: 'secondary' });
    assert.deepEqual([...keysOfNadChange(primary, undefined, lookup)].sort(), ['ns/vm-a', 'ns/vm-c']);
    assert.deepEqual([...keysOfNadChange(secondary, primary, lookup)].sort(), ['ns/vm-a', 'ns/vm-c']);
    assert.deepEqual([...keysOfNadChange(secondary, secondary, lookup)], []);
  });
});
