// What a launcher pod's networks are, read from its VMI and the NADs, for the pure mutation (pod-mutation.ts): which
// element serves which secondary network, what the VMI asks of its primary user-defined network, and whether a pod
// may need a claim reference at all.

import { keyString } from '../kube/key.ts';
import { isIP } from 'node:net';
import { ADDRESSES_ANNOTATION, MULTUS_NETWORKS_ANNOTATION } from '../claims/constants.ts';
import { parseAddressesAnnotation } from '../claims/addresses-annotation.ts';
import { nadKeyOfNetworkName, parseNadConfig, podInterfaceName } from '../claims/index.ts';
import type { NetworkAttachmentDefinition, NetworkSelectionElement, Pod, VirtualMachineInstance } from '../kube/types.ts';
import { elementNamespace, isBindingPluginElement, parseNetworkSelection } from '../claims/network-selection.ts';

/** A Multus secondary network of the VMI, with what identifies its element in the pod. */
export interface SecondaryNetwork {
  network: string;
  nadKey: string;
  hashedInterface: string;
  ordinalInterface: string;
}

function secondaryNetworksOf(vmi: VirtualMachineInstance, namespace: string): SecondaryNetwork[] {
  const result: SecondaryNetwork[] = [];
  let ordinal = 0;
  for (const net of vmi.spec?.networks ?? []) {
    if (!net?.multus || net.multus.default) continue;
    ordinal++;
    const nadKey = nadKeyOfNetworkName(net.multus.networkName, namespace);
    if (nadKey === undefined || typeof net.name !== 'string') continue;
    result.push({ network: net.name, nadKey, hashedInterface: podInterfaceName(net.name), ordinalInterface: `net${ordinal}` });
  }
  return result;
}

/** Which secondary network of the VMI each element of the pod serves; a network is served by one element. */
export class SecondaryMatcher {
  /** The networks an element was matched to. */
  readonly taken = new Set<string>();
  readonly #secondaries: readonly SecondaryNetwork[];
  constructor(vmi: VirtualMachineInstance, namespace: string) {
    this.#secondaries = secondaryNetworksOf(vmi, namespace);
  }

  /** The network of `element` (its NAD is `key`): by interface name, or else the first of that NAD not taken yet. */
  match(element: NetworkSelectionElement, key: string): SecondaryNetwork | undefined {
    const candidates = this.#secondaries.filter((s) => s.nadKey === key);
    const iface = typeof element.interface === 'string' && element.interface !== '' ? element.interface : undefined;
    return iface
      ? (candidates.find((c) => c.hashedInterface === iface) ?? candidates.find((c) => c.ordinalInterface === iface))
      : candidates.find((c) => !this.taken.has(c.network));
  }
}

/**
 * What the VMI asks of its primary user-defined network: addresses (the `network.kubevirt.io/addresses` annotation,
 * by interface name; a bare address gets the prefix length of the primary NAD's first subnet of its family, as
 * OVN-Kubernetes wants CIDRs) and the interface's MAC. A request that cannot be honoured is a `problem`: the pod is
 * denied rather than started with an address the VM did not ask for.
 */
export function primaryRequests(
  vmi: VirtualMachineInstance,
  network: string,
  nads: ReadonlyMap<string, NetworkAttachmentDefinition>,
  namespace: string,
): { ips: string[]; mac?: string } | { problem: string } {
  const iface = vmi.spec?.domain?.devices?.interfaces?.find((i) => i?.name === network);
  const mac = typeof iface?.macAddress === 'string' && iface.macAddress !== '' ? iface.macAddress : undefined;
  const text = vmi.metadata.annotations?.[ADDRESSES_ANNOTATION];
  if (text === undefined) return { ips: [], ...(mac ? { mac } : {}) };
  const parsed = parseAddressesAnnotation(text);
  const problem = parsed.problems.find((p) => p.interface === network || p.interface === undefined);
  if (problem) return { problem: `${problem.message} (VirtualMachineInstance ${namespace}/${vmi.metadata.name})` };
  const asked = parsed.requests.get(network) ?? [];
  const subnets =
    [...nads.entries()]
      .filter(([key]) => key.startsWith(`${namespace}/`))
      .map(([, nad]) => parseNadConfig(nad))
      .find((config) => config.role === 'primary')?.subnets ?? [];
  const ips: string[] = [];
  for (const address of asked) {
    if (address.includes('/')) {
      ips.push(address);
      continue;
    }
    const family = isIP(address);
    const subnet = subnets.find((s) => isIP(s.split('/')[0] ?? '') === family);
    const prefix = subnet?.split('/')[1];
    if (family === 0 || !prefix) {
      return { problem: `${ADDRESSES_ANNOTATION} asks for ${address} on network "${network}", which has no IPv${family || '4/6'} subnet to take it from` };
    }
    ips.push(`${address}/${prefix}`);
  }
  return { ips, ...(mac ? { mac } : {}) };
}

export function isPodNetwork(vmi: VirtualMachineInstance, network: string): boolean {
  return (vmi.spec?.networks ?? []).some((n) => n?.name === network && n.pod !== undefined && n.pod !== null);
}

/**
 * Whether a launcher pod may need a reference at all, judged from the NADs alone (no VMI): an element whose NAD
 * allows persistent IPs or is not known, or a persistent primary network in the namespace. It lets the webhook admit
 * the pods of VMs on ordinary networks without reading their VMI, so that a VMI that cannot be read delays only the
 * VMs that need persistence. `nads` is keyed `namespace/name` as in PodMutationInput. An unreadable annotation says
 * yes (the full path reports it).
 */
export function mayNeedReferences(pod: Pod, namespace: string, nads: ReadonlyMap<string, NetworkAttachmentDefinition>): boolean {
  for (const [key, nad] of nads) {
    if (!key.startsWith(`${namespace}/`)) continue;
    const config = parseNadConfig(nad);
    if (config.role === 'primary' && config.allowPersistentIPs) return true;
  }
  const text = pod.metadata?.annotations?.[MULTUS_NETWORKS_ANNOTATION];
  if (text === undefined) return false;
  const parsed = parseNetworkSelection(text);
  if (!parsed.ok) return true;
  return parsed.elements.some((element) => {
    if (isBindingPluginElement(element)) return false;
    const nad = nads.get(keyString({ namespace: elementNamespace(element, namespace), name: element.name }));
    return nad === undefined || parseNadConfig(nad).allowPersistentIPs;
  });
}
