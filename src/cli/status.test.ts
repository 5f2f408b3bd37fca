import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import { buildStatus, gateOf, renderJson, renderTable, stateOf } from './status.ts';
import { nad as worldNad } from '../../test/allocator-world.ts';
import { kubeVirtCR as kubeVirt } from '../../test/objects.ts';

const NS = 'demo';
const nad = (name: string, network: string, annotations: Record<string, string> = {}, extra: Record<string, unknown> = {}) =>
  worldNad(name, network, annotations, extra, NS);
const NADS = [
  nad('bridge-static', 'bridge-static', {
    'persistent-ips.kubevirt.io/allow-persistent-ips': 'true',
    'persistent-ips.kubevirt.io/allocator': 'true',
    'persistent-ips.kubevirt.io/subnets': '192.168.150.0/24',
  }),
  nad('plain', 'plain'),
  nad('ovn', 'tenant', {}, { type: 'ovn-k8s-cni-overlay', topology: 'layer2', subnets: '10.1.0.0/16', allowPersistentIPs: true }),
];

function vm(name: string, nets: [string, string][], status = 'Running'): VirtualMachine {
  return {
    metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: {
      template: {
        spec: {
          networks: [{ name: 'default', pod: {} }, ...nets.map(([n, nadName]) => ({ name: n, multus: { networkName: nadName } }))],
          domain: { devices: { interfaces: [{ name: 'default', masquerade: {} }, ...nets.map(([n]) => ({ name: n, bridge: {} }))] } },
        },
      },
    },
    status: { printableStatus: status },
  };
}

function claim(
  name: string,
  network: string,
  o: { owner?: string; ownerUid?: string; ips?: string[]; cond?: [string, string, string]; ownerPod?: string } = {},
): IPAMClaim {
  return {
    metadata: {
      name,
      namespace: NS,
      ...(o.owner
        ? { ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: o.owner, uid: o.ownerUid ?? `uid-${o.owner}`, controller: true }] }
        : {}),
    },
    spec: { network, interface: 'pod0' },
    status: {
      ips: o.ips ?? [],
      ...(o.cond
        ? { conditions: [{ type: 'IPsAllocated', status: o.cond[0], reason: o.cond[1], message: o.cond[2], lastTransitionTime: '2025-01-01T00:00:00Z' }] }
        : {}),
      ...(o.ownerPod ? { ownerPod: { name: o.ownerPod } } : {}),
    },
  };
}

const input = {
  vms: [
    vm('vm-a', [
      ['data', 'bridge-static'],
      ['mgmt', 'plain'],
      ['tenant', 'ovn'],
    ]),
    vm('vm-b', [['data', 'bridge-static']], 'Stopped'),
  ],
  vmis: [] as VirtualMachineInstance[],
  nads: NADS,
  claims: [
    claim('vm-a.data', 'bridge-static', { owner: 'vm-a', ips: ['192.168.150.2/24'], cond: ['True', 'SuccessfulAllocation', 'allocated 192.168.150.2/24'] }),
    claim('vm-a.tenant', 'tenant', { owner: 'vm-a' }),
    claim('vm-b.data', 'bridge-static', { owner: 'vm-b', cond: ['False', 'IPAddressConflict', 'requested 192.168.150.2 is already held by demo/vm-a.data'] }),
    claim('old.data', 'bridge-static', { owner: 'old', ips: ['192.168.150.9/24'] }),
  ],
};

describe('persistent-ips status', () => {
  it('one row per VM network, joined with its claim; unused claims last', () => {
    const rows = buildStatus(input);
    assert.deepEqual(
      rows.map((r) => [r.vm, r.network, r.claim ?? '', r.ips.join(','), stateOf(r), r.owner ?? '']),
      [
        ['vm-a', 'data', 'vm-a.data', '192.168.150.2/24', 'Allocated', 'VirtualMachine vm-a'],
        ['vm-a', 'mgmt', '', '', 'not persistent', ''],
        ['vm-a', 'tenant', 'vm-a.tenant', '', 'Waiting for the IPAM plugin', 'VirtualMachine vm-a'],
        ['vm-b', 'data', 'vm-b.data', '', 'NotAllocated: IPAddressConflict', 'VirtualMachine vm-b'],
        ['', '', 'old.data', '192.168.150.9/24', 'ClaimNotInUse', 'VirtualMachine old'],
      ],
    );
    assert.equal(rows[0]!.allocator, true);
    assert.equal(rows[2]!.allocator, false);
  });

  it('an OVN-Kubernetes NAD with the allocator switch is not shown as served by the allocator (it refuses such NADs)', () => {
    const switched = NADS.map((n) =>
      n.metadata.name === 'ovn' ? { ...n, metadata: { ...n.metadata, annotations: { 'persistent-ips.kubevirt.io/allocator': 'true' } } } : n,
    );
    const row = buildStatus({ ...input, nads: switched }).find((r) => r.network === 'tenant')!;
    assert.deepEqual([row.allocator, stateOf(row)], [false, 'Waiting for the IPAM plugin']);
  });

  it('a VM filter, and a claim of another incarnation of the VM', () => {
    const rows = buildStatus(
      { ...input, claims: [claim('vm-a.data', 'bridge-static', { owner: 'vm-a', ownerUid: 'older', ips: ['192.168.150.2/24'] })] },
      { vm: 'vm-a' },
    );
    assert.equal(rows.length, 3);
    assert.equal(rows[0]!.ownerMatches, false);
    assert.equal(rows[0]!.problem?.reason, 'ClaimOwnedByAnotherObject');
  });

  it('the table reads at a glance: aligned columns, the reasons as numbered notes below', () => {
    const text = renderTable(buildStatus(input), { showNamespace: false });
    const lines = text.trimEnd().split('\n');
    assert.match(lines[0]!, /^VM\s+STATUS\s+NETWORK\s+NAD\s+CLAIM\s+ADDRESSES\s+CONDITION\s+OWNER$/);
    assert.match(lines[1]!, /^vm-a\s+Running\s+data\s+bridge-static \(allocator\)\s+vm-a\.data\s+192\.168\.150\.2\/24\s+Allocated\s+VirtualMachine vm-a$/);
    const col = lines[0]!.indexOf('CLAIM');
    for (const line of lines.slice(1, 6)) assert.equal(line[col - 1], ' ', `aligned: ${line}`);
    assert.ok(
      lines.some((l) => /^\[1\] VirtualMachine demo\/vm-a: NetworkAttachmentDefinition demo\/plain does not allow persistent IPs/.test(l)),
      text,
    );
    assert.ok(lines.includes('[2] IPAMClaim demo/vm-b.data: requested 192.168.150.2 is already held by demo/vm-a.data'), text);
    assert.ok(
      lines.some((l) => l.startsWith('[3] IPAMClaim demo/old.data: no network of VirtualMachine old uses this claim')),
      text,
    );
    assert.match(renderTable([], { showNamespace: true }), /No VMs/);
  });

  it('JSON for scripts: every field, messages included', () => {
    const doc = JSON.parse(renderJson(buildStatus(input))) as { kind: string; items: { claim?: string; condition?: { message?: string } }[] };
    assert.equal(doc.kind, 'StatusList');
    assert.equal(doc.items.find((i) => i.claim === 'vm-b.data')?.condition?.message, 'requested 192.168.150.2 is already held by demo/vm-a.data');
  });

  it("the pod the IPAM plugin allocated for (the claim's status.ownerPod, as OVN-Kubernetes writes it) is a field of the JSON", () => {
    const filled = claim('vm-a.tenant', 'tenant', {
      owner: 'vm-a',
      ips: ['10.1.0.5/16'],
      cond: ['True', 'SuccessfulAllocation', 'allocated'],
      ownerPod: 'virt-launcher-vm-a-x7k2p',
    });
    const rows = buildStatus({ ...input, claims: input.claims.map((c) => (c.metadata.name === 'vm-a.tenant' ? filled : c)) });
    const doc = JSON.parse(renderJson(rows)) as { items: { claim?: string; ownerPod?: string }[] };
    assert.equal(doc.items.find((i) => i.claim === 'vm-a.tenant')?.ownerPod, 'virt-launcher-vm-a-x7k2p');
    assert.equal(doc.items.find((i) => i.claim === 'vm-a.data')?.ownerPod, undefined, 'absent when the claim has none');
  });

  const missing = {
    ...input,
    vms: [
      vm('vm-c', [
        ['data', 'bridge-static'],
        ['mgmt', 'plain'],
      ]),
    ],
    claims: [],
  };

  it('a missing claim is blamed on the gate when the gate is off', () => {
    const rows = buildStatus({ ...missing, kubeVirts: [kubeVirt([])] });
    assert.equal(rows[0]!.problem?.reason, 'FeatureGateDisabled');
    assert.equal(stateOf(rows[0]!), 'FeatureGateDisabled');
    assert.match(rows[0]!.problem!.message, /no IPAMClaim vm-c\.data: off \(not listed in the KubeVirt CR/);
    const none = buildStatus({ ...missing, kubeVirts: [] });
    assert.match(none[0]!.problem!.message, /no KubeVirt CR found and no --feature-gates/);
  });

  it('with the gate on (or unknown), a missing claim points at the controller', () => {
    const on = buildStatus({ ...missing, kubeVirts: [kubeVirt(['PersistentIPs'])] });
    assert.equal(on[0]!.problem?.reason, 'ClaimNotCreated');
    assert.doesNotMatch(on[0]!.problem!.message, /could not be read/);
    const unknown = buildStatus({ ...missing, kubeVirts: undefined });
    assert.equal(unknown[0]!.problem?.reason, 'ClaimNotCreated');
    assert.match(unknown[0]!.problem!.message, /KubeVirt CR could not be read/);
  });

  it('an ordinary network says which NAD does not allow persistent IPs', () => {
    const rows = buildStatus({ ...missing, kubeVirts: [kubeVirt(['PersistentIPs'])] });
    assert.equal(rows[1]!.problem?.reason, 'NadNotPersistent');
    assert.equal(stateOf(rows[1]!), 'not persistent');
    assert.match(rows[1]!.problem!.message, /demo\/plain does not allow persistent IPs/);
  });

  it('a claim without an owner is named as such, never as waiting', () => {
    const rows = buildStatus({ ...missing, kubeVirts: [kubeVirt(['PersistentIPs'])], claims: [claim('vm-c.data', 'bridge-static')] });
    assert.equal(rows[0]!.problem?.reason, 'ClaimNotOwned');
  });

  it('the gate heads the table and is a field of the JSON', () => {
    const kubeVirts = [kubeVirt([])];
    const gate = gateOf({ kubeVirts });
    const text = renderTable(buildStatus({ ...missing, kubeVirts }), { showNamespace: false, gate });
    assert.match(text.split('\n')[0]!, /^PersistentIPs feature gate: off \(not listed in the KubeVirt CR/);
    assert.match(renderTable([], { showNamespace: false, gate: undefined }), /^PersistentIPs feature gate: unknown/);
    const doc = JSON.parse(renderJson([], gate)) as { featureGate: unknown };
    assert.deepEqual(doc.featureGate, { name: 'PersistentIPs', enabled: false, source: 'kubevirt-cr' });
  });
});
