// What the webhook does to a virt-launcher pod, as a pure function: given the pod, its VMI, the NADs and the gate,
// the JSON patch (RFC 6902) that points the pod's persistent networks at their IPAMClaims.
//
// - Secondary networks: every element of `k8s.v1.cni.cncf.io/networks` whose network is persistent for this VMI
//   gets `ipam-claim-reference: <claim>`. An element belongs to a VMI network when its NAD (namespace/name) is that
//   network's NAD and, when the element names an interface, the interface is KubeVirt's pod interface name for that
//   network (hashed, or the older ordinal `net<N>`).
// - Primary user-defined network (VMI network `pod: {}` in a namespace whose primary NAD allows persistent IPs):
//   the annotation `k8s.ovn.org/primary-udn-ipamclaim: <claim>` (read by every OVN-Kubernetes release), and, only
//   when the VMI asks for addresses or a MAC on it (or the pod already has one), a `v1.multus-cni.io/default-network`
//   element `{name, namespace, ips, mac, ipam-claim-reference}` naming the cluster default network NAD. Only at
//   CREATE: a running pod's default network cannot change.
// - "Persistent for this VMI" is src/claims' persistentNetworks() on the VMI spec: the very rule the controller uses
//   to create claims, so a pod never references a claim the controller would not make.
// - Never touched: pods that are not launcher pods, pods when the gate is off, elements of other networks, elements
//   that already carry a reference (a different one is reported, not overwritten), and any pod whose annotation
//   cannot be read (reported). An unchanged annotation produces no patch operation.
// - Built-in allocator networks (`addresses`, at CREATE only): the element also gets `ips`, exactly the claim's
//   addresses, or the pod is denied (`denials`) when the claim has none (docs/allocator.md, "Pod admission").

import { isIPv4, isIPv6 } from 'node:net';
import {
  ADDRESSES_ANNOTATION,
  LAUNCHER_LABEL,
  LAUNCHER_LABEL_VALUE,
  MULTUS_DEFAULT_NETWORK_ANNOTATION,
  MULTUS_NETWORKS_ANNOTATION,
  OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION,
} from '../claims/constants.ts';
import { parseAddressesAnnotation } from '../allocator/addresses-annotation.ts';
import type { PodAddresses } from '../allocator/pod-addresses.ts';
import {
  withClaimNames,
  claimStanding,
  effectiveVmiSpec,
  nadKeyOfNetworkName,
  ownerUidsOf,
  parseNadConfig,
  podInterfaceName,
  type ClaimStandingReason,
  type NetworkVerdict,
} from '../claims/index.ts';
import { escapeJsonPointer, type JsonPatchOp } from '../kube/patch.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, NetworkSelectionElement, Pod, VirtualMachineInstance } from '../kube/types.ts';
import {
  elementNamespace,
  IPAM_CLAIM_REFERENCE,
  isBindingPluginElement,
  parseNetworkSelection,
  referenceOf,
  serializeNetworkSelection,
} from '../claims/network-selection.ts';

/** The cluster default network NAD that OVN-Kubernetes' primary-UDN support expects in the default-network element. */
export const DEFAULT_CLUSTER_NETWORK = { namespace: 'ovn-kubernetes', name: 'default' } as const;

export interface PodMutationInput {
  pod: Pod;
  /** The request's namespace (a pod being created may not carry one in its metadata yet). */
  namespace: string;
  /** AdmissionRequest.operation. */
  operation: string;
  /** The VMI the pod runs; its name is the VM name of the claims. */
  vmi: VirtualMachineInstance;
  /** By `namespace/name`: the NADs the VMI references, and every NAD of the pod's namespace (primary network). */
  nads: ReadonlyMap<string, NetworkAttachmentDefinition>;
  /**
   * persistentNetworks() of the VMI spec with `nads` and no claim lookup, computed once per admission by the caller
   * (which also waits for these networks' claims).
   */
  persistent: readonly NetworkVerdict[];
  gateEnabled: boolean;
  clusterDefaultNetwork?: { namespace: string; name: string };
  /** By VMI network name: the allocator networks' addresses (or why the pod must wait). Used at CREATE only. */
  addresses?: ReadonlyMap<string, PodAddresses>;
  /**
   * By claim name: the claims the persistent networks would be pointed at, as freshly as the caller could read
   * them (absent: does not exist). A reference is only written to a claim of this VMI or its VM (src/claims
   * standing.ts); see `denials`.
   */
  claims: ReadonlyMap<string, IPAMClaim>;
  /**
   * At UPDATE: the indices of the networks annotation's elements that are new at this UPDATE or gain a reference
   * (carry-over.ts). Only those are decided, with CREATE's checks; every other element of a running pod is left as
   * it is, its reference carried over before this runs. Absent at UPDATE: no element is decided.
   */
  fresh?: ReadonlySet<number>;
}

export type PodMutationSkip = 'NotALauncherPod' | 'GateDisabled' | 'UnreadableAnnotation';

export type PodMutationReportReason =
  | 'InvalidNetworksAnnotation'
  | 'InvalidDefaultNetworkAnnotation'
  | 'UnknownNetworkElement'
  | 'ConflictingClaimReference'
  | 'PersistenceBlocked'
  | 'MissingNetworkElement'
  | 'ClaimNotUsable';

export interface PodMutationReport {
  reason: PodMutationReportReason;
  message: string;
  network?: string;
}

export interface AddedReference {
  annotation: typeof MULTUS_NETWORKS_ANNOTATION | typeof MULTUS_DEFAULT_NETWORK_ANNOTATION | typeof OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION;
  /** The logical network (VMI network name). */
  network: string;
  claim: string;
}

export interface PodMutation {
  skipped?: PodMutationSkip;
  /** Empty: admit the pod unchanged. */
  patch: JsonPatchOp[];
  references: AddedReference[];
  reports: PodMutationReport[];
  /**
   * An element of the pod matches no network of the VMI: the VMI given may be older than the pod (a cache that has
   * not seen a hotplug yet). The caller should read the VMI from the API and call again.
   */
  staleVmiSuspected: boolean;
  /**
   * The pod must not be admitted (yet): a persistent network's claim is not this VM's to use (missing, another
   * owner's, being deleted, for another network), or an allocator network's addresses are not there.
   */
  denials: PodDenial[];
}

export interface PodDenial {
  network: string;
  message: string;
  /** Set for claim standing denials: what the Event on the VM is filed under. */
  reason?: ClaimStandingReason;
  claim?: string;
}

/** A Multus secondary network of the VMI, with what identifies its element in the pod. */
interface SecondaryNetwork {
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

function foreignReference(verdict: NetworkVerdict, where: string, named: string): PodDenial {
  return {
    network: verdict.network,
    claim: verdict.claim,
    reason: 'ForeignClaimReference',
    message: `${where} already names IPAMClaim ${named}, not this VM's ${verdict.claim}; nothing shows that claim is this VM's, so the pod is refused (remove whatever writes that reference: another IPAM webhook, or a hand-made pod)`,
  };
}

function unverifiedReference(i: number, key: string, named: string): PodDenial {
  return {
    network: key,
    claim: named,
    reason: 'ForeignClaimReference',
    message: `element ${i} (${key}) of ${MULTUS_NETWORKS_ANNOTATION} names IPAMClaim ${named}, but no persistent network of this VM has that element; nothing shows that claim is this VM's, so the pod is refused`,
  };
}

export function isLauncherPod(pod: Pod): boolean {
  return pod.metadata?.labels?.[LAUNCHER_LABEL] === LAUNCHER_LABEL_VALUE;
}

const annotationPath = (key: string): string => `/metadata/annotations/${escapeJsonPointer(key)}`;

export function mutateLauncherPod(input: PodMutationInput): PodMutation {
  const result: PodMutation = { patch: [], references: [], reports: [], staleVmiSuspected: false, denials: [] };
  const { pod, namespace } = input;
  // The VMI as KubeVirt runs it (its defaulting already did this to a VMI from the API; a no-op then).
  const vmi: VirtualMachineInstance = { ...input.vmi, spec: effectiveVmiSpec(input.vmi.spec) };
  if (!isLauncherPod(pod)) return { ...result, skipped: 'NotALauncherPod' };
  if (!input.gateEnabled) return { ...result, skipped: 'GateDisabled' };

  const annotations = pod.metadata?.annotations ?? {};
  // The caller's verdicts name every claim `<vm>.<network>`; which name applies depends on the claims (NAME).
  const verdicts = withClaimNames(vmi.metadata.name, input.persistent, (name) => input.claims.get(name));
  const owners = ownerUidsOf(vmi);
  const isCreate = input.operation === 'CREATE';
  /** At CREATE every element is decided; at UPDATE only the fresh ones (new, or gaining a reference). */
  const decided = (i: number): boolean => isCreate || (input.fresh?.has(i) ?? false);
  /** Whether the pod may be pointed at `verdict.claim`; a claim that is not usable denies the pod (KubeVirt retries). */
  const usable = (verdict: NetworkVerdict): boolean => {
    const standing = claimStanding(input.claims.get(verdict.claim), verdict.claim, owners, verdict.claimSpec?.network);
    if (standing.usable) return true;
    result.denials.push({ network: verdict.network, claim: verdict.claim, reason: standing.reason, message: standing.message });
    return false;
  };
  const persistent = new Map<string, NetworkVerdict>();
  for (const verdict of verdicts) {
    if (verdict.claimSpec) persistent.set(verdict.network, verdict);
    else if (verdict.problem) {
      result.reports.push({
        reason: 'PersistenceBlocked',
        network: verdict.network,
        message: `network "${verdict.network}" gets no claim reference: ${verdict.problem.message}`,
      });
    }
  }

  // Read both annotations first: a pod with an unreadable one is left alone entirely.
  const networksText = annotations[MULTUS_NETWORKS_ANNOTATION];
  const networks = networksText === undefined ? undefined : parseNetworkSelection(networksText);
  if (networks && !networks.ok) {
    result.reports.push({
      reason: 'InvalidNetworksAnnotation',
      message: `annotation ${MULTUS_NETWORKS_ANNOTATION} cannot be read (${networks.error}); the pod is left unchanged`,
    });
    return { ...result, skipped: 'UnreadableAnnotation' };
  }
  const defaultText = annotations[MULTUS_DEFAULT_NETWORK_ANNOTATION];
  const defaultNetwork = defaultText === undefined ? undefined : parseNetworkSelection(defaultText);
  const primary = verdicts.find((v) => v.claimSpec && isPodNetwork(vmi, v.network));
  if (primary && input.operation === 'CREATE' && defaultNetwork && (!defaultNetwork.ok || defaultNetwork.elements.length !== 1)) {
    const why = defaultNetwork.ok ? `it selects ${defaultNetwork.elements.length} networks, not one` : defaultNetwork.error;
    result.reports.push({
      reason: 'InvalidDefaultNetworkAnnotation',
      message: `annotation ${MULTUS_DEFAULT_NETWORK_ANNOTATION} cannot be read (${why}); the pod is left unchanged`,
    });
    return { ...result, skipped: 'UnreadableAnnotation' };
  }

  const ops: JsonPatchOp[] = [];
  if (pod.metadata?.annotations === undefined) ops.push({ op: 'add', path: '/metadata/annotations', value: {} });
  const before = ops.length;

  // Secondary networks.
  if (networks?.ok) {
    const elements = networks.elements.map((element) => ({ ...element }));
    const secondaries = secondaryNetworksOf(vmi, namespace);
    const taken = new Set<string>();
    const matchOf = (element: NetworkSelectionElement, key: string): SecondaryNetwork | undefined => {
      const candidates = secondaries.filter((s) => s.nadKey === key);
      const iface = typeof element.interface === 'string' && element.interface !== '' ? element.interface : undefined;
      return iface
        ? (candidates.find((c) => c.hashedInterface === iface) ?? candidates.find((c) => c.ordinalInterface === iface))
        : candidates.find((c) => !taken.has(c.network));
    };
    let changed = false;
    elements.forEach((element, i) => {
      const key = `${elementNamespace(element, namespace)}/${element.name}`;
      const existingRef = element[IPAM_CLAIM_REFERENCE];
      const named = typeof existingRef === 'string' && existingRef !== '' ? existingRef : undefined;
      if (!decided(i)) {
        // A running pod's element: its reference (if any) was carried over from the old object; only mark which
        // network it serves, so that a network whose element is untouched is not reported as missing.
        const match = isBindingPluginElement(element) ? undefined : matchOf(element, key);
        if (match) taken.add(match.network);
        return;
      }
      if (isBindingPluginElement(element)) {
        if (named !== undefined) result.denials.push(unverifiedReference(i, key, named));
        return;
      }
      const iface = typeof element.interface === 'string' && element.interface !== '' ? element.interface : undefined;
      const match = matchOf(element, key);
      if (!match && named !== undefined) {
        // Nothing shows that the claim this element names is this VM's: the IPAM plugin would hand the pod its
        // addresses. A stale cached VMI is read again by the caller, and the denial stands only if it persists.
        result.staleVmiSuspected = true;
        result.denials.push(unverifiedReference(i, key, named));
        return;
      }
      if (!match) {
        result.staleVmiSuspected = true;
        result.reports.push({
          reason: 'UnknownNetworkElement',
          message: `element ${i} (${key}${iface ? `@${iface}` : ''}) matches no network of VirtualMachineInstance ${namespace}/${vmi.metadata.name}; left unchanged`,
        });
        return;
      }
      taken.add(match.network);
      const verdict = persistent.get(match.network);
      if (!verdict) {
        // A reference on a network that gets none from us (not persistent, gate-blocked...): nothing shows it is
        // this VM's claim.
        if (named !== undefined) result.denials.push(unverifiedReference(i, key, named));
        return;
      }
      // A reference to another claim, written by someone else: nothing proves that claim is this VM's, and the IPAM
      // plugin would hand the pod its addresses, so the pod is refused.
      if (named !== undefined && named !== verdict.claim) {
        result.denials.push(foreignReference(verdict, `element ${i} (${key}) of ${MULTUS_NETWORKS_ANNOTATION}`, named));
        return;
      }
      if (!usable(verdict)) return;
      const addresses = input.operation === 'CREATE' ? input.addresses?.get(match.network) : undefined;
      if (addresses && 'deny' in addresses) result.denials.push({ network: match.network, message: addresses.deny });
      else if (addresses) {
        const asked = Array.isArray(element.ips) ? element.ips : [];
        if (asked.length === 0) {
          element.ips = [...addresses.ips];
          changed = true;
        } else if ([...asked].sort().join() !== [...addresses.ips].sort().join()) {
          const message = `element ${i} (${key}) asks for ${asked.join(', ')}, but IPAMClaim ${verdict.claim} holds ${addresses.ips.join(', ')}`;
          result.denials.push({ network: match.network, message });
        }
      }
      if (named !== undefined) return;
      element[IPAM_CLAIM_REFERENCE] = verdict.claim;
      changed = true;
      result.references.push({ annotation: MULTUS_NETWORKS_ANNOTATION, network: match.network, claim: verdict.claim });
    });
    for (const verdict of persistent.values()) {
      if (!isPodNetwork(vmi, verdict.network) && !taken.has(verdict.network)) {
        result.reports.push({
          reason: 'MissingNetworkElement',
          network: verdict.network,
          message: `persistent network "${verdict.network}" has no element in the pod's ${MULTUS_NETWORKS_ANNOTATION}`,
        });
      }
    }
    if (changed) {
      const value = serializeNetworkSelection(elements);
      if (value !== networksText) ops.push({ op: 'replace', path: annotationPath(MULTUS_NETWORKS_ANNOTATION), value });
    }
  }

  // Primary user-defined network. OVN-Kubernetes before December 2025 reads the claim only from the pod annotation
  // k8s.ovn.org/primary-udn-ipamclaim; later releases read `ipam-claim-reference` of the default-network element
  // first and fall back to that annotation. So the annotation is always set, and the element is written only where
  // it carries something the annotation cannot, IP or MAC requests (Multus then requires its NAD to exist:
  // --default-network-nad), or where the pod already has one (it only gets the reference).
  if (primary && input.operation === 'CREATE') {
    const cluster = input.clusterDefaultNetwork ?? DEFAULT_CLUSTER_NETWORK;
    const current = defaultNetwork?.ok ? defaultNetwork.elements[0] : undefined;
    const existing = current?.[IPAM_CLAIM_REFERENCE];
    const legacy = annotations[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION];
    const requests = primaryRequests(vmi, primary.network, input.nads, namespace);
    const foreignElement = typeof existing === 'string' && existing !== '' && existing !== primary.claim;
    const foreignLegacy = typeof legacy === 'string' && legacy !== '' && legacy !== primary.claim;
    if (foreignElement || foreignLegacy) {
      // Either one is enough for some OVN-Kubernetes release to hand the pod another claim's addresses.
      if (foreignElement) result.denials.push(foreignReference(primary, MULTUS_DEFAULT_NETWORK_ANNOTATION, existing));
      if (foreignLegacy) result.denials.push(foreignReference(primary, OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION, legacy));
    } else if (!usable(primary)) {
      // Denied: no reference to a claim that is not this VM's.
    } else if ('problem' in requests) {
      result.denials.push({ network: primary.network, message: requests.problem });
    } else {
      if (legacy !== primary.claim) {
        ops.push({ op: legacy === undefined ? 'add' : 'replace', path: annotationPath(OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION), value: primary.claim });
        result.references.push({ annotation: OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION, network: primary.network, claim: primary.claim });
      }
      const wanted = current !== undefined || requests.ips.length > 0 || requests.mac !== undefined;
      if (wanted) {
        // Respect an existing element (its network, namespace, interface, requests...): only what is missing is added.
        const element: NetworkSelectionElement = current ? { ...current } : { name: cluster.name, namespace: cluster.namespace };
        if (current && !current.namespace) element.namespace = namespace;
        if (requests.ips.length > 0 && !Array.isArray(element.ips)) element.ips = requests.ips;
        if (requests.mac !== undefined && typeof element.mac !== 'string') element.mac = requests.mac;
        element[IPAM_CLAIM_REFERENCE] = primary.claim;
        const value = serializeNetworkSelection([element]);
        if (value !== defaultText) {
          ops.push({ op: defaultText === undefined ? 'add' : 'replace', path: annotationPath(MULTUS_DEFAULT_NETWORK_ANNOTATION), value });
          result.references.push({ annotation: MULTUS_DEFAULT_NETWORK_ANNOTATION, network: primary.network, claim: primary.claim });
        }
      }
    }
  }

  // No persistent pod network (none, not persistent, or blocked): a claim named for the pod network anyway (a template
  // annotation virt-controller copied to the pod, another webhook) is vouched for by nothing, and OVN-Kubernetes would
  // hand the pod that claim's addresses.
  if (!primary && isCreate) {
    const fromElements = defaultNetwork?.ok ? defaultNetwork.elements.map((e) => referenceOf(e)).filter((r): r is string => r !== undefined) : [];
    const legacy = annotations[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION];
    const named = [
      ...fromElements.map((claim) => [MULTUS_DEFAULT_NETWORK_ANNOTATION, claim] as const),
      ...(typeof legacy === 'string' && legacy !== '' ? [[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION, legacy] as const] : []),
    ];
    for (const [annotation, claim] of named) {
      result.denials.push({
        network: annotation,
        claim,
        reason: 'ForeignClaimReference',
        message: `annotation ${annotation} names IPAMClaim ${claim}, but no persistent pod network of this VM gets a claim; nothing shows that claim is this VM's, so the pod is refused`,
      });
    }
  }

  result.patch = ops.length > before ? ops : [];
  return result;
}

/**
 * What the VMI asks of its primary user-defined network: addresses (the `network.kubevirt.io/addresses` annotation,
 * by interface name; a bare address gets the prefix length of the primary NAD's first subnet of its family, as
 * OVN-Kubernetes wants CIDRs) and the interface's MAC. A request that cannot be honoured is a `problem`: the pod is
 * denied rather than started with an address the VM did not ask for.
 */
function primaryRequests(
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
    const family = isIPv4(address) ? 4 : isIPv6(address) ? 6 : 0;
    const subnet = subnets.find((s) => (family === 4 ? isIPv4(s.split('/')[0] ?? '') : isIPv6(s.split('/')[0] ?? '')));
    const prefix = subnet?.split('/')[1];
    if (family === 0 || !prefix) {
      return { problem: `${ADDRESSES_ANNOTATION} asks for ${address} on network "${network}", which has no IPv${family || '4/6'} subnet to take it from` };
    }
    ips.push(`${address}/${prefix}`);
  }
  return { ips, ...(mac ? { mac } : {}) };
}

function isPodNetwork(vmi: VirtualMachineInstance, network: string): boolean {
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
    const nad = nads.get(`${elementNamespace(element, namespace)}/${element.name}`);
    return nad === undefined || parseNadConfig(nad).allowPersistentIPs;
  });
}
