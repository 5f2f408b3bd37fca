import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IPAMClaim, OwnerReference } from '../kube/types.ts';
import { controllerRef, isKubevirtRef, kubevirtOwner, kubevirtOwnerRefs } from './owners.ts';

const ref = (kind: string, name: string, extra: Partial<OwnerReference> = {}): OwnerReference => ({
  apiVersion: kind === 'ReplicaSet' ? 'apps/v1' : 'kubevirt.io/v1',
  kind,
  name,
  uid: `uid-${name}`,
  ...extra,
});
const claim = (...ownerReferences: OwnerReference[]): IPAMClaim => ({
  metadata: { name: 'vm1.blue', namespace: 'ns', ownerReferences },
  spec: { network: 'n', interface: 'i' },
});

describe('controllerRef', () => {
  const cases: [string, OwnerReference[], string, string | undefined][] = [
    ['the controller of that kind', [ref('VirtualMachine', 'a'), ref('VirtualMachine', 'b', { controller: true })], 'VirtualMachine', 'b'],
    ['none when the only reference of that kind is not the controller', [ref('VirtualMachine', 'a')], 'VirtualMachine', undefined],
    ['none when the controller is of another kind', [ref('ReplicaSet', 'rs', { controller: true })], 'VirtualMachine', undefined],
    ['none without references', [], 'VirtualMachineInstance', undefined],
  ];
  for (const [what, refs, kind, expected] of cases) {
    it(what, () => assert.equal(controllerRef({ metadata: { name: 'x', ownerReferences: refs } }, kind)?.name, expected));
  }
});

describe('isKubevirtRef', () => {
  const cases: [string, string, boolean][] = [
    ['kubevirt.io/v1', 'kubevirt.io/v1', true],
    ['any version of the group', 'kubevirt.io/v1alpha3', true],
    ['a group that only starts like it', 'kubevirt.io.example.com/v1', false],
    ['a subgroup of it', 'pool.kubevirt.io/v1beta1', false],
    ['the core group', 'v1', false],
  ];
  for (const [what, apiVersion, expected] of cases) {
    it(what, () => assert.equal(isKubevirtRef(ref('VirtualMachine', 'vm1', { apiVersion })), expected));
  }
});

describe('kubevirtOwnerRefs and kubevirtOwner', () => {
  const cases: [string, OwnerReference[], string[], string | undefined][] = [
    ['a VM owner', [ref('VirtualMachine', 'vm1', { controller: true })], ['vm1'], 'vm1'],
    [
      'the controller among several, else the first',
      [ref('VirtualMachineInstance', 'vmi1'), ref('VirtualMachine', 'vm1', { controller: true })],
      ['vmi1', 'vm1'],
      'vm1',
    ],
    ['the first when none is the controller', [ref('VirtualMachineInstance', 'vmi1'), ref('VirtualMachine', 'vm1')], ['vmi1', 'vm1'], 'vmi1'],
    ['not a kind of KubeVirt', [ref('ReplicaSet', 'rs', { controller: true })], [], undefined],
    ['not the kubevirt.io group, whatever the kind', [ref('VirtualMachine', 'imposter', { apiVersion: 'example.com/v1', controller: true })], [], undefined],
    ['no owners', [], [], undefined],
  ];
  for (const [what, refs, names, owner] of cases) {
    it(what, () => {
      assert.deepEqual(
        kubevirtOwnerRefs(claim(...refs)).map((r) => r.name),
        names,
      );
      assert.equal(kubevirtOwner(claim(...refs))?.name, owner);
    });
  }
});
