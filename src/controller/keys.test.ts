import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { claimsByOwnerName } from '../sources/indexes.ts';
import { keysOfClaim, keysOfNadChange } from './keys.ts';
import { claim, nad } from '../../test/objects.ts';

const ns = { namespace: 'ns' };

describe('event → key mapping', () => {
  it('a claim maps to its VM owner, its VMI owner and its label, once each', () => {
    const c = claim({
      name: 'vm-a.blue',
      ...ns,
      labels: { 'kubevirt.io/vm': 'vm-a' },
      owners: [
        { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm-a', uid: 'u1' },
        { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vmi-b', uid: 'u2' },
        { apiVersion: 'v1', kind: 'ConfigMap', name: 'other', uid: 'u3' },
      ],
    });
    assert.deepEqual(keysOfClaim(c).sort(), ['ns/vm-a', 'ns/vmi-b']);
    assert.deepEqual(claimsByOwnerName(c).sort(), ['ns/vm-a', 'ns/vmi-b']);
  });

  it('a hand-made claim with neither owner nor label concerns no key', () => {
    assert.deepEqual(keysOfClaim(claim({ name: 'vm-a.blue', ...ns })), []);
  });

  it('a secondary NAD concerns exactly the VMs that reference it', () => {
    const lookup = { referencing: (k: string) => (k === 'ns/blue' ? ['ns/vm-a', 'ns/vm-b'] : []), inNamespace: () => ['ns/vm-a', 'ns/vm-b', 'ns/vm-c'] };
    assert.deepEqual([...keysOfNadChange(nad('blue', { name: 'blue' }, ns), undefined, lookup)].sort(), ['ns/vm-a', 'ns/vm-b']);
  });

  it('a primary NAD, or one that stopped being primary, concerns its whole namespace', () => {
    const lookup = { referencing: () => [], inNamespace: (ns: string) => (ns === 'ns' ? ['ns/vm-a', 'ns/vm-c'] : []) };
    const primary = nad('udn', { name: 'udn', role: 'primary' }, ns);
    const secondary = nad('udn', { name: 'udn', role: 'secondary' }, ns);
    assert.deepEqual([...keysOfNadChange(primary, undefined, lookup)].sort(), ['ns/vm-a', 'ns/vm-c']);
    assert.deepEqual([...keysOfNadChange(secondary, primary, lookup)].sort(), ['ns/vm-a', 'ns/vm-c']);
    assert.deepEqual([...keysOfNadChange(secondary, secondary, lookup)], []);
  });
});
