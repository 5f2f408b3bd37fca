import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { guardClaimReferences, unreadableReference, type GuardInput, type GuardRule } from './claim-guard.ts';

const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const DEFAULT_NETWORK = 'v1.multus-cni.io/default-network';
const PRIMARY = 'k8s.ovn.org/primary-udn-ipamclaim';
const list = (...elements: Record<string, unknown>[]) => JSON.stringify(elements);
const red = (claim?: string) => ({ name: 'red', namespace: 'vms', interface: 'pod1a2b3c', ...(claim === undefined ? {} : { 'ipam-claim-reference': claim }) });

const pod = (annotations: Record<string, string>, more: Partial<GuardInput> = {}): GuardInput => ({
  kind: 'Pod',
  operation: 'CREATE',
  subject: 'vms/web',
  annotations,
  launcher: false,
  ...more,
});

describe('guardClaimReferences', () => {
  const table: [string, GuardInput, GuardRule | undefined][] = [
    ['plain pod, networks element names a claim', pod({ [NETWORKS]: list(red('vm1.red')) }), 'NotALauncherPod'],
    [
      'plain pod, default-network element names a claim',
      pod({ [DEFAULT_NETWORK]: list({ name: 'default', 'ipam-claim-reference': 'vm1.p' }) }),
      'NotALauncherPod',
    ],
    ['plain pod, primary-UDN annotation', pod({ [PRIMARY]: 'vm1.p' }), 'NotALauncherPod'],
    ['plain pod, no reference', pod({ [NETWORKS]: list(red()) }), undefined],
    ['plain pod, empty reference', pod({ [NETWORKS]: list(red('')) }), undefined],
    ['plain pod, list of names', pod({ [NETWORKS]: 'red,vms/blue@eth2' }), undefined],
    ['plain pod, empty primary-UDN annotation', pod({ [PRIMARY]: '' }), undefined],
    ['plain pod, no annotations', pod({}), undefined],
    ['launcher pod naming a claim: the launcher rules decide', pod({ [NETWORKS]: list(red('vm1.red')) }, { launcher: true }), undefined],
    ['key in another letter case', pod({ [NETWORKS]: '[{"name":"red","IPAM-Claim-Reference":"vm1.red"}]' }), 'UnreadableReference'],
    [
      'key in another letter case, launcher pod too',
      pod({ [NETWORKS]: '[{"name":"red","Ipam-Claim-Reference":"vm1.red"}]' }, { launcher: true }),
      'UnreadableReference',
    ],
    ['\\u escape', pod({ [NETWORKS]: '[{"name":"red","\\u0069pam-claim-reference":"vm1.red"}]' }), 'UnreadableReference'],
    // Go keeps "vm1.red" (a null leaves the field alone); JSON.parse keeps only the null.
    [
      'duplicate key hiding a reference behind null',
      pod({ [NETWORKS]: '[{"name":"red","ipam-claim-reference":"vm1.red","ipam-claim-reference":null}]' }),
      'UnreadableReference',
    ],
    [
      'UPDATE adding a reference',
      pod({ [NETWORKS]: list(red('vm1.red')) }, { operation: 'UPDATE', oldAnnotations: { [NETWORKS]: list(red()) } }),
      'NotALauncherPod',
    ],
    ['UPDATE changing a reference', pod({ [PRIMARY]: 'vm2.p' }, { operation: 'UPDATE', oldAnnotations: { [PRIMARY]: 'vm1.p' } }), 'NotALauncherPod'],
    [
      'UPDATE keeping a reference it had',
      pod({ [NETWORKS]: list(red('vm1.red')), x: 'y' }, { operation: 'UPDATE', oldAnnotations: { [NETWORKS]: list(red('vm1.red')) } }),
      undefined,
    ],
    ['UPDATE removing a reference', pod({ [NETWORKS]: list(red()) }, { operation: 'UPDATE', oldAnnotations: { [NETWORKS]: list(red('vm1.red')) } }), undefined],
    ['Binding with the networks annotation', { ...pod({ [NETWORKS]: list(red('vm1.red')) }), kind: 'Binding' }, 'BindingCarriesClaimKeys'],
    ['Binding with an empty primary-UDN annotation', { ...pod({ [PRIMARY]: '' }), kind: 'Binding' }, 'BindingCarriesClaimKeys'],
    ['Binding with other annotations', { ...pod({ 'example.com/x': 'y' }), kind: 'Binding' }, undefined],
  ];
  for (const [name, input, rule] of table) {
    it(`${name}: ${rule ?? 'no refusal'}`, () => assert.equal(guardClaimReferences(input)?.rule, rule));
  }

  it('the message names the pod, the claim, the annotation and why', () => {
    const refusal = guardClaimReferences(pod({ [NETWORKS]: list(red('vm1.red')) }));
    assert.deepEqual(refusal?.claims, ['vm1.red']);
    assert.match(refusal?.message ?? '', /pod vms\/web names IPAMClaim vm1\.red \(k8s\.v1\.cni\.cncf\.io\/networks\), but it is not a virt-launcher pod/);
  });
});

describe('unreadableReference', () => {
  it('reads a reference the way Go does, or says why it cannot', () => {
    assert.equal(unreadableReference(list(red('vm1.red'))), undefined);
    assert.equal(unreadableReference('red,blue'), undefined);
    assert.match(unreadableReference('[{"name":"red","ipam-claim-reference":"vm1.red"') ?? '', /cannot be read/);
    assert.match(unreadableReference('[{"name":"red","IPAM-CLAIM-REFERENCE":"x"}]') ?? '', /spells "ipam-claim-reference" as "IPAM-CLAIM-REFERENCE"/);
    assert.match(unreadableReference('[{"name":"r\\u00e9d"}]') ?? '', /\\u escape/);
  });
});
