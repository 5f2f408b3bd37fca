// Pure parts of the KubeVirt stand-in (test infrastructure, see standin.ts): its bookkeeping and the decisions it
// takes on VMs, VMIs and pods. The names and objects KubeVirt renders are the launcher fixture's
// (../kubevirt/launcher-fixture.ts), re-exported here. No I/O here, so every rule can be unit-tested.
import type { V1Pod } from '@kubernetes/client-node';
import type { VmInterface, VmNetwork } from '../../src/kube/types.ts';
import { MULTUS_NETWORKS_ANNOTATION } from '../../src/claims/constants.ts';
import {
  isFinalPhase,
  isMigrationInProgress,
  isMultusSecondary,
  isPrimary,
  isTerminating,
  MIGRATION_JOB_LABEL,
  specInterfaces,
  nonAbsentNetworks,
  podInterfaceName,
  parseNetworksAnnotation,
  renderLauncherPod as renderFixturePod,
  PRIMARY_POD_INTERFACE,
  type MigrationState,
  type Vm,
  type Vmi,
  type VmiInterfaceStatus,
  type VmStatus,
} from '../kubevirt/launcher-fixture.ts';
import type { VmiSpecLike } from '../../src/kube/types.ts';

export {
  CREATED_BY_LABEL,
  LEGACY_VMI_FINALIZER,
  MIGRATION_JOB_LABEL,
  PRIMARY_POD_INTERFACE,
  VMI_API_VERSION,
  VMI_FINALIZER,
  VMI_PHASES,
  VM_API_VERSION,
  VM_CONTROLLER_FINALIZER,
  VM_GENERATION_ANNOTATION,
  VM_NAME_LABEL,
  controllerOf,
  controllerRefTo,
  isControlledBy,
  isFinalPhase,
  isMigrationInProgress,
  isMultusSecondary,
  isPrimary,
  isTerminating,
  launcherNetworkAnnotations,
  launcherNetworkElements,
  launcherPodName,
  nadNamespacedName,
  nonAbsentNetworks,
  parseNetworksAnnotation,
  podInterfaceName,
  renderVmiFromVm,
  type MigrationState,
  type Vm,
  type Vmi,
  type VmiCondition,
  type VmiInterfaceStatus,
  type VmiSpec,
  type VmiStatus,
  type VmStatus,
} from '../kubevirt/launcher-fixture.ts';

/** Stand-in bookkeeping on launcher pods (not KubeVirt's): the fake node, and the interfaces the pod was made for. */
export const FAKE_NODE_ANNOTATION = 'kubevirt-standin.test/node';
export const RENDERED_INTERFACES_ANNOTATION = 'kubevirt-standin.test/rendered-interfaces';
export const FAKE_NODES = ['standin-node-1', 'standin-node-2'] as const;

/** The pod interface names a VMI spec asks of its launcher pod (secondary networks only), sorted. */
export function wantedPodInterfaces(spec: VmiSpecLike | undefined): string[] {
  return nonAbsentNetworks(spec).networks.filter(isMultusSecondary).map((n) => podInterfaceName(n.name)).sort();
}


/** The fixture's launcher pod, plus the stand-in's bookkeeping: the fake node it "runs" on, the interfaces it was made for. */
export function renderLauncherPod(vmi: Vmi, opts: { name: string; node: string; migrationUid?: string }): V1Pod {
  const pod = renderFixturePod(vmi, { name: opts.name, ...(opts.migrationUid ? { migrationUid: opts.migrationUid } : {}) });
  pod.metadata!.annotations = { ...pod.metadata!.annotations, [FAKE_NODE_ANNOTATION]: opts.node, [RENDERED_INTERFACES_ANNOTATION]: wantedPodInterfaces(vmi.spec).join(',') };
  return pod;
}

export const podNode = (pod: V1Pod): string => pod.metadata?.annotations?.[FAKE_NODE_ANNOTATION] ?? FAKE_NODES[0];
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
