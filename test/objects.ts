// Test-only builders for the objects decide() reads, and a tiny stand-in for the API server's handling of claim
// writes. Shared by the unit tests here and, later, the e2e suite, so fixtures mean the same thing everywhere.

import type { IPAMClaim, NetworkAttachmentDefinition, OwnerReference, Pod, VirtualMachine, VirtualMachineInstance, VmiSpecLike } from '../src/kube/types.ts';
import type { KubeVirtCR } from '../src/kube/types.ts';
import type { AdmissionReview } from '../src/webhook/admission.ts';
import { apiVersionOf, resources } from '../src/kube/resources.ts';
import { CLAIM_FINALIZER, KUBEVIRT_VM_FINALIZER, NAD_PERSISTENT_IPS_ANNOTATION, VM_LABEL } from '../src/claims/constants.ts';
import type { Plan } from '../src/claims/decide.ts';
import { claimName, podInterfaceName, PRIMARY_POD_INTERFACE } from '../src/claims/names.ts';

export const NS = 'vms';
export const VM_NAME = 'vm1';
export const VM_UID = 'vm-uid-1';
export const VMI_UID = 'vmi-uid-1';
export const DELETED_AT = '2025-01-01T00:00:00Z';

/** One network of a VM/VMI spec with its interface. */
export interface NetSpec {
  name: string;
  /** Multus `networkName` ("name" or "namespace/name"); absent for the pod network. */
  nad?: string;
  default?: boolean;
  absent?: boolean;
}

export const multus = (name: string, nad: string, opts: { absent?: boolean; default?: boolean } = {}): NetSpec => ({
  name,
  nad,
  ...opts,
});
export const podNetwork = (name = 'default'): NetSpec => ({ name });

export function vmiSpec(nets: readonly NetSpec[]): VmiSpecLike {
  return {
    networks: nets.map((net) =>
      net.nad === undefined ? { name: net.name, pod: {} } : { name: net.name, multus: { networkName: net.nad, ...(net.default ? { default: true } : {}) } },
    ),
    domain: {
      devices: {
        interfaces: nets.map((net) => ({
          name: net.name,
          ...(net.nad === undefined ? { masquerade: {} } : { bridge: {} }),
          ...(net.absent ? { state: 'absent' } : {}),
        })),
      },
    },
  };
}

export interface VmOptions {
  name?: string;
  namespace?: string;
  uid?: string;
  networks?: readonly NetSpec[];
  running?: boolean;
  deleting?: boolean;
  /** Extra finalizers besides KubeVirt's (e.g. "foregroundDeletion"). */
  finalizers?: string[];
}

export function virtualMachine(opts: VmOptions = {}): VirtualMachine {
  return {
    apiVersion: apiVersionOf(resources.virtualMachines),
    kind: 'VirtualMachine',
    metadata: {
      name: opts.name ?? VM_NAME,
      namespace: opts.namespace ?? NS,
      uid: opts.uid ?? VM_UID,
      resourceVersion: '1',
      finalizers: [KUBEVIRT_VM_FINALIZER, ...(opts.finalizers ?? [])],
      ...(opts.deleting ? { deletionTimestamp: DELETED_AT } : {}),
    },
    spec: {
      runStrategy: opts.running === false ? 'Halted' : 'Always',
      template: { spec: vmiSpec(opts.networks ?? []) },
    },
  };
}

export interface VmiOptions {
  uid?: string;
  /** Defaults to the VM template's networks. */
  networks?: readonly NetSpec[];
  deleting?: boolean;
  /** pod UID → node; defaults to one running launcher pod. */
  activePods?: Record<string, string>;
  migrating?: boolean;
}

/** The VMI KubeVirt makes for a VM: same name and namespace, controlled by the VM. */
export function vmiOf(vm: VirtualMachine, opts: VmiOptions = {}): VirtualMachineInstance {
  const spec = opts.networks ? vmiSpec(opts.networks) : structuredClone(vm.spec?.template?.spec ?? {});
  const owner = { ...ownerRefTo(vm), apiVersion: apiVersionOf(resources.virtualMachines), kind: 'VirtualMachine' };
  return instance(vm.metadata.name, vm.metadata.namespace ?? NS, spec, [owner], opts);
}

/** A VMI created directly, with no VM. */
export function standaloneVmi(opts: VmiOptions & { name?: string; namespace?: string } = {}): VirtualMachineInstance {
  return instance(opts.name ?? VM_NAME, opts.namespace ?? NS, vmiSpec(opts.networks ?? []), [], opts);
}

function instance(name: string, namespace: string, spec: VmiSpecLike, ownerReferences: OwnerReference[], opts: VmiOptions): VirtualMachineInstance {
  return {
    apiVersion: apiVersionOf(resources.virtualMachineInstances),
    kind: 'VirtualMachineInstance',
    metadata: {
      name,
      namespace,
      uid: opts.uid ?? VMI_UID,
      resourceVersion: '1',
      ownerReferences,
      ...(opts.deleting ? { deletionTimestamp: DELETED_AT } : {}),
    },
    spec,
    status: {
      phase: 'Running',
      activePods: opts.activePods ?? { 'pod-uid-1': 'node-1' },
      ...(opts.migrating ? { migrationState: { targetPod: 'virt-launcher-vm1-target' } } : {}),
    },
  };
}

export interface NadOptions {
  namespace?: string;
  annotations?: Record<string, string>;
}

/** A NAD with `config` as given: an object is serialised, a string kept verbatim, undefined leaves no config. */
export function nad(name: string, config: object | string | undefined, opts: NadOptions = {}): NetworkAttachmentDefinition {
  return {
    apiVersion: apiVersionOf(resources.networkAttachmentDefinitions),
    kind: 'NetworkAttachmentDefinition',
    metadata: {
      name,
      namespace: opts.namespace ?? NS,
      uid: `nad-uid-${name}`,
      resourceVersion: '1',
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
    },
    spec: config === undefined ? {} : { config: typeof config === 'string' ? config : JSON.stringify(config) },
  };
}

export interface OvnNadOptions extends NadOptions {
  /** The config `name`; defaults to "net-<NAD name>". */
  networkName?: string;
  topology?: string;
  subnets?: string | null;
  persistent?: boolean;
  role?: string;
}

/** An OVN-Kubernetes NAD; by default a persistent layer2 secondary network with a subnet. */
export function ovnNad(name: string, opts: OvnNadOptions = {}): NetworkAttachmentDefinition {
  const config: Record<string, unknown> = {
    cniVersion: '1.0.0',
    name: opts.networkName ?? `net-${name}`,
    type: 'ovn-k8s-cni-overlay',
    topology: opts.topology ?? 'layer2',
    netAttachDefName: `${opts.namespace ?? NS}/${name}`,
  };
  if (opts.subnets !== null) config['subnets'] = opts.subnets ?? '10.100.0.0/24';
  if (opts.persistent ?? true) config['allowPersistentIPs'] = true;
  if (opts.role !== undefined) config['role'] = opts.role;
  return nad(name, config, opts);
}

/** A non-OVN NAD (bridge + static IPAM) opted in through the project's annotation. */
export function annotatedBridgeNad(name: string, opts: NadOptions = {}): NetworkAttachmentDefinition {
  return nad(
    name,
    { cniVersion: '0.4.0', name: `net-${name}`, type: 'bridge', bridge: 'br1', ipam: { type: 'static' } },
    { ...opts, annotations: { ...opts.annotations, [NAD_PERSISTENT_IPS_ANNOTATION]: 'true' } },
  );
}

export function nadMap(...nads: NetworkAttachmentDefinition[]): Map<string, NetworkAttachmentDefinition> {
  return new Map(nads.map((n) => [`${n.metadata.namespace ?? NS}/${n.metadata.name}`, n]));
}

export function ownerRefTo(owner: VirtualMachine | VirtualMachineInstance): OwnerReference {
  return {
    apiVersion: owner.apiVersion ?? 'kubevirt.io/v1',
    kind: owner.kind ?? 'VirtualMachine',
    name: owner.metadata.name,
    uid: owner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

export interface ClaimOptions {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  owners?: OwnerReference[];
  finalizers?: string[];
  labels?: Record<string, string>;
  deleting?: boolean;
  network?: string;
  iface?: string;
  ips?: string[];
}

export function claim(opts: ClaimOptions): IPAMClaim {
  return {
    apiVersion: apiVersionOf(resources.ipamClaims),
    kind: 'IPAMClaim',
    metadata: {
      name: opts.name,
      namespace: opts.namespace ?? NS,
      uid: opts.uid ?? `claim-uid-${opts.name}`,
      resourceVersion: opts.resourceVersion ?? '10',
      ...(opts.owners && opts.owners.length > 0 ? { ownerReferences: opts.owners } : {}),
      ...(opts.finalizers && opts.finalizers.length > 0 ? { finalizers: opts.finalizers } : {}),
      ...(opts.labels ? { labels: opts.labels } : {}),
      ...(opts.deleting ? { deletionTimestamp: DELETED_AT } : {}),
    },
    spec: { network: opts.network ?? 'net', interface: opts.iface ?? '' },
    ...(opts.ips ? { status: { ips: opts.ips } } : {}),
  };
}

/** The claim this project makes for `network` of `owner`, as it looks once stored (uid, resourceVersion, IPs). */
export function claimOf(owner: VirtualMachine | VirtualMachineInstance, network: string, opts: Partial<ClaimOptions> & { primary?: boolean } = {}): IPAMClaim {
  const name = claimName(owner.metadata.name, network);
  return claim({
    name,
    namespace: owner.metadata.namespace ?? NS,
    owners: [ownerRefTo(owner)],
    finalizers: [CLAIM_FINALIZER],
    labels: { [VM_LABEL]: owner.metadata.name },
    iface: opts.primary ? PRIMARY_POD_INTERFACE : podInterfaceName(network),
    // The fixture NADs' network names are `net-<NAD name>`; most tests name the VM network after its NAD.
    network: `net-${network}`,
    ips: ['10.100.0.5/24'],
    ...opts,
  });
}

let resourceVersionSerial = 1000;

/**
 * Applies a plan's writes the way the API server would: creates get a uid and resourceVersion; a delete of a claim
 * with finalizers only marks it; removing the last finalizer of a marked claim removes it. Every write's uid and
 * resourceVersion precondition is checked, and a failing one throws, so tests also prove the preconditions right.
 */
export function applyPlan(claims: readonly IPAMClaim[], plan: Plan): IPAMClaim[] {
  const next = (): string => String(++resourceVersionSerial);
  const byName = new Map(claims.map((c) => [c.metadata.name, structuredClone(c)]));
  const guard = (write: { name: string; uid: string; resourceVersion: string }): IPAMClaim => {
    const current = byName.get(write.name);
    if (!current || current.metadata.uid !== write.uid || current.metadata.resourceVersion !== write.resourceVersion) {
      throw new Error(`precondition failed for ${write.name}`);
    }
    return current;
  };
  for (const create of plan.creates) {
    if (byName.has(create.metadata.name)) throw new Error(`${create.metadata.name} already exists`);
    const stored = structuredClone(create);
    stored.metadata.uid = `created-${create.metadata.name}`;
    stored.metadata.resourceVersion = next();
    byName.set(create.metadata.name, stored);
  }
  for (const write of plan.removeFinalizers) {
    const current = guard(write);
    current.metadata.finalizers = (current.metadata.finalizers ?? []).filter((f) => f !== CLAIM_FINALIZER);
    current.metadata.resourceVersion = next();
    if (current.metadata.deletionTimestamp && current.metadata.finalizers.length === 0) byName.delete(write.name);
  }
  for (const write of plan.adopts) {
    const current = guard(write);
    const owners = current.metadata.ownerReferences ?? [];
    if (owners.length > 0 !== write.append) throw new Error(`${write.name} has ${owners.length} owners: an adoption with append ${write.append} is wrong`);
    if ([...owners, write.owner].filter((o) => o.controller === true).length > 1) throw new Error(`${write.name}: more than one controller`);
    current.metadata.ownerReferences = [...owners, write.owner];
    current.metadata.resourceVersion = next();
  }
  for (const write of plan.deletes) {
    const current = guard(write);
    // The reconciler releases a deleted claim from the delete's answer (Plan.deletes).
    current.metadata.finalizers = (current.metadata.finalizers ?? []).filter((f) => f !== CLAIM_FINALIZER);
    if (current.metadata.finalizers.length === 0) {
      byName.delete(write.name);
    } else {
      current.metadata.deletionTimestamp = DELETED_AT;
      current.metadata.resourceVersion = next();
    }
  }
  return [...byName.values()];
}

/** The KubeVirt CR, its developer configuration listing `gates` (none given: no configuration at all). */
export const kubeVirtCR = (gates?: string[]): KubeVirtCR => ({
  metadata: { name: 'kubevirt', namespace: 'kubevirt' },
  spec: gates ? { configuration: { developerConfiguration: { featureGates: gates } } } : {},
});

/** The AdmissionReview the API server sends for a pod in NS; an UPDATE's `oldObject` defaults to the pod itself (no annotation changed). */
export function admissionReview(pod: Pod, operation = 'CREATE', oldObject: Pod | undefined = operation === 'UPDATE' ? pod : undefined): AdmissionReview {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'req-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: NS,
      operation,
      object: pod,
      ...(oldObject ? { oldObject } : {}),
    },
  };
}
