// Pure parts of the KubeVirt stand-in (test infrastructure, see standin.ts): names, the objects it renders from a
// VM or VMI, and the decisions it takes on them. No I/O here, so every rule can be unit-tested.
//
// Each rule is written from what KubeVirt documents and does (virt-controller's VM and VMI controllers, the
// launcher pod's network annotations, NIC hotplug); comments say which KubeVirt behaviour a function stands for.
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import {
  DOMAIN_ANNOTATION,
  KUBEVIRT_VM_FINALIZER,
  LAUNCHER_LABEL,
  LAUNCHER_LABEL_VALUE,
  MULTUS_DEFAULT_NETWORK_ANNOTATION,
  MULTUS_NETWORKS_ANNOTATION,
} from '../../src/claims/constants.ts';
import { apiVersionOf, resources } from '../../src/kube/resources.ts';
import type {
  NetworkSelectionElement,
  ObjectMeta,
  OwnerReference,
  VirtualMachine,
  VirtualMachineInstance,
  VmInterface,
  VmNetwork,
  VmiSpecLike,
} from '../../src/kube/types.ts';

// ---------------------------------------------------------------------------------------------------------------
// Names KubeVirt uses.

/** Held on a VM by virt-controller until its VMI is gone; also put on the VMIs it creates (removed once final). */
export const VM_CONTROLLER_FINALIZER = KUBEVIRT_VM_FINALIZER;
/** Held on a VMI until it is final and all its launcher pods are gone (KubeVirt ≥ 1.7 name). */
export const VMI_FINALIZER = 'kubevirt.io/foregroundDeleteVirtualMachine';
/** The same finalizer under its name before KubeVirt 1.7; still recognised (and removed) like KubeVirt does. */
export const LEGACY_VMI_FINALIZER = 'foregroundDeleteVirtualMachine';
export const CREATED_BY_LABEL = 'kubevirt.io/created-by';
export const VM_NAME_LABEL = 'vm.kubevirt.io/name';
export const MIGRATION_JOB_LABEL = 'kubevirt.io/migrationJobUID';
export const VM_GENERATION_ANNOTATION = 'kubevirt.io/vm-generation';
export const PRIMARY_POD_INTERFACE = 'eth0';

/** Stand-in bookkeeping on launcher pods (not KubeVirt's): the fake node, and the interfaces the pod was made for. */
export const FAKE_NODE_ANNOTATION = 'kubevirt-standin.test/node';
export const RENDERED_INTERFACES_ANNOTATION = 'kubevirt-standin.test/rendered-interfaces';
export const FAKE_NODES = ['standin-node-1', 'standin-node-2'] as const;

export const VMI_API_VERSION = apiVersionOf(resources.virtualMachineInstances);
export const VM_API_VERSION = apiVersionOf(resources.virtualMachines);

// ---------------------------------------------------------------------------------------------------------------
// Shapes: the shared types, plus the few KubeVirt fields the stand-in writes and the shared types leave out.

export interface MigrationState {
  migrationUid: string;
  startTimestamp?: string;
  endTimestamp?: string;
  sourcePod?: string;
  sourceNode?: string;
  targetPod?: string;
  targetNode?: string;
  completed?: boolean;
  failed?: boolean;
  mode?: string;
  [key: string]: unknown;
}

export interface VmiInterfaceStatus {
  name: string;
  podInterfaceName?: string;
  infoSource?: string;
  [key: string]: unknown;
}

export interface VmiCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastProbeTime?: string | null;
  lastTransitionTime?: string | null;
}

export interface VmiStatus {
  phase?: string;
  activePods?: Record<string, string>;
  nodeName?: string;
  interfaces?: VmiInterfaceStatus[];
  migrationState?: MigrationState;
  conditions?: VmiCondition[];
  [key: string]: unknown;
}

/** A full VMI spec is opaque to the stand-in except for networks and interfaces. */
export type VmiSpec = VmiSpecLike & { domain?: { devices?: { interfaces?: VmInterface[] } & Record<string, unknown> } & Record<string, unknown> } & Record<string, unknown>;

export type Vmi = Omit<VirtualMachineInstance, 'spec' | 'status'> & { spec?: VmiSpec; status?: VmiStatus };

export interface VmStatus {
  printableStatus?: string;
  ready?: boolean;
  created?: boolean;
  [key: string]: unknown;
}

export type Vm = Omit<VirtualMachine, 'spec' | 'status'> & {
  spec?: {
    running?: boolean;
    runStrategy?: string;
    template?: { metadata?: Partial<ObjectMeta>; spec?: VmiSpec };
    [key: string]: unknown;
  };
  status?: VmStatus;
};

export const VMI_PHASES = ['Pending', 'Scheduling', 'Scheduled', 'Running', 'Succeeded', 'Failed', 'Unknown'] as const;

export const isFinalPhase = (phase: string | undefined): boolean => phase === 'Succeeded' || phase === 'Failed';

// ---------------------------------------------------------------------------------------------------------------
// Pod interface names and the networks annotation.

/** KubeVirt's pod interface name for a secondary network: "pod" + the first 11 hex chars of sha256(network name). */
export function podInterfaceName(networkName: string): string {
  return `pod${createHash('sha256').update(networkName, 'utf8').digest('hex').slice(0, 11)}`;
}

export const isMultusSecondary = (net: VmNetwork): boolean => net.multus !== undefined && net.multus.default !== true;
export const isPrimary = (net: VmNetwork): boolean => net.pod !== undefined || net.multus?.default === true;

/** `name` or `namespace/name` of a NAD, the namespace defaulting to the VMI's (KubeVirt's rule). */
export function nadNamespacedName(vmiNamespace: string, networkName: string): { namespace: string; name: string } {
  const slash = networkName.indexOf('/');
  if (slash < 0) return { namespace: vmiNamespace, name: networkName };
  return { namespace: networkName.slice(0, slash), name: networkName.slice(slash + 1) };
}

function specInterfaces(spec: VmiSpecLike | undefined): VmInterface[] {
  return spec?.domain?.devices?.interfaces ?? [];
}

/**
 * The networks a launcher pod is made with: KubeVirt drops interfaces marked `state: absent` and every network
 * that is left without an interface of the same name.
 */
export function nonAbsentNetworks(spec: VmiSpecLike | undefined): { networks: VmNetwork[]; interfaces: VmInterface[] } {
  const interfaces = specInterfaces(spec).filter((i) => i.state !== 'absent');
  const names = new Set(interfaces.map((i) => i.name));
  return { networks: (spec?.networks ?? []).filter((n) => names.has(n.name)), interfaces };
}

/**
 * The elements of `k8s.v1.cni.cncf.io/networks` KubeVirt writes on a launcher pod: one per Multus secondary network
 * (not `default`) that has a non-absent interface, in the VMI's network order, with `mac` when the interface asks
 * for one. (Network binding plugins' own NADs are not reproduced.)
 */
export function launcherNetworkElements(vmiNamespace: string, spec: VmiSpecLike | undefined): NetworkSelectionElement[] {
  const { networks, interfaces } = nonAbsentNetworks(spec);
  const out: NetworkSelectionElement[] = [];
  for (const net of networks) {
    if (!isMultusSecondary(net)) continue;
    const { namespace, name } = nadNamespacedName(vmiNamespace, net.multus!.networkName);
    const iface = interfaces.find((i) => i.name === net.name);
    const el: NetworkSelectionElement = { name, namespace, interface: podInterfaceName(net.name) };
    if (iface?.macAddress) el.mac = iface.macAddress;
    out.push(el);
  }
  return out;
}

/** The launcher pod's network annotations: the Multus networks list (when not empty) and the default network. */
export function launcherNetworkAnnotations(vmiNamespace: string, spec: VmiSpecLike | undefined): Record<string, string> {
  const annotations: Record<string, string> = {};
  const elements = launcherNetworkElements(vmiNamespace, spec);
  if (elements.length > 0) annotations[MULTUS_NETWORKS_ANNOTATION] = JSON.stringify(elements);
  const defaults = (spec?.networks ?? []).filter((n) => n.multus?.default === true);
  if (defaults.length === 1) annotations[MULTUS_DEFAULT_NETWORK_ANNOTATION] = defaults[0]!.multus!.networkName;
  return annotations;
}

/**
 * Reads a networks annotation as Multus does: a JSON list of elements, or the short comma-separated form
 * `[ns/]name[@iface]`. Returns undefined when it cannot be read.
 */
export function parseNetworksAnnotation(value: string | undefined): NetworkSelectionElement[] | undefined {
  if (value === undefined || value.trim() === '') return [];
  const text = value.trim();
  if (/[[{"]/.test(text)) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (!Array.isArray(parsed)) return undefined;
      return parsed.filter((e): e is NetworkSelectionElement => !!e && typeof e === 'object' && typeof (e as { name?: unknown }).name === 'string');
    } catch {
      return undefined;
    }
  }
  return text.split(',').map((item) => {
    const [nsName, iface] = item.trim().split('@') as [string, string | undefined];
    const slash = nsName.indexOf('/');
    const el: NetworkSelectionElement = slash < 0 ? { name: nsName } : { namespace: nsName.slice(0, slash), name: nsName.slice(slash + 1) };
    if (iface) el.interface = iface;
    return el;
  });
}

/** The pod interface names a VMI spec asks of its launcher pod (secondary networks only), sorted. */
export function wantedPodInterfaces(spec: VmiSpecLike | undefined): string[] {
  return nonAbsentNetworks(spec).networks.filter(isMultusSecondary).map((n) => podInterfaceName(n.name)).sort();
}

// ---------------------------------------------------------------------------------------------------------------
// Launcher pods.

const GENERATE_NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789'; // the API server's generateName alphabet

/**
 * `virt-launcher-<vmi>-<5 chars>`: the form KubeVirt gets from generateName, but derived from (VMI UID, purpose) so
 * that a retried or repeated create of the same pod hits AlreadyExists instead of making a second pod.
 */
export function launcherPodName(vmiName: string, vmiUid: string, purpose: string): string {
  const digest = createHash('sha256').update(`${vmiUid}/${purpose}`, 'utf8').digest();
  let suffix = '';
  for (let i = 0; i < 5; i++) suffix += GENERATE_NAME_ALPHABET[digest[i]! % GENERATE_NAME_ALPHABET.length];
  return `virt-launcher-${vmiName}-${suffix}`;
}

export function controllerRefTo(owner: { apiVersion: string; kind: string; name: string; uid: string }): OwnerReference {
  return { apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: true };
}

/** The controller reference of an object, if any. */
export function controllerOf(meta: { ownerReferences?: OwnerReference[] } | undefined): OwnerReference | undefined {
  return meta?.ownerReferences?.find((r) => r.controller === true);
}

export function isControlledBy(meta: { ownerReferences?: { controller?: boolean; uid: string }[] } | undefined, uid: string | undefined): boolean {
  return !!uid && !!meta?.ownerReferences?.some((r) => r.controller === true && r.uid === uid);
}

/**
 * A launcher pod for `vmi`, like virt-controller's template service makes it, reduced to what matters at the API
 * level: labels, the domain and network annotations, the controller reference, a container that never runs. No
 * nodeName (no kubelet here: a pod bound to a node would never finish graceful deletion); the node it "runs" on is
 * recorded in an annotation for activePods.
 */
export function renderLauncherPod(vmi: Vmi, opts: { name: string; node: string; migrationUid?: string }): V1Pod {
  const ns = vmi.metadata.namespace!;
  const labels: Record<string, string> = {
    ...(vmi.metadata.labels ?? {}),
    [LAUNCHER_LABEL]: LAUNCHER_LABEL_VALUE,
    [CREATED_BY_LABEL]: vmi.metadata.uid!,
    [VM_NAME_LABEL]: vmi.metadata.name,
  };
  if (opts.migrationUid) labels[MIGRATION_JOB_LABEL] = opts.migrationUid;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: opts.name,
      namespace: ns,
      labels,
      annotations: {
        [DOMAIN_ANNOTATION]: vmi.metadata.name,
        'kubectl.kubernetes.io/default-container': 'compute',
        ...launcherNetworkAnnotations(ns, vmi.spec),
        [FAKE_NODE_ANNOTATION]: opts.node,
        [RENDERED_INTERFACES_ANNOTATION]: wantedPodInterfaces(vmi.spec).join(','),
      },
      ownerReferences: [controllerRefTo({ apiVersion: VMI_API_VERSION, kind: 'VirtualMachineInstance', name: vmi.metadata.name, uid: vmi.metadata.uid! })],
    },
    spec: {
      automountServiceAccountToken: false,
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'compute', image: 'kubevirt-standin.invalid/virt-launcher:none', command: ['/bin/false'] }],
    },
  };
}

export const podNode = (pod: V1Pod): string => pod.metadata?.annotations?.[FAKE_NODE_ANNOTATION] ?? FAKE_NODES[0];
export const isTerminating = (obj: { metadata?: { deletionTimestamp?: unknown } }): boolean => obj.metadata?.deletionTimestamp != null;
/** A node of FAKE_NODES other than `node`, for a migration target. */
export const otherNode = (node: string | undefined): string => (node === FAKE_NODES[0] ? FAKE_NODES[1] : FAKE_NODES[0]);

// ---------------------------------------------------------------------------------------------------------------
// VMI status.

/** activePods as KubeVirt keeps it: every pod controlled by the VMI (terminating ones included) → its node. */
export function activePodsOf(pods: V1Pod[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of pods) if (p.metadata?.uid) out[p.metadata.uid] = podNode(p);
  return out;
}

export const isMigrationInProgress = (ms: MigrationState | undefined): boolean => !!ms && !ms.completed && !ms.failed;

/**
 * The pod the VMI currently "runs" in: the migration target once a migration completed, the source while one is
 * in progress, otherwise the oldest live pod.
 */
export function currentPod(vmi: Vmi, pods: V1Pod[]): V1Pod | undefined {
  const live = pods.filter((p) => !isTerminating(p));
  const ms = vmi.status?.migrationState;
  const byName = (n: string | undefined) => (n ? live.find((p) => p.metadata?.name === n) : undefined);
  if (ms?.completed) {
    const t = byName(ms.targetPod);
    if (t) return t;
  } else if (isMigrationInProgress(ms)) {
    const s = byName(ms!.sourcePod);
    if (s) return s;
    const others = live.filter((p) => p.metadata?.labels?.[MIGRATION_JOB_LABEL] !== ms!.migrationUid);
    return oldest(others);
  }
  return oldest(live);
}

function oldest(pods: V1Pod[]): V1Pod | undefined {
  const time = (p: V1Pod) => (p.metadata?.creationTimestamp ? new Date(p.metadata.creationTimestamp).getTime() : 0);
  return [...pods].sort((a, b) => time(a) - time(b) || (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''))[0];
}

/**
 * status.interfaces as KubeVirt reports it for the pod the VMI runs in: the primary network always (pod interface
 * eth0), a secondary network while the pod carries its interface (what Multus would have attached from the pod's
 * networks annotation, read as it is now, i.e. after any mutating webhook). IP addresses are not reported.
 */
export function interfaceStatuses(vmi: Vmi, pod: V1Pod | undefined): VmiInterfaceStatus[] {
  const attached = new Set(
    (parseNetworksAnnotation(pod?.metadata?.annotations?.[MULTUS_NETWORKS_ANNOTATION]) ?? []).map((e) => e.interface).filter(Boolean),
  );
  const out: VmiInterfaceStatus[] = [];
  for (const net of vmi.spec?.networks ?? []) {
    if (isPrimary(net)) {
      out.push({ name: net.name, podInterfaceName: PRIMARY_POD_INTERFACE, infoSource: 'domain, guest-agent' });
    } else if (isMultusSecondary(net)) {
      const ifName = podInterfaceName(net.name);
      if (pod && attached.has(ifName)) out.push({ name: net.name, podInterfaceName: ifName, infoSource: 'domain, guest-agent, multus-status' });
    }
  }
  return out;
}

/**
 * Whether the VMI's launcher pod must be replaced to follow its spec: the interfaces wanted now differ from those
 * the pod was made for. KubeVirt (NIC hotplug integrated with the LiveUpdate rollout strategy) then migrates the
 * VM to a new pod that carries the new set. Comparing with what the pod was *made* for, rather than with what
 * its annotation says after admission, keeps a webhook that rewrites the annotation from causing endless
 * migrations; such a webhook still shows up in status.interfaces.
 */
export function needsPodReplacement(vmi: Vmi, pod: V1Pod): boolean {
  const rendered = pod.metadata?.annotations?.[RENDERED_INTERFACES_ANNOTATION];
  if (rendered === undefined) return false; // not made by the stand-in: leave it
  const had = rendered === '' ? [] : rendered.split(',');
  const want = wantedPodInterfaces(vmi.spec);
  return had.length !== want.length || had.some((x, i) => x !== want[i]);
}

// ---------------------------------------------------------------------------------------------------------------
// VM → VMI.

/** Whether the VM should run, per its runStrategy (preferred) or the deprecated `running`; undefined: leave as is. */
export function shouldRun(vm: Vm, vmi: Vmi | undefined): boolean | undefined {
  const rs = vm.spec?.runStrategy;
  if (rs !== undefined) {
    switch (rs) {
      case 'Always':
        return true;
      case 'RerunOnFailure':
        // restart only after a failure; a VMI that succeeded is left as it is
        return vmi?.status?.phase === 'Succeeded' ? undefined : true;
      case 'Halted':
        return false;
      default:
        return undefined; // Manual, Once, WaitAsReceiver: no automatic start or stop
    }
  }
  return vm.spec?.running === true;
}

/** The VMI virt-controller makes for a VM: its template (metadata and spec), the VM as controller, both finalizers. */
export function renderVmiFromVm(vm: Vm): Vmi {
  const tmeta = vm.spec?.template?.metadata ?? {};
  const spec = structuredClone(vm.spec?.template?.spec ?? {}) as VmiSpec;
  return {
    apiVersion: VMI_API_VERSION,
    kind: 'VirtualMachineInstance',
    metadata: {
      name: vm.metadata.name,
      namespace: vm.metadata.namespace!,
      ...(tmeta.labels ? { labels: { ...tmeta.labels } } : {}),
      annotations: { ...(tmeta.annotations ?? {}), [VM_GENERATION_ANNOTATION]: String(vm.metadata.generation ?? 1) },
      ownerReferences: [controllerRefTo({ apiVersion: VM_API_VERSION, kind: 'VirtualMachine', name: vm.metadata.name, uid: vm.metadata.uid! })],
      finalizers: [VM_CONTROLLER_FINALIZER, VMI_FINALIZER],
    },
    spec,
  };
}

/**
 * KubeVirt's network sync from a VM to its running VMI (NIC hotplug):
 * 1. an interface marked absent is dropped (with its network) from VM and VMI specs once it is no longer in the
 *    VMI's status.interfaces, i.e. once the VM runs in a pod without it;
 * 2. a bridge or SR-IOV interface of the VM that the VMI lacks (and that is not absent) is added to the VMI, with
 *    its network;
 * 3. a change of `state` on an interface both have is copied to the VMI (but an absent VMI interface stays so).
 * Returns the new VM template networks/interfaces and VMI networks/interfaces, or undefined where nothing changes.
 */
export function syncNetworks(vm: Vm, vmi: Vmi): {
  vm?: { networks: VmNetwork[]; interfaces: VmInterface[] };
  vmi?: { networks: VmNetwork[]; interfaces: VmInterface[] };
} {
  const inStatus = new Set((vmi.status?.interfaces ?? []).map((s) => s.name));
  const clear = (ifaces: VmInterface[], nets: VmNetwork[]) => {
    const keptIfaces = ifaces.filter((i) => i.state !== 'absent' || inStatus.has(i.name));
    const names = new Set(keptIfaces.map((i) => i.name));
    return { interfaces: keptIfaces, networks: nets.filter((n) => names.has(n.name)) };
  };
  const vmSpec = vm.spec?.template?.spec;
  const vmIfaces0 = specInterfaces(vmSpec);
  const vmNets0 = vmSpec?.networks ?? [];
  const vmiIfaces0 = specInterfaces(vmi.spec);
  const vmiNets0 = vmi.spec?.networks ?? [];

  const vmNew = clear(vmIfaces0, vmNets0);
  const vmiNew = clear(vmiIfaces0, vmiNets0);
  const vmiIfaces = structuredClone(vmiNew.interfaces);
  const vmiNets = structuredClone(vmiNew.networks);
  for (const vmIface of vmNew.interfaces) {
    const existing = vmiIfaces.find((i) => i.name === vmIface.name);
    if (!existing) {
      const net = vmNew.networks.find((n) => n.name === vmIface.name);
      const hotpluggable = vmIface.bridge !== undefined || vmIface.sriov !== undefined;
      if (vmIface.state !== 'absent' && hotpluggable && net) {
        vmiIfaces.push(structuredClone(vmIface));
        vmiNets.push(structuredClone(net));
      }
    } else if ((vmIface.state ?? '') !== (existing.state ?? '') && existing.state !== 'absent') {
      if (vmIface.state === undefined) delete existing.state;
      else existing.state = vmIface.state;
    }
  }
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const out: ReturnType<typeof syncNetworks> = {};
  if (!same(vmNew.interfaces, vmIfaces0) || !same(vmNew.networks, vmNets0)) out.vm = vmNew;
  if (!same(vmiIfaces, vmiIfaces0) || !same(vmiNets, vmiNets0)) out.vmi = { interfaces: vmiIfaces, networks: vmiNets };
  return out;
}

/** status.printableStatus, with KubeVirt's precedence: Terminating, Stopping, Migrating, Running, Starting, Stopped. */
export function printableStatus(vm: Vm, vmi: Vmi | undefined): string {
  if (vm.metadata.deletionTimestamp) return 'Terminating';
  if (!vmi) return 'Stopped';
  if (vmi.metadata.deletionTimestamp) return 'Stopping';
  const phase = vmi.status?.phase;
  if (isFinalPhase(phase)) return 'Stopped';
  if (phase === 'Running' && isMigrationInProgress(vmi.status?.migrationState)) return 'Migrating';
  if (phase === 'Running') return 'Running';
  return 'Starting';
}

/** The VM status fields the stand-in keeps (printableStatus, ready, created); other fields are left as they are. */
export function vmStatus(vm: Vm, vmi: Vmi | undefined): VmStatus {
  const ready = !!vmi && !vmi.metadata.deletionTimestamp && vmi.status?.phase === 'Running';
  return { ...(vm.status ?? {}), printableStatus: printableStatus(vm, vmi), ready, created: !!vmi };
}
