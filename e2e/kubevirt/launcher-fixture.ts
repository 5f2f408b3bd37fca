// LAUNCHER FIXTURE: TEST INFRASTRUCTURE, NOT KUBEVIRT.
//
// The objects virt-controller v1.9.0 renders, for the cases and benchmarks that create them directly through the API
// server instead of letting the real virt-controller (kubevirt.ts) do it: a webhook case that needs a launcher pod
// admitted at a chosen moment, a state virt-controller would fix at once, a benchmark of admission alone. Also the
// VM manifests the cases create. No I/O and no decisions here: what KubeVirt does with these objects is the real
// virt-controller's (virtctl.ts drives it); the node side is node-standin.ts.
//
// Each rule is written from what KubeVirt does (the launcher pod's network annotations: pkg/network/pod/annotations;
// pod names from generateName; the VMI a VM gets); comments say which KubeVirt behaviour a function stands for.
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import {
  CREATED_BY_LABEL,
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
export const VM_NAME_LABEL = 'vm.kubevirt.io/name';
export const MIGRATION_JOB_LABEL = 'kubevirt.io/migrationJobUID';
export const VM_GENERATION_ANNOTATION = 'kubevirt.io/vm-generation';
/** The label selector of every launcher pod. */
export const LAUNCHER_SELECTOR = `${LAUNCHER_LABEL}=${LAUNCHER_LABEL_VALUE}`;

export const VMI_API_VERSION = apiVersionOf(resources.virtualMachineInstances);
export const VM_API_VERSION = apiVersionOf(resources.virtualMachines);

// ---------------------------------------------------------------------------------------------------------------
// Shapes: the shared types, plus the few KubeVirt fields the cases read and the shared types leave out.

/** status.migrationState: the fields the node stand-in and the waits read or write; the rest is kept as it is. */
export interface MigrationState {
  sourceNode?: string;
  targetPod?: string;
  targetNode?: string;
  startTimestamp?: string;
  completed?: boolean;
  failed?: boolean;
  [key: string]: unknown;
}

export interface VmiInterfaceStatus {
  name: string;
  podInterfaceName?: string;
  infoSource?: string;
  [key: string]: unknown;
}

export interface VmiStatus {
  phase?: string;
  activePods?: Record<string, string>;
  nodeName?: string;
  interfaces?: VmiInterfaceStatus[];
  migrationState?: MigrationState;
  conditions?: { type: string; status: string; [key: string]: unknown }[];
  [key: string]: unknown;
}

/** A full VMI spec is opaque here except for networks and interfaces. */
export type VmiSpec = VmiSpecLike & { domain?: { devices?: { interfaces?: VmInterface[] } & Record<string, unknown> } & Record<string, unknown> } & Record<
    string,
    unknown
  >;

export type Vmi = Omit<VirtualMachineInstance, 'spec' | 'status'> & { spec?: VmiSpec; status?: VmiStatus };

export type Vm = Omit<VirtualMachine, 'spec' | 'status'> & {
  spec?: {
    running?: boolean;
    runStrategy?: string;
    template?: { metadata?: Partial<ObjectMeta>; spec?: VmiSpec };
    [key: string]: unknown;
  };
  status?: Record<string, unknown>;
};

// ---------------------------------------------------------------------------------------------------------------
// Pod interface names and the networks annotation.

/** KubeVirt's pod interface name for a secondary network: "pod" + the first 11 hex chars of sha256(network name). */
export function podInterfaceName(networkName: string): string {
  return `pod${createHash('sha256').update(networkName, 'utf8').digest('hex').slice(0, 11)}`;
}

/**
 * The elements of `k8s.v1.cni.cncf.io/networks` KubeVirt writes on a launcher pod: one per Multus secondary network
 * (not `default`) in the VMI's network order, with `mac` when the interface asks for one. KubeVirt drops interfaces
 * marked `state: absent` and every network left without an interface of the same name. The NAD is `name` or
 * `namespace/name`, the namespace defaulting to the VMI's. (Network binding plugins' own NADs are not reproduced.)
 */
export function launcherNetworkElements(vmiNamespace: string, spec: VmiSpecLike | undefined): NetworkSelectionElement[] {
  const interfaces = (spec?.domain?.devices?.interfaces ?? []).filter((i) => i.state !== 'absent');
  return (spec?.networks ?? []).flatMap((net) => {
    const iface = interfaces.find((i) => i.name === net.name);
    if (!iface || net.multus === undefined || net.multus.default === true) return [];
    const nad = net.multus.networkName;
    const slash = nad.indexOf('/');
    const [namespace, name] = slash < 0 ? [vmiNamespace, nad] : [nad.slice(0, slash), nad.slice(slash + 1)];
    return [{ name, namespace, interface: podInterfaceName(net.name), ...(iface.macAddress ? { mac: iface.macAddress } : {}) }];
  });
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

export function isControlledBy(meta: { ownerReferences?: { controller?: boolean; uid: string }[] } | undefined, uid: string | undefined): boolean {
  return !!uid && !!meta?.ownerReferences?.some((r) => r.controller === true && r.uid === uid);
}

/**
 * A launcher pod for `vmi`, like virt-controller's template service makes it, reduced to what matters at the API
 * level: labels, the domain and network annotations, the controller reference, a container that never runs. No
 * nodeName: the node stand-in, where one runs, schedules and starts it like any launcher pod.
 */
export function renderLauncherPod(vmi: Vmi, opts: { name: string; migrationUid?: string }): V1Pod {
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
      },
      ownerReferences: [controllerRefTo({ apiVersion: VMI_API_VERSION, kind: 'VirtualMachineInstance', name: vmi.metadata.name, uid: vmi.metadata.uid! })],
    },
    spec: {
      automountServiceAccountToken: false,
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'compute', image: 'launcher-fixture.invalid/virt-launcher:none', command: ['/bin/false'] }],
    },
  };
}

export const isMigrationInProgress = (ms: MigrationState | undefined): boolean => !!ms && !ms.completed && !ms.failed;

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

// ---------------------------------------------------------------------------------------------------------------
// VM manifests.

export interface VMNetworkRequest {
  /** Logical network name (VM network and interface `name`). */
  name: string;
  /** NAD reference, `name` or `namespace/name`. */
  nadName: string;
  macAddress?: string;
  state?: 'absent';
}

/**
 * A small VirtualMachine: pod network (`podNetwork`, default masquerade; false: none) plus one bridge interface per
 * Multus secondary network; `bare`: no networks and no interfaces at all (KubeVirt then adds the pod network).
 * `running` (default true) sets `spec.runStrategy` Always or Halted; `runStrategy` sets another one.
 */
export function buildVM(opts: {
  namespace: string;
  name: string;
  running?: boolean;
  runStrategy?: string;
  networks?: VMNetworkRequest[];
  podNetwork?: VmInterface | false;
  bare?: boolean;
  labels?: Record<string, string>;
  /** The template's (virt-controller copies them to the VMI). */
  annotations?: Record<string, string>;
}): Vm {
  const pod = opts.podNetwork ?? { name: 'default', masquerade: {} };
  const networks: VmNetwork[] = pod ? [{ name: pod.name, pod: {} }] : [];
  const interfaces: VmInterface[] = pod ? [pod] : [];
  for (const n of opts.networks ?? []) {
    networks.push({ name: n.name, multus: { networkName: n.nadName } });
    interfaces.push({ name: n.name, bridge: {}, ...(n.macAddress ? { macAddress: n.macAddress } : {}), ...(n.state ? { state: n.state } : {}) });
  }
  return {
    apiVersion: VM_API_VERSION,
    kind: 'VirtualMachine',
    metadata: { name: opts.name, namespace: opts.namespace },
    spec: {
      runStrategy: opts.runStrategy ?? (opts.running === false ? 'Halted' : 'Always'),
      template: {
        metadata: { labels: { 'kubevirt.io/domain': opts.name, ...(opts.labels ?? {}) }, ...(opts.annotations ? { annotations: opts.annotations } : {}) },
        spec: {
          domain: { devices: opts.bare ? {} : { interfaces }, resources: { requests: { memory: '64Mi' } } },
          ...(opts.bare ? {} : { networks }),
          terminationGracePeriodSeconds: 0,
        },
      },
    },
  };
}
