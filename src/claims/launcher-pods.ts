// Which pods are a VMI's launcher pods, as the leader reads them (a claim made after its pod runs, a standalone
// VMI's release, a NAD swap, the allocator's running addresses): one selector and one liveness rule for all.

import type { Pod, VirtualMachineInstance } from '../kube/types.ts';
import { CREATED_BY_LABEL, LAUNCHER_LABEL, LAUNCHER_LABEL_VALUE } from './constants.ts';
import { podInterfaceName } from './names.ts';
import { nadKeyOfNetworkName } from './nad-reference.ts';
import { controllerRef } from './owners.ts';

/** The label selector of the launcher pods KubeVirt made for the VMI of uid `vmiUid`. */
export function launcherPodSelector(vmiUid: string): string {
  return `${LAUNCHER_LABEL}=${LAUNCHER_LABEL_VALUE},${CREATED_BY_LABEL}=${vmiUid}`;
}

/** Whether KubeVirt lists launcher pods for the VMI (`status.activePods`): its guest may run on an address. */
export function hasActivePods(vmi: VirtualMachineInstance): boolean {
  return Object.keys(vmi.status?.activePods ?? {}).length > 0;
}

/** A launcher pod of the VMI `vmiUid` that is alive: controller owner uid, not terminating, not finished. */
export function isRunningLauncherPod(pod: Pod, vmiUid: string): boolean {
  return isUnfinishedLauncherPod(pod, vmiUid) && !pod.metadata.deletionTimestamp;
}

/**
 * A launcher pod of the VMI `vmiUid` that may still use its addresses: not finished, terminating or not. A pod being
 * deleted still runs its guest through the grace period (up to minutes), on the addresses its elements' claims hold.
 */
export function isUnfinishedLauncherPod(pod: Pod, vmiUid: string): boolean {
  const phase = pod.status?.phase;
  return controllerRef(pod, 'VirtualMachineInstance')?.uid === vmiUid && phase !== 'Succeeded' && phase !== 'Failed';
}

/** The NAD (`namespace/name`) and the pod interface names (hashed, or the ordinal `net<N>`) of a secondary network. */
export interface NetworkInterfaces {
  nad: string;
  names: ReadonlySet<string>;
}

export function interfacesOfNetwork(vmi: VirtualMachineInstance, network: string, namespace: string): NetworkInterfaces | undefined {
  let ordinal = 0;
  for (const net of vmi.spec?.networks ?? []) {
    if (!net?.multus || net.multus.default) continue;
    ordinal++;
    if (net.name !== network) continue;
    const nad = nadKeyOfNetworkName(net.multus.networkName, namespace);
    return nad === undefined ? undefined : { nad, names: new Set([podInterfaceName(network), `net${ordinal}`]) };
  }
  return undefined;
}
