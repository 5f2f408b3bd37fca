import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { NAD_PERSISTENT_IPS_ANNOTATION, VM_LABEL } from '../claims/constants.ts';
import { sameContent } from './store.ts';
import {
  UntrimmableObjectError,
  trimIPAMClaim,
  trimKubeVirt,
  trimNetworkAttachmentDefinition,
  trimVirtualMachine,
  trimVirtualMachineInstance,
} from './trim.ts';

const managedFields = [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:metadata': {} } }];

const rawVmi = (over: { rv?: string; status?: Record<string, unknown> } = {}): unknown => ({
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachineInstance',
  metadata: {
    name: 'vm1',
    namespace: 'ns1',
    uid: 'vmi-uid',
    resourceVersion: over.rv ?? '100',
    generation: 3,
    creationTimestamp: '2026-01-01T00:00:00Z',
    labels: { 'kubevirt.io/nodeName': 'n1', 'vm.kubevirt.io/name': 'vm1' },
    annotations: { 'kubevirt.io/latest-observed-api-version': 'v1', 'kubectl.kubernetes.io/last-applied-configuration': '{...}' },
    finalizers: ['kubevirt.io/virtualMachineControllerFinalize', 'foregroundDeleteVirtualMachine'],
    ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm1', uid: 'vm-uid', controller: true, blockOwnerDeletion: true }],
    managedFields,
  },
  spec: {
    domain: {
      cpu: { cores: 2 },
      resources: { requests: { memory: '1Gi' } },
      devices: {
        disks: [{ name: 'root', disk: { bus: 'virtio' } }],
        interfaces: [
          { name: 'default', masquerade: {} },
          { name: 'net_a', bridge: {}, macAddress: '02:00:00:00:00:01', ports: [{ port: 80 }] },
          { name: 'gone', bridge: {}, state: 'absent' },
        ],
      },
    },
    networks: [
      { name: 'default', pod: {} },
      { name: 'net_a', multus: { networkName: 'ns2/nad-a' } },
      { name: 'gone', multus: { networkName: 'nad-b', default: false } },
    ],
    volumes: [{ name: 'root', containerDisk: { image: 'x' } }],
  },
  status: {
    phase: 'Running',
    activePods: { 'pod-uid-1': 'node1' },
    interfaces: [{ name: 'net_a', ipAddress: '10.0.0.5' }],
    migrationState: { targetPod: 'p2' },
    conditions: [{ type: 'Ready', status: 'True', lastProbeTime: null }],
    guestOSInfo: { id: 'fedora' },
    ...over.status,
  },
});

describe('trim', () => {
  it('keeps of a VMI only what the controller reads', () => {
    assert.deepEqual(trimVirtualMachineInstance(rawVmi()), {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: {
        name: 'vm1',
        namespace: 'ns1',
        uid: 'vmi-uid',
        resourceVersion: '100',
        creationTimestamp: '2026-01-01T00:00:00Z',
        finalizers: ['kubevirt.io/virtualMachineControllerFinalize', 'foregroundDeleteVirtualMachine'],
        ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm1', uid: 'vm-uid', controller: true, blockOwnerDeletion: true }],
      },
      spec: {
        networks: [
          { name: 'default', pod: {} },
          { name: 'net_a', multus: { networkName: 'ns2/nad-a' } },
          { name: 'gone', multus: { networkName: 'nad-b', default: false } },
        ],
        domain: {
          devices: {
            interfaces: [
              { name: 'default', masquerade: {} },
              { name: 'net_a', bridge: {}, macAddress: '02:00:00:00:00:01' },
              { name: 'gone', bridge: {}, state: 'absent' },
            ],
          },
        },
      },
      status: { phase: 'Running', activePods: { 'pod-uid-1': 'node1' } },
    });
  });

  it('makes VMI status churn other than phase/activePods invisible, but not activePods changes', () => {
    const a = trimVirtualMachineInstance(rawVmi());
    const churn = trimVirtualMachineInstance(
      rawVmi({ rv: '101', status: { interfaces: [{ name: 'net_a', ipAddress: '10.0.0.9' }], guestOSInfo: { id: 'rhel' } } }),
    );
    assert.equal(sameContent(a, churn), true);
    const migrated = trimVirtualMachineInstance(rawVmi({ rv: '102', status: { activePods: { 'pod-uid-1': 'node1', 'pod-uid-2': 'node2' } } }));
    assert.equal(sameContent(a, migrated), false);
  });

  it('keeps a VM’s template networks and interfaces, run strategy and printable status, nothing else', () => {
    const vm = trimVirtualMachine({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: 'vm1', namespace: 'ns1', uid: 'u', labels: { app: 'x' }, annotations: { a: 'b' }, managedFields },
      spec: {
        runStrategy: 'Always',
        dataVolumeTemplates: [{ metadata: { name: 'dv' } }],
        template: {
          metadata: { labels: { 'kubevirt.io/vm': 'vm1' }, annotations: { huge: 'x'.repeat(1000) } },
          spec: {
            networks: [{ name: 'n', multus: { networkName: 'nad' } }],
            domain: { devices: { interfaces: [{ name: 'n', binding: { name: 'l2bridge' } }] } },
          },
        },
      },
      status: { printableStatus: 'Running', ready: true, conditions: [{ type: 'Ready' }], volumeSnapshotStatuses: [] },
    });
    assert.deepEqual(vm, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: 'vm1', namespace: 'ns1', uid: 'u' },
      spec: {
        runStrategy: 'Always',
        template: {
          spec: {
            networks: [{ name: 'n', multus: { networkName: 'nad' } }],
            domain: { devices: { interfaces: [{ name: 'n', binding: { name: 'l2bridge' } }] } },
          },
        },
      },
      status: { printableStatus: 'Running', ready: true },
    });
  });

  it('keeps only the opt-in annotation of a NAD', () => {
    const nad = trimNetworkAttachmentDefinition({
      metadata: {
        name: 'nad',
        namespace: 'ns1',
        annotations: { [NAD_PERSISTENT_IPS_ANNOTATION]: 'true', 'k8s.v1.cni.cncf.io/resourceName': 'x' },
        labels: { a: 'b' },
      },
      spec: { config: '{"cniVersion":"0.3.1","name":"net","allowPersistentIPs":true}' },
    });
    assert.deepEqual(nad, {
      metadata: { name: 'nad', namespace: 'ns1', annotations: { [NAD_PERSISTENT_IPS_ANNOTATION]: 'true' } },
      spec: { config: '{"cniVersion":"0.3.1","name":"net","allowPersistentIPs":true}' },
    });
    assert.equal(trimNetworkAttachmentDefinition({ metadata: { name: 'n', annotations: { other: 'x' } }, spec: {} }).metadata.annotations, undefined);
  });

  it('keeps a claim’s labels, spec and status', () => {
    const claim = trimIPAMClaim({
      apiVersion: 'k8s.cni.cncf.io/v1alpha1',
      kind: 'IPAMClaim',
      metadata: {
        name: 'vm1.net',
        namespace: 'ns1',
        labels: { [VM_LABEL]: 'vm1' },
        finalizers: ['kubevirt.io/persistent-ipam'],
        managedFields,
        creationTimestamp: '2026-01-01T00:00:00Z',
        generation: 2,
      },
      spec: { network: 'net', interface: 'pod16477688c0e' },
      status: {
        ips: ['10.0.0.5/24'],
        ownerPod: { name: 'virt-launcher-vm1-abcde' },
        conditions: [{ type: 'IPsAllocated', status: 'True', reason: 'SuccessfulAllocation', extra: 1 }],
      },
    });
    assert.deepEqual(claim, {
      apiVersion: 'k8s.cni.cncf.io/v1alpha1',
      kind: 'IPAMClaim',
      // The allocator serves claims oldest first and reports the generation it saw: a claim keeps both.
      metadata: {
        name: 'vm1.net',
        namespace: 'ns1',
        labels: { [VM_LABEL]: 'vm1' },
        finalizers: ['kubevirt.io/persistent-ipam'],
        creationTimestamp: '2026-01-01T00:00:00Z',
        generation: 2,
      },
      spec: { network: 'net', interface: 'pod16477688c0e' },
      status: {
        ips: ['10.0.0.5/24'],
        ownerPod: { name: 'virt-launcher-vm1-abcde' },
        conditions: [{ type: 'IPsAllocated', status: 'True', reason: 'SuccessfulAllocation' }],
      },
    });
  });

  it('gives every binding block the one shared empty object, which nothing can change', () => {
    const vmi = trimVirtualMachineInstance(rawVmi());
    const [a, b] = [vmi.spec?.domain?.devices?.interfaces?.[1]?.bridge, trimVirtualMachineInstance(rawVmi()).spec?.domain?.devices?.interfaces?.[2]?.bridge];
    assert.ok(a !== undefined && a === b);
    assert.throws(() => {
      (a as Record<string, unknown>).port = 1;
    }, TypeError);
  });

  it('keeps the KubeVirt CR’s feature gates and ignores its busy status', () => {
    const a = trimKubeVirt({
      metadata: { name: 'kubevirt', namespace: 'kubevirt', resourceVersion: '1' },
      spec: { configuration: { developerConfiguration: { featureGates: ['PersistentIPs', 'LiveMigration'] }, network: {} }, imagePullPolicy: 'Always' },
      status: { phase: 'Deployed', conditions: [] },
    });
    assert.deepEqual(a.spec, { configuration: { developerConfiguration: { featureGates: ['PersistentIPs', 'LiveMigration'] } } });
    const b = trimKubeVirt({
      metadata: { name: 'kubevirt', namespace: 'kubevirt', resourceVersion: '2' },
      spec: { configuration: { developerConfiguration: { featureGates: ['PersistentIPs', 'LiveMigration'] } } },
      status: { phase: 'Deploying' },
    });
    assert.equal(sameContent(a, b), true);
  });

  it('tolerates junk in optional places and refuses objects without a name', () => {
    const vmi = trimVirtualMachineInstance({
      metadata: { name: 'x', ownerReferences: [{ kind: 'VirtualMachine' }], finalizers: [] },
      spec: { networks: [null, { name: 'n', multus: {} }, 3] },
      status: null,
    });
    assert.deepEqual(vmi, { metadata: { name: 'x' }, spec: { networks: [{ name: 'n' }] } });
    assert.throws(() => trimIPAMClaim({ metadata: {} }), UntrimmableObjectError);
    assert.throws(() => trimKubeVirt(null), UntrimmableObjectError);
  });
});
