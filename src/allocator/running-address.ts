// A claim made after its VM's launcher pod started (the gate turned on while VMs run, a NAD made persistent or
// switched to the allocator, the controller installed on a live cluster) is empty while the VM already has an address
// on the network. For the allocator's networks the claim must take THAT address, not a new one from the pool: the
// leader points the running pod's element at the claim (src/controller/running-pods.ts), so the next launcher pod (a
// migration target) is given the claim's addresses, and they must be the ones the guest has (issue 26, point 3).
//
// The same goes for a VM whose claim does not record its address yet and will not in this pass (its claim not made
// yet, never to be made, being deleted, or refused): whatever gave its pods their address, no other claim may get
// it. Its addresses are held back from the pool for the pass (plan.ts, `inUse`).
//
// The address the pod has is read from its `k8s.v1.cni.cncf.io/network-status` annotation (written by Multus). This
// file is pure: which VMI counts as running, which pods count, and what their network-status says for one network.
// The pod lists are read at the edge (gather.ts), only while a claim of the network is about to get an address.

import { keyString } from '../kube/key.ts';
import { hasActivePods, interfacesOfNetwork, isUnfinishedLauncherPod, type NetworkInterfaces } from '../claims/index.ts';
import type { NetworkAttachmentDefinition, Pod, VirtualMachineInstance } from '../kube/types.ts';
import { VMIS_BY_NAD } from '../sources/indexes.ts';
import { nadKeyOfNetworkName } from '../claims/nad-reference.ts';
import { bareAddress } from '../ip/address.ts';

export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';

/** What the running launcher pods of a claim's VMI say about the claim's network. */
export type RunningAddresses =
  /** No running pod lists an address for the network: the claim is allocated as any other. */
  | { kind: 'none' }
  /** Every running pod that lists the network has these addresses (bare, one per family at most). */
  | { kind: 'addresses'; ips: string[]; pods: string[] }
  /** The pods cannot be read now, or disagree: allocate nothing for the claim yet; `message` says why. */
  | { kind: 'unknown'; message: string }
  | { kind: 'invalid'; message: string };

export interface NetworkStatusEntry {
  name: string;
  interface?: string;
  ips: string[];
}

/** The entries of a network-status annotation; [] when absent or unreadable (entries that are not objects are dropped). */
export function parseNetworkStatus(text: string | undefined): NetworkStatusEntry[] {
  if (text === undefined || text.trim() === '') return [];
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(doc)) return [];
  const out: NetworkStatusEntry[] = [];
  for (const raw of doc) {
    if (!raw || typeof raw !== 'object') continue;
    const e = raw as Record<string, unknown>;
    if (typeof e['name'] !== 'string') continue;
    const ips = Array.isArray(e['ips']) ? e['ips'].filter((ip): ip is string => typeof ip === 'string' && ip !== '') : [];
    out.push({ name: e['name'], ...(typeof e['interface'] === 'string' ? { interface: e['interface'] } : {}), ips });
  }
  return out;
}

/** What each unfinished launcher pod of `vmiUid` (terminating ones too) lists for one network's interface. */
function podAddresses(pods: readonly Pod[], vmiUid: string, iface: NetworkInterfaces, namespace: string): { pod: string; ips: string[] }[] {
  const seen: { pod: string; ips: string[] }[] = [];
  for (const pod of pods) {
    if (!isUnfinishedLauncherPod(pod, vmiUid)) continue;
    const entries = parseNetworkStatus(pod.metadata.annotations?.[NETWORK_STATUS_ANNOTATION]);
    const entry = entries.find(
      (e) => e.interface !== undefined && iface.names.has(e.interface) && nadKeyOfNetworkName(e.name, namespace) === iface.nad && e.ips.length > 0,
    );
    // Multus lists bare addresses, but nothing forbids CIDR form.
    if (entry) seen.push({ pod: pod.metadata.name, ips: [...new Set(entry.ips.map(bareAddress))].sort() });
  }
  return seen;
}

/**
 * What the unfinished launcher pods of `vmiUid` (terminating ones too) say about one network: the addresses listed
 * for its interface (matched by interface name and NAD, as the webhook matches elements). Pods that do not list the
 * network say nothing (a pod still being wired); pods that list different addresses make the answer `invalid` (a
 * migration whose two pods disagree cannot be settled by choosing one).
 */
export function runningAddresses(pods: readonly Pod[], vmiUid: string, iface: NetworkInterfaces, namespace: string): RunningAddresses {
  const seen = podAddresses(pods, vmiUid, iface, namespace);
  if (seen.length === 0) return { kind: 'none' };
  const first = seen[0]!;
  const other = seen.find((s) => s.ips.join(',') !== first.ips.join(','));
  if (other) {
    return {
      kind: 'invalid',
      message: `the running launcher pods disagree on the address of ${iface.nad}: ${first.pod} has ${first.ips.join(', ')}, ${other.pod} has ${other.ips.join(', ')}`,
    };
  }
  return { kind: 'addresses', ips: first.ips, pods: seen.map((s) => s.pod).sort() };
}

/** The VMIs of a cache by the NADs their spec names (sources/indexes.ts). */
export interface VmisByNad {
  byIndex(index: typeof VMIS_BY_NAD, value: string): VirtualMachineInstance[];
}

/** A VMI with launcher pods on the network, and the interfaces it has there (with their VM network names). */
export interface VmiOnNetwork {
  vmi: VirtualMachineInstance;
  ifaces: (NetworkInterfaces & { network: string })[];
}

/**
 * Every VMI with active pods (terminating or not) that names one of the network's NADs, with its interfaces on them.
 * A VMI of another namespace counts too: no claim is made for it, but Multus attaches a NAD across namespaces unless
 * told not to, so its pods may have an address of the pool. Pure over the cache.
 */
export function vmisOnNetwork(nads: readonly NetworkAttachmentDefinition[], vmis: VmisByNad): VmiOnNetwork[] {
  const out = new Map<string, VmiOnNetwork>();
  for (const nad of nads) {
    const nadKey = keyString(nad.metadata);
    for (const vmi of vmis.byIndex(VMIS_BY_NAD, nadKey)) {
      const namespace = vmi.metadata.namespace ?? '';
      if (!vmi.metadata.uid || !hasActivePods(vmi)) continue;
      const ifaces = (vmi.spec?.networks ?? []).flatMap((net) => {
        if (!net?.multus || net.multus.default || typeof net.name !== 'string') return [];
        const iface = interfacesOfNetwork(vmi, net.name, namespace);
        return iface?.nad === nadKey ? [{ ...iface, network: net.name }] : [];
      });
      if (ifaces.length === 0) continue;
      const seen = out.get(vmi.metadata.uid);
      if (seen) seen.ifaces.push(...ifaces);
      else out.set(vmi.metadata.uid, { vmi, ifaces });
    }
  }
  return [...out.values()];
}

/**
 * Every address the unfinished launcher pods of a VMI list on the given interfaces, bare and without repeats (pods
 * that disagree give them all: each may be in use).
 */
export function addressesInUse(pods: readonly Pod[], on: VmiOnNetwork): string[] {
  const uid = on.vmi.metadata.uid ?? '';
  const namespace = on.vmi.metadata.namespace ?? '';
  const ips = on.ifaces.flatMap((iface) => podAddresses(pods, uid, iface, namespace).flatMap((p) => p.ips));
  return [...new Set(ips)].sort();
}
