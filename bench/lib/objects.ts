// The objects the benchmark creates: namespaces, two persistent NADs per namespace, the KubeVirt CR with the
// PersistentIPs gate, VMs with two persistent networks (plus the pod network), their VMIs (what virt-controller
// would make: the VM template, the VM as controller owner, same name), and IPAMClaims shaped exactly like the
// controller's (for the limit client).
import { CLAIM_FINALIZER, claimName, podInterfaceName, VM_LABEL } from '../../src/claims/index.ts';
import { buildVM, renderVmiFromVm, type Vm, type Vmi } from '../../e2e/kubevirt/launcher-fixture.ts';
import { paths } from '../../e2e/suite/kube.ts';
import type { IPAMClaim } from '../../src/kube/types.ts';
import type { KubeHttp } from '../../e2e/harness/kubehttp.ts';

export const NETWORKS = ['net-a', 'net-b'] as const;

/** The network name (NAD config `name`) of a NAD of the benchmark: what a claim's spec.network says. */
export const cniNetworkName = (namespace: string, nad: string): string => `${namespace}-${nad}`;

export function nadBody(namespace: string, name: string, index: number): unknown {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace },
    spec: {
      config: JSON.stringify({
        cniVersion: '1.0.0',
        name: cniNetworkName(namespace, name),
        type: 'ovn-k8s-cni-overlay',
        topology: 'layer2',
        subnets: `10.${100 + index}.0.0/16`,
        allowPersistentIPs: true,
        netAttachDefName: `${namespace}/${name}`,
      }),
    },
  };
}

/** A namespace with the two persistent NADs. */
export async function createNamespace(kube: KubeHttp, namespace: string, withNads = true): Promise<void> {
  await kube.json('POST', paths.namespaces(), [201, 409], { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  if (!withNads) return;
  for (const [i, nad] of NETWORKS.entries()) await kube.json('POST', paths.nads(namespace), [201, 409], nadBody(namespace, nad, i));
}

/**
 * kubevirt/kubevirt with the PersistentIPs gate (the controller reads it, as in a cluster), and the controller's own
 * namespace for its Lease and webhook Secret.
 */
export async function createKubeVirtCR(kube: KubeHttp, controllerNamespace = 'persistent-ips-system'): Promise<void> {
  for (const name of [controllerNamespace, 'kubevirt'])
    await kube.json('POST', paths.namespaces(), [201, 409], { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  await kube.json('POST', paths.kubeVirts('kubevirt'), [201, 409], {
    apiVersion: 'kubevirt.io/v1',
    kind: 'KubeVirt',
    metadata: { name: 'kubevirt', namespace: 'kubevirt' },
    spec: { configuration: { developerConfiguration: { featureGates: ['PersistentIPs'] } } },
  });
}

export const vmName = (prefix: string, i: number): string => `${prefix}-${String(i).padStart(5, '0')}`;

export async function createVm(kube: KubeHttp, namespace: string, name: string): Promise<Vm> {
  return kube.json<Vm>('POST', paths.vms(namespace), [201], buildVM({ namespace, name, networks: NETWORKS.map((n) => ({ name: n, nadName: n })) }));
}

export async function createVmi(kube: KubeHttp, vm: Vm): Promise<Vmi> {
  return kube.json<Vmi>('POST', paths.vmis(vm.metadata.namespace!), [201], renderVmiFromVm(vm));
}

/** A VM and its VMI. */
export async function createVmWithVmi(kube: KubeHttp, namespace: string, name: string): Promise<{ vm: Vm; vmi: Vmi }> {
  const vm = await createVm(kube, namespace, name);
  const vmi = await createVmi(kube, vm);
  return { vm, vmi };
}

/** The claims the controller creates for a benchmark VM, byte for byte the shape of src/claims' newClaim(). */
export function claimBodies(namespace: string, vm: { name: string; uid: string }): IPAMClaim[] {
  return NETWORKS.map((net) => ({
    apiVersion: 'k8s.cni.cncf.io/v1alpha1',
    kind: 'IPAMClaim',
    metadata: {
      name: claimName(vm.name, net),
      namespace,
      labels: { [VM_LABEL]: vm.name },
      finalizers: [CLAIM_FINALIZER],
      ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: vm.name, uid: vm.uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: { network: cniNetworkName(namespace, net), interface: podInterfaceName(net) },
  }));
}

/** A status change of the kind virt-handler makes all the time: phase, the launcher pod, the interfaces. */
export function vmiStatusPatch(round: number): unknown {
  return {
    status: {
      phase: 'Running',
      nodeName: 'bench-node-1',
      activePods: { [`00000000-0000-0000-0000-${String(round).padStart(12, '0')}`]: 'bench-node-1' },
      interfaces: NETWORKS.map((net, i) => ({
        name: net,
        podInterfaceName: podInterfaceName(net),
        infoSource: 'domain, guest-agent, multus-status',
        ipAddress: `10.${100 + i}.0.${(round % 250) + 1}`,
        ipAddresses: [`10.${100 + i}.0.${(round % 250) + 1}`],
      })),
      conditions: [{ type: 'Ready', status: 'True', lastProbeTime: null, lastTransitionTime: new Date().toISOString() }],
    },
  };
}
