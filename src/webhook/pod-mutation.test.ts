import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimName, collisionClaimName, persistentNetworks, podInterfaceName } from '../claims/index.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VirtualMachineInstance, VmInterface, VmNetwork } from '../kube/types.ts';
import { mayNeedReferences, mutateLauncherPod as mutateWith, type PodMutationInput } from './pod-mutation.ts';
import { applyJsonPatch } from '../../test/json-patch.ts';
import { claim, nad, nadMap } from '../../test/objects.ts';

/** The mutation with the persistent networks computed as the admission handler does, once, from the same VMI and NADs. */
const mutateLauncherPod = (input: Omit<PodMutationInput, 'persistent'>) =>
  mutateWith({ ...input, persistent: persistentNetworks({ namespace: input.namespace, name: input.vmi.metadata.name }, input.vmi.spec, input.nads) });

const NS = 'vms';
const VM = 'vm1';
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const DEFAULT_NET = 'v1.multus-cni.io/default-network';
const LEGACY = 'k8s.ovn.org/primary-udn-ipamclaim';
const withAnnotations = (v: VirtualMachineInstance, annotations: Record<string, string>): VirtualMachineInstance => ({
  ...v,
  metadata: { ...v.metadata, annotations },
});

const ovn = (name: string, extra: Record<string, unknown>) => ({
  cniVersion: '0.4.0',
  name,
  type: 'ovn-k8s-cni-overlay',
  topology: 'layer2',
  subnets: '10.10.0.0/16',
  ...extra,
});

const NADS = [
  nad('red', ovn('tenant-red', { allowPersistentIPs: true })),
  nad('blue', ovn('tenant-blue', {})),
  nad('bridge', { cniVersion: '0.4.0', name: 'br', type: 'bridge' }, { annotations: { 'persistent-ips.kubevirt.io/allow-persistent-ips': 'true' } }),
  nad('red', ovn('other-red', { allowPersistentIPs: true }), { namespace: 'other' }),
  nad('l3', ovn('l3net', { allowPersistentIPs: true, topology: 'layer3' })),
];
const PRIMARY = nad('primary-udn', ovn('tenant-primary', { role: 'primary', allowPersistentIPs: true }));

function vmi(networks: VmNetwork[], interfaces: VmInterface[] = networks.map((n) => ({ name: n.name, bridge: {} }))): VirtualMachineInstance {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: VM, namespace: NS, uid: 'vmi-uid' },
    spec: { networks, domain: { devices: { interfaces } } },
  };
}

const multus = (name: string, networkName: string, extra: Partial<VmNetwork['multus']> = {}): VmNetwork => ({ name, multus: { networkName, ...extra } });

function pod(annotations: Record<string, string> | undefined, labels: Record<string, string> = { 'kubevirt.io': 'virt-launcher' }): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'virt-launcher-vm1-abcde', namespace: NS, labels, ...(annotations ? { annotations: { 'kubevirt.io/domain': VM, ...annotations } } : {}) },
  };
}

const el = (name: string, network: string, extra: Record<string, unknown> = {}) => ({ name, namespace: NS, interface: podInterfaceName(network), ...extra });
const json = (elements: unknown[]): string => JSON.stringify(elements);

interface Row {
  name: string;
  input: Partial<PodMutationInput> & { pod: Pod; vmi: VirtualMachineInstance };
  /** The annotations after the patch; undefined: no patch at all. */
  expect?: Record<string, unknown>;
  skipped?: string;
  reports?: string[];
  stale?: boolean;
  denials?: string[];
}

const rows: Row[] = [
  {
    name: 'not a launcher pod: no patch',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'red')]) }, { app: 'x' }), vmi: vmi([multus('red', 'red')]) },
    skipped: 'NotALauncherPod',
  },
  {
    name: 'persistent secondary network: its element gets the claim reference',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'red')]) }), vmi: vmi([multus('red', 'red')]) },
    expect: { [NETWORKS]: [el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })] },
  },
  {
    name: 'only the persistent element changes; the others keep every field',
    input: {
      pod: pod({ [NETWORKS]: json([el('blue', 'blue', { mac: '02:00:00:00:00:02' }), el('red', 'red', { mac: '02:00:00:00:00:01', ips: ['10.10.0.5/16'] })]) }),
      vmi: vmi([multus('blue', 'blue'), multus('red', 'red')]),
    },
    expect: {
      [NETWORKS]: [
        el('blue', 'blue', { mac: '02:00:00:00:00:02' }),
        el('red', 'red', { mac: '02:00:00:00:00:01', ips: ['10.10.0.5/16'], 'ipam-claim-reference': 'vm1.red' }),
      ],
    },
  },
  {
    name: 'non-persistent network only: no patch',
    input: { pod: pod({ [NETWORKS]: json([el('blue', 'blue')]) }), vmi: vmi([multus('blue', 'blue')]) },
  },
  {
    name: 'NAD opted in by annotation',
    input: { pod: pod({ [NETWORKS]: json([el('bridge', 'br0')]) }), vmi: vmi([multus('br0', 'bridge')]) },
    expect: { [NETWORKS]: [el('bridge', 'br0', { 'ipam-claim-reference': 'vm1.br0' })] },
  },
  {
    name: 'element already referencing its claim: no patch (idempotent, reinvocation)',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })]) }), vmi: vmi([multus('red', 'red')]) },
  },
  {
    name: 'element referencing another claim at CREATE: refused (ForeignClaimReference), never admitted with it',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'red', { 'ipam-claim-reference': 'someone-else' })]) }), vmi: vmi([multus('red', 'red')]) },
    denials: ['red'],
  },
  {
    name: 'legacy list form: converted to JSON with the reference on the persistent element only',
    input: { pod: pod({ [NETWORKS]: `red@${podInterfaceName('red')}, ${NS}/blue` }), vmi: vmi([multus('red', 'red'), multus('blue', 'blue')]) },
    expect: {
      [NETWORKS]: [
        { name: 'red', interface: podInterfaceName('red'), 'ipam-claim-reference': 'vm1.red' },
        { name: 'blue', namespace: NS },
      ],
    },
  },
  {
    name: 'legacy list form without persistent networks: left as written',
    input: { pod: pod({ [NETWORKS]: 'blue' }), vmi: vmi([multus('blue', 'blue')]) },
  },
  {
    name: 'element without interface and namespace: matched by NAD in the pod namespace',
    input: { pod: pod({ [NETWORKS]: json([{ name: 'red' }]) }), vmi: vmi([multus('red', 'red')]) },
    expect: { [NETWORKS]: [{ name: 'red', 'ipam-claim-reference': 'vm1.red' }] },
  },
  {
    name: 'two networks on one NAD: each element gets its own claim, told apart by interface',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'b'), el('red', 'a')]) }), vmi: vmi([multus('a', 'red'), multus('b', 'red')]) },
    expect: { [NETWORKS]: [el('red', 'b', { 'ipam-claim-reference': 'vm1.b' }), el('red', 'a', { 'ipam-claim-reference': 'vm1.a' })] },
  },
  {
    name: 'older ordinal interface names (net1, net2) are matched too',
    input: {
      pod: pod({
        [NETWORKS]: json([
          { name: 'blue', namespace: NS, interface: 'net1' },
          { name: 'red', namespace: NS, interface: 'net2' },
        ]),
      }),
      vmi: vmi([{ name: 'default', pod: {} }, multus('blue', 'blue'), multus('red', 'red')]),
    },
    expect: {
      [NETWORKS]: [
        { name: 'blue', namespace: NS, interface: 'net1' },
        { name: 'red', namespace: NS, interface: 'net2', 'ipam-claim-reference': 'vm1.red' },
      ],
    },
  },
  {
    name: 'logical network name that is not a valid object name: the claim name of src/claims',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'Net_A')]) }), vmi: vmi([multus('Net_A', 'red')]) },
    expect: { [NETWORKS]: [el('red', 'Net_A', { 'ipam-claim-reference': claimName(VM, 'Net_A') })] },
  },
  {
    name: 'element of a network the VMI does not have (stale VMI?): left alone, reported, stale suspected',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'red'), el('red', 'hotplugged')]) }), vmi: vmi([multus('red', 'red')]) },
    expect: { [NETWORKS]: [el('red', 'red', { 'ipam-claim-reference': 'vm1.red' }), el('red', 'hotplugged')] },
    reports: ['UnknownNetworkElement'],
    stale: true,
  },
  {
    name: 'cross-namespace persistent NAD: no reference, reported',
    input: {
      pod: pod({ [NETWORKS]: json([{ name: 'red', namespace: 'other', interface: podInterfaceName('red') }]) }),
      vmi: vmi([multus('red', 'other/red')]),
    },
    reports: ['PersistenceBlocked'],
  },
  {
    name: 'layer3 persistent NAD: no reference, reported',
    input: { pod: pod({ [NETWORKS]: json([el('l3', 'l3')]) }), vmi: vmi([multus('l3', 'l3')]) },
    reports: ['PersistenceBlocked'],
  },
  {
    name: 'NAD missing: no reference, reported',
    input: { pod: pod({ [NETWORKS]: json([el('gone', 'gone')]) }), vmi: vmi([multus('gone', 'gone')]) },
    reports: ['PersistenceBlocked'],
  },
  {
    name: 'interface being hot-unplugged (state: absent): no reference',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'red')]) }), vmi: vmi([multus('red', 'red')], [{ name: 'red', bridge: {}, state: 'absent' }]) },
  },
  {
    name: 'Multus default network (default: true) is not a secondary network: untouched',
    input: { pod: pod({ [DEFAULT_NET]: `${NS}/red` }), vmi: vmi([multus('main', 'red', { default: true })]) },
  },
  {
    name: 'garbage networks annotation: pod left alone, reported',
    input: { pod: pod({ [NETWORKS]: '[{"name":"red"' }), vmi: vmi([multus('red', 'red')]) },
    skipped: 'UnreadableAnnotation',
    reports: ['InvalidNetworksAnnotation'],
  },
  {
    name: 'networks annotation that is a JSON object: pod left alone, reported',
    input: { pod: pod({ [NETWORKS]: '{"name":"red"}' }), vmi: vmi([multus('red', 'red')]) },
    skipped: 'UnreadableAnnotation',
    reports: ['InvalidNetworksAnnotation'],
  },
  {
    name: 'persistent network without an element in the pod: reported',
    input: { pod: pod({ [NETWORKS]: '[]' }), vmi: vmi([multus('red', 'red')]) },
    reports: ['MissingNetworkElement'],
  },
  {
    name: 'primary UDN: the legacy OVN annotation names the claim; no default-network element without IP/MAC requests',
    input: { pod: pod({}), vmi: vmi([{ name: 'default', pod: {} }]), nads: nadMap(...NADS, PRIMARY) },
    expect: { [LEGACY]: 'vm1.default' },
  },
  {
    name: 'primary UDN and a secondary network together',
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red')]) }),
      vmi: vmi([{ name: 'pod-net', pod: {} }, multus('red', 'red')]),
      nads: nadMap(...NADS, PRIMARY),
      clusterDefaultNetwork: { namespace: 'openshift-ovn-kubernetes', name: 'default' },
    },
    expect: {
      [NETWORKS]: [el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })],
      [LEGACY]: 'vm1.pod-net',
    },
  },
  {
    name: "primary UDN with IP and MAC requests: a default-network element on --default-network-nad carries them and the reference; bare addresses get the subnet's prefix",
    input: {
      pod: pod({}),
      vmi: withAnnotations(vmi([{ name: 'default', pod: {} }], [{ name: 'default', masquerade: {}, macAddress: '02:00:00:00:00:01' }]), {
        'network.kubevirt.io/addresses': JSON.stringify({ default: ['10.10.0.7', 'fd00::7/64'] }),
      }),
      nads: nadMap(...NADS, PRIMARY),
      clusterDefaultNetwork: { namespace: 'openshift-ovn-kubernetes', name: 'default' },
    },
    expect: {
      [LEGACY]: 'vm1.default',
      [DEFAULT_NET]: [
        {
          name: 'default',
          namespace: 'openshift-ovn-kubernetes',
          ips: ['10.10.0.7/16', 'fd00::7/64'],
          mac: '02:00:00:00:00:01',
          'ipam-claim-reference': 'vm1.default',
        },
      ],
    },
  },
  {
    name: 'primary UDN with a MAC request only: element with the MAC',
    input: {
      pod: pod({}),
      vmi: vmi([{ name: 'default', pod: {} }], [{ name: 'default', masquerade: {}, macAddress: '02:00:00:00:00:02' }]),
      nads: nadMap(...NADS, PRIMARY),
    },
    expect: {
      [LEGACY]: 'vm1.default',
      [DEFAULT_NET]: [{ name: 'default', namespace: 'ovn-kubernetes', mac: '02:00:00:00:00:02', 'ipam-claim-reference': 'vm1.default' }],
    },
  },
  {
    name: 'primary UDN with an address of a family the network has no subnet for: denied, never started with another address',
    input: {
      pod: pod({}),
      vmi: withAnnotations(vmi([{ name: 'default', pod: {} }]), { 'network.kubevirt.io/addresses': JSON.stringify({ default: ['fd00::9'] }) }),
      nads: nadMap(...NADS, PRIMARY),
    },
    denials: ['default'],
  },
  {
    name: 'primary UDN with an existing default-network element: kept, reference added',
    input: { pod: pod({ [DEFAULT_NET]: 'custom-ns/custom-default' }), vmi: vmi([{ name: 'default', pod: {} }]), nads: nadMap(...NADS, PRIMARY) },
    expect: { [LEGACY]: 'vm1.default', [DEFAULT_NET]: [{ name: 'custom-default', namespace: 'custom-ns', 'ipam-claim-reference': 'vm1.default' }] },
  },
  {
    name: 'primary UDN whose annotations already have the reference: no patch',
    input: {
      pod: pod({ [LEGACY]: 'vm1.default', [DEFAULT_NET]: json([{ name: 'default', namespace: 'ovn-kubernetes', 'ipam-claim-reference': 'vm1.default' }]) }),
      vmi: vmi([{ name: 'default', pod: {} }]),
      nads: nadMap(...NADS, PRIMARY),
    },
  },
  {
    name: 'primary UDN whose legacy annotation names another claim: refused (ForeignClaimReference)',
    input: { pod: pod({ [LEGACY]: 'someone-else' }), vmi: vmi([{ name: 'default', pod: {} }]), nads: nadMap(...NADS, PRIMARY) },
    denials: ['default'],
  },
  {
    // virt-controller copies the VMI's annotations to the pod: a template annotation reaches it unchecked by anyone else.
    name: 'no persistent pod network, but the pod names a claim for it anyway (legacy annotation, default-network element): refused',
    input: {
      pod: pod({
        [NETWORKS]: json([el('blue', 'blue')]),
        [LEGACY]: 'victim.default',
        [DEFAULT_NET]: json([{ name: 'default', namespace: 'ovn-kubernetes', 'ipam-claim-reference': 'victim.default' }]),
      }),
      vmi: vmi([multus('blue', 'blue')]),
    },
    denials: [DEFAULT_NET, LEGACY],
  },
  {
    name: 'a pod network that is not persistent, and a claim named for it: refused',
    input: { pod: pod({ [LEGACY]: 'victim.default' }), vmi: vmi([{ name: 'default', pod: {} }]) },
    denials: [LEGACY],
  },
  {
    name: 'primary UDN whose default-network element names the right claim but the legacy annotation another: refused',
    input: {
      pod: pod({ [LEGACY]: 'someone-else', [DEFAULT_NET]: json([{ name: 'default', namespace: 'ovn-kubernetes', 'ipam-claim-reference': 'vm1.default' }]) }),
      vmi: vmi([{ name: 'default', pod: {} }]),
      nads: nadMap(...NADS, PRIMARY),
    },
    denials: ['default'],
  },
  {
    name: 'primary UDN with a garbage default-network annotation: pod left alone, reported',
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red')]), [DEFAULT_NET]: '[[' }),
      vmi: vmi([{ name: 'default', pod: {} }, multus('red', 'red')]),
      nads: nadMap(...NADS, PRIMARY),
    },
    skipped: 'UnreadableAnnotation',
    reports: ['InvalidDefaultNetworkAnnotation'],
  },
  {
    name: 'primary UDN on UPDATE (in-place hotplug of red): the hotplugged element gets its reference; the default network of a running pod is not touched',
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red')]) }),
      vmi: vmi([{ name: 'default', pod: {} }, multus('red', 'red')]),
      nads: nadMap(...NADS, PRIMARY),
      operation: 'UPDATE',
      fresh: new Set([0]),
    },
    expect: { [NETWORKS]: [el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })] },
  },
  {
    name: 'pod network without a primary UDN (cluster default network): untouched',
    input: { pod: pod({}), vmi: vmi([{ name: 'default', pod: {} }]) },
  },
  {
    name: 'primary NAD that does not allow persistent IPs: untouched',
    input: { pod: pod({}), vmi: vmi([{ name: 'default', pod: {} }]), nads: nadMap(nad('primary-udn', ovn('p', { role: 'primary' }))) },
  },
  {
    name: "allocator network: the element gets the claim's addresses as ips, with the reference",
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red'), el('blue', 'blue')]) }),
      vmi: vmi([multus('red', 'red'), multus('blue', 'blue')]),
      addresses: new Map([['red', { ips: ['10.10.0.5/16', 'fd00::5/64'] }]]),
    },
    expect: { [NETWORKS]: [el('red', 'red', { ips: ['10.10.0.5/16', 'fd00::5/64'], 'ipam-claim-reference': 'vm1.red' }), el('blue', 'blue')] },
  },
  {
    name: 'allocator network whose element already references its claim: ips added all the same',
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })]) }),
      vmi: vmi([multus('red', 'red')]),
      addresses: new Map([['red', { ips: ['10.10.0.5/16'] }]]),
    },
    expect: { [NETWORKS]: [el('red', 'red', { 'ipam-claim-reference': 'vm1.red', ips: ['10.10.0.5/16'] })] },
  },
  {
    name: "allocator network whose element already has the claim's ips: no patch",
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red', { ips: ['10.10.0.5/16'], 'ipam-claim-reference': 'vm1.red' })]) }),
      vmi: vmi([multus('red', 'red')]),
      addresses: new Map([['red', { ips: ['10.10.0.5/16'] }]]),
    },
  },
  {
    name: "allocator network whose element asks for other addresses than the claim's: denied",
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red', { ips: ['10.10.0.9/16'] })]) }),
      vmi: vmi([multus('red', 'red')]),
      addresses: new Map([['red', { ips: ['10.10.0.5/16'] }]]),
    },
    expect: { [NETWORKS]: [el('red', 'red', { ips: ['10.10.0.9/16'], 'ipam-claim-reference': 'vm1.red' })] },
    denials: ['red'],
  },
  {
    name: 'allocator network whose claim has no address yet: denied with the reason',
    input: { pod: pod({ [NETWORKS]: json([el('red', 'red')]) }), vmi: vmi([multus('red', 'red')]), addresses: new Map([['red', { deny: 'no address yet' }]]) },
    expect: { [NETWORKS]: [el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })] },
    denials: ['red'],
  },
  {
    name: 'allocator addresses are not applied on UPDATE (a running pod keeps what it has)',
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red')]) }),
      vmi: vmi([multus('red', 'red')]),
      operation: 'UPDATE',
      fresh: new Set([0]),
      addresses: new Map([['red', { deny: 'no address yet' }]]),
    },
    expect: { [NETWORKS]: [el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })] },
  },
  {
    name: 'a binding plugin element (cni-args.logicNetworkName, no interface) is left alone, silently, not taken for a stale VMI',
    input: {
      pod: pod({ [NETWORKS]: json([el('red', 'red'), { name: 'passt-binding', namespace: 'default', 'cni-args': { logicNetworkName: 'default' } }]) }),
      vmi: vmi(
        [{ name: 'default', pod: {} }, multus('red', 'red')],
        [
          { name: 'default', binding: { name: 'passt' } },
          { name: 'red', bridge: {} },
        ],
      ),
    },
    expect: {
      [NETWORKS]: [
        el('red', 'red', { 'ipam-claim-reference': 'vm1.red' }),
        { name: 'passt-binding', namespace: 'default', 'cni-args': { logicNetworkName: 'default' } },
      ],
    },
  },
  {
    name: 'an element with cni-args but an interface is a network element like any other (unknown: stale VMI suspected)',
    input: {
      pod: pod({ [NETWORKS]: json([{ name: 'red', namespace: NS, interface: 'podffffffffff', 'cni-args': { logicNetworkName: 'x' } }]) }),
      vmi: vmi([multus('red', 'red')]),
    },
    reports: ['UnknownNetworkElement', 'MissingNetworkElement'],
    stale: true,
  },
  {
    name: 'pod without any annotation and a primary UDN: the annotations map is created',
    input: { pod: pod(undefined), vmi: vmi([{ name: 'default', pod: {} }]), nads: nadMap(PRIMARY) },
    expect: { [LEGACY]: 'vm1.default' },
  },
];

/** The claims the controller would have made for the row's VMI: each persistent network's, owned by the VMI. */
function ownClaims(input: Row['input']): Map<string, IPAMClaim> {
  const owner = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: VM, uid: 'vmi-uid', controller: true };
  const verdicts = persistentNetworks({ namespace: NS, name: VM }, input.vmi.spec, input.nads ?? nadMap(...NADS));
  return new Map(
    verdicts.flatMap(({ claim: name, claimSpec: spec }) =>
      spec ? [[name, claim({ name, owners: [owner], network: spec.network, iface: spec.interface })]] : [],
    ),
  );
}

/** The mutation at CREATE with the NADs above and (unless given) the claims the controller made. */
function mutate(input: Row['input']) {
  return mutateLauncherPod({ namespace: NS, operation: 'CREATE', nads: nadMap(...NADS), claims: ownClaims(input), ...input });
}
const run = (row: Row) => mutate(row.input);
/** The claims the references added point at. */
const claimsOf = (result: { references: { claim: string }[] }) => result.references.map((r) => r.claim);
/** Each denial as [claim, reason]. */
const refused = (result: { denials: { claim?: string; reason?: string }[] }) => result.denials.map((d) => [d.claim, d.reason]);

describe('mutateLauncherPod', () => {
  it("a reference someone else wrote: refused at CREATE and on a fresh UPDATE element as ForeignClaimReference naming both claims; a running pod's element is not decided", () => {
    const input = { pod: pod({ [NETWORKS]: json([el('red', 'red', { 'ipam-claim-reference': 'a.b.c' })]) }), vmi: vmi([multus('red', 'red')]) };
    const created = mutate(input);
    assert.deepEqual(refused(created), [['vm1.red', 'ForeignClaimReference']]);
    assert.match(created.denials[0]!.message, /a\.b\.c.*vm1\.red/);
    assert.deepEqual(created.patch, []);
    const update = (fresh: number[]) => mutate({ ...input, operation: 'UPDATE', fresh: new Set(fresh) });
    assert.deepEqual(refused(update([0])), [['vm1.red', 'ForeignClaimReference']]);
    assert.deepEqual(update([]).denials, []);
    assert.deepEqual(update([]).patch, []);
  });

  it("a reference on an element of no persistent network, or of no network of the VMI: refused (nothing shows the claim is this VM's)", () => {
    for (const element of [el('blue', 'blue', { 'ipam-claim-reference': 'vm2.red' }), el('red', 'green', { 'ipam-claim-reference': 'vm2.red' })]) {
      const result = mutate({ pod: pod({ [NETWORKS]: json([element]) }), vmi: vmi([multus('red', 'red'), multus('blue', 'blue')]) });
      assert.deepEqual(refused(result), [['vm2.red', 'ForeignClaimReference']], JSON.stringify(element));
      assert.deepEqual(result.patch, []);
    }
  });

  for (const row of rows) {
    it(row.name, () => {
      const result = run(row);
      assert.equal(result.skipped, row.skipped);
      assert.deepEqual(
        result.reports.map((r) => r.reason),
        row.reports ?? [],
      );
      assert.equal(result.staleVmiSuspected, row.stale ?? false);
      assert.deepEqual(
        result.denials.map((d) => d.network),
        row.denials ?? [],
      );
      if (!row.expect) {
        assert.deepEqual(result.patch, []);
        return;
      }
      assert.notDeepEqual(result.patch, []);
      const patched = applyJsonPatch(row.input.pod, result.patch);
      const before = row.input.pod.metadata.annotations ?? {};
      const after = patched.metadata.annotations ?? {};
      for (const [key, value] of Object.entries(after)) {
        if (key in row.expect) assert.deepEqual(typeof row.expect[key] === 'string' ? value : JSON.parse(value), row.expect[key], key);
        else assert.equal(value, before[key], `annotation ${key} must not change`);
      }
      for (const key of Object.keys(row.expect)) assert.ok(key in after, `${key} missing`);
      // Nothing else of the pod changes.
      assert.deepEqual(
        { ...patched, metadata: { ...patched.metadata, annotations: undefined } },
        { ...row.input.pod, metadata: { ...row.input.pod.metadata, annotations: undefined } },
      );
      // Idempotent: the patched pod needs no further patch.
      assert.deepEqual(run({ ...row, input: { ...row.input, pod: patched } }).patch, []);
    });
  }

  it('escapes the annotation key in the patch path', () => {
    const result = run(rows.find((r) => r.name.startsWith('persistent secondary'))!);
    assert.deepEqual(
      result.patch.map((op) => [op.op, op.path]),
      [['replace', '/metadata/annotations/k8s.v1.cni.cncf.io~1networks']],
    );
    assert.deepEqual(result.references, [{ annotation: NETWORKS, network: 'red', claim: 'vm1.red' }]);
  });
});

describe('mutateLauncherPod: a reference only to a claim of this VM (by uid) that is not being deleted', () => {
  const input = { pod: pod({ [NETWORKS]: json([el('red', 'red'), el('blue', 'blue')]) }), vmi: vmi([multus('red', 'red'), multus('blue', 'blue')]) };
  const ours = ownClaims(input).get('vm1.red')!;
  const withClaim = (claim: IPAMClaim | undefined, operation = 'CREATE', fresh?: number[]) =>
    mutate({ ...input, operation, claims: new Map(claim ? [['vm1.red', claim]] : []), ...(fresh ? { fresh: new Set(fresh) } : {}) });
  /** Each denial as [network, claim, reason]. */
  const denied = (result: ReturnType<typeof mutate>) => result.denials.map((d) => [d.network, d.claim, d.reason]);
  const owned = (uid: string, name = VM) => ({
    ...ours,
    metadata: { ...ours.metadata, ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name, uid, controller: true }] },
  });

  const cases: { name: string; claim: IPAMClaim | undefined; reason: string }[] = [
    { name: 'missing', claim: undefined, reason: 'ClaimNotFound' },
    { name: 'an earlier VM of the same name', claim: owned('old-vm-uid'), reason: 'ClaimOwnedByAnotherObject' },
    {
      name: 'an earlier VM, being deleted',
      claim: { ...owned('old-vm-uid'), metadata: { ...owned('old-vm-uid').metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } },
      reason: 'ClaimOwnedByAnotherObject',
    },
    { name: 'no owner', claim: { ...ours, metadata: { ...ours.metadata, ownerReferences: [] } }, reason: 'ClaimNotOwned' },
    { name: 'ours, being deleted', claim: { ...ours, metadata: { ...ours.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } }, reason: 'ClaimTerminating' },
    { name: 'ours, for another network', claim: { ...ours, spec: { ...ours.spec, network: 'old-network' } }, reason: 'ClaimNetworkMismatch' },
  ];
  for (const c of cases) {
    it(`${c.name}: CREATE denied (${c.reason}), naming the claim; no reference written`, () => {
      const result = withClaim(c.claim);
      assert.deepEqual(denied(result), [['red', 'vm1.red', c.reason]]);
      assert.match(result.denials[0]!.message, /vm1\.red/);
      assert.deepEqual(result.references, []);
    });
    it(`${c.name}: UPDATE with red new at this update: denied as at CREATE; with red an element of the running pod: not decided`, () => {
      assert.deepEqual(denied(withClaim(c.claim, 'UPDATE', [0])), [['red', 'vm1.red', c.reason]]);
      const running = withClaim(c.claim, 'UPDATE');
      assert.deepEqual(running.denials, []);
      assert.deepEqual(running.patch, []);
      assert.deepEqual(running.reports, []);
    });
  }

  it("owned by the VMI's controlling VM: referenced", () => {
    const vmiOfVm = {
      ...input.vmi,
      metadata: {
        ...input.vmi.metadata,
        ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: VM, uid: 'vm-uid', controller: true }],
      },
    };
    const result = mutate({ pod: input.pod, vmi: vmiOfVm, claims: new Map([['vm1.red', owned('vm-uid')]]) });
    assert.deepEqual(result.denials, []);
    assert.deepEqual(claimsOf(result), ['vm1.red']);
  });

  it("dotted-name collision: `vm1.red` is another VM's (VM `vm1` with network `red` vs a VM `vm1.x`...): this VM is pointed at its own collision-named claim, never at the other's", () => {
    const other = owned('uid-other', 'vm');
    const alt = collisionClaimName(VM, 'red');
    const denied = withClaim(other);
    assert.deepEqual(refused(denied), [[alt, 'ClaimNotFound']], 'until its own claim exists');
    const own = { ...ours, metadata: { ...ours.metadata, name: alt } };
    const result = mutate({
      ...input,
      claims: new Map<string, IPAMClaim>([
        ['vm1.red', other],
        [alt, own],
      ]),
    });
    assert.deepEqual(result.denials, []);
    assert.deepEqual(claimsOf(result), [alt]);
  });

  it('an element that already names the claim is checked as well (a reference someone else wrote is not trusted)', () => {
    const pre = pod({ [NETWORKS]: json([el('red', 'red', { 'ipam-claim-reference': 'vm1.red' })]) });
    const result = mutate({ pod: pre, vmi: input.vmi, claims: new Map([['vm1.red', owned('old-vm-uid')]]) });
    assert.deepEqual(
      result.denials.map((d) => d.reason),
      ['ClaimOwnedByAnotherObject'],
    );
  });

  it('primary UDN: the default-network element is only written for a claim of this VM', () => {
    const primaryVmi = vmi([{ name: 'default', pod: {} }]);
    const base = { namespace: NS, operation: 'CREATE', nads: nadMap(PRIMARY), pod: pod({}), vmi: primaryVmi };
    const good = ownClaims({ pod: base.pod, vmi: primaryVmi, nads: nadMap(PRIMARY) });
    assert.deepEqual(claimsOf(mutateLauncherPod({ ...base, claims: good })), ['vm1.default']);
    const denied = mutateLauncherPod({ ...base, claims: new Map() });
    assert.deepEqual(refused(denied), [['vm1.default', 'ClaimNotFound']]);
    assert.deepEqual(denied.patch, []);
  });
});

describe('mayNeedReferences', () => {
  const cases: { name: string; pod: Pod; nads: Map<string, NetworkAttachmentDefinition>; expect: boolean }[] = [
    { name: 'only ordinary networks', pod: pod({ [NETWORKS]: json([el('blue', 'blue')]) }), nads: nadMap(...NADS), expect: false },
    { name: 'no networks annotation, no primary network', pod: pod({}), nads: nadMap(...NADS), expect: false },
    { name: 'a persistent NAD', pod: pod({ [NETWORKS]: json([el('blue', 'blue'), el('red', 'red')]) }), nads: nadMap(...NADS), expect: true },
    { name: 'a NAD not known yet', pod: pod({ [NETWORKS]: 'unknown' }), nads: nadMap(...NADS), expect: true },
    { name: 'a persistent primary network in the namespace', pod: pod({}), nads: nadMap(...NADS, PRIMARY), expect: true },
    { name: 'an unreadable annotation', pod: pod({ [NETWORKS]: '[' }), nads: nadMap(...NADS), expect: true },
    {
      name: 'a binding plugin element whose NAD is not known (another namespace): no VMI lookup for it',
      pod: pod({ [NETWORKS]: json([el('blue', 'blue'), { name: 'passt-binding', namespace: 'default', 'cni-args': { logicNetworkName: 'default' } }]) }),
      nads: nadMap(...NADS),
      expect: false,
    },
  ];
  for (const row of cases) it(row.name, () => assert.equal(mayNeedReferences(row.pod, NS, row.nads), row.expect));
});
