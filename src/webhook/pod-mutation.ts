// What the webhook does to a virt-launcher pod, as a pure function: given the pod, its VMI and the NADs, the JSON patch
// (RFC 6902) that points the pod's persistent networks at their IPAMClaims. The gate is on (admission-decide.ts).
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
// - Never touched: pods that are not launcher pods, elements of other networks, elements
//   that already carry a reference (a different one is reported, not overwritten), and any pod whose annotation
//   cannot be read (reported). An unchanged annotation produces no patch operation.
// - Built-in allocator networks (`addresses`, at CREATE only): the element also gets `ips`, exactly the claim's
//   addresses, or the pod is denied (`denials`) when the claim has none (docs/allocator.md, "Pod admission").

import { keyString } from '../kube/key.ts';
import {
  LAUNCHER_LABEL,
  LAUNCHER_LABEL_VALUE,
  MULTUS_DEFAULT_NETWORK_ANNOTATION,
  MULTUS_NETWORKS_ANNOTATION,
  OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION,
} from '../claims/constants.ts';
import type { PodAddresses } from '../allocator/pod-addresses.ts';
import { withClaimNames, claimStanding, effectiveVmiSpec, ownerUidsOf, type ClaimStandingReason, type NetworkVerdict } from '../claims/index.ts';
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
import { isPodNetwork, primaryRequests, SecondaryMatcher } from './pod-networks.ts';

export { mayNeedReferences } from './pod-networks.ts';

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

export type PodMutationSkip = 'NotALauncherPod' | 'UnreadableAnnotation';

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

/** `what` names a claim nothing shows is this VM's: the IPAM plugin would hand the pod its addresses, so it is refused. */
function unvouched(network: string, claim: string, what: string, hint = ''): PodDenial {
  return { network, claim, reason: 'ForeignClaimReference', message: `${what}; nothing shows that claim is this VM's, so the pod is refused${hint}` };
}

function foreignReference(verdict: NetworkVerdict, where: string, named: string): PodDenial {
  const hint = ' (remove whatever writes that reference: another IPAM webhook, or a hand-made pod)';
  return unvouched(verdict.network, verdict.claim, `${where} already names IPAMClaim ${named}, not this VM's ${verdict.claim}`, hint);
}

function unverifiedReference(i: number, key: string, named: string): PodDenial {
  return unvouched(
    key,
    named,
    `element ${i} (${key}) of ${MULTUS_NETWORKS_ANNOTATION} names IPAMClaim ${named}, but no persistent network of this VM has that element`,
  );
}

export function isLauncherPod(pod: Pod): boolean {
  return pod.metadata?.labels?.[LAUNCHER_LABEL] === LAUNCHER_LABEL_VALUE;
}

const annotationPath = (key: string): string => `/metadata/annotations/${escapeJsonPointer(key)}`;

/** What the steps of one mutation share: the input, the VMI as KubeVirt runs it, and what they add to. */
interface Mutation {
  input: PodMutationInput;
  vmi: VirtualMachineInstance;
  owners: ReturnType<typeof ownerUidsOf>;
  result: PodMutation;
  ops: JsonPatchOp[];
}

/** At CREATE every element is decided; at UPDATE only the fresh ones (new, or gaining a reference). */
const decided = (m: Mutation, i: number): boolean => m.input.operation === 'CREATE' || (m.input.fresh?.has(i) ?? false);

/** Whether the pod may be pointed at `verdict.claim`; a claim that is not usable denies the pod (KubeVirt retries). */
function usable(m: Mutation, verdict: NetworkVerdict): boolean {
  const standing = claimStanding(m.input.claims.get(verdict.claim), verdict.claim, m.owners, verdict.claimSpec?.network);
  if (standing.usable) return true;
  m.result.denials.push({ network: verdict.network, claim: verdict.claim, reason: standing.reason, message: standing.message });
  return false;
}

export function mutateLauncherPod(input: PodMutationInput): PodMutation {
  const result: PodMutation = { patch: [], references: [], reports: [], staleVmiSuspected: false, denials: [] };
  const { pod } = input;
  // The VMI as KubeVirt runs it (its defaulting already did this to a VMI from the API; a no-op then).
  const vmi: VirtualMachineInstance = { ...input.vmi, spec: effectiveVmiSpec(input.vmi.spec) };
  if (!isLauncherPod(pod)) return { ...result, skipped: 'NotALauncherPod' };

  const annotations = pod.metadata?.annotations ?? {};
  // The caller's verdicts name every claim `<vm>.<network>`; which name applies depends on the claims (NAME).
  const verdicts = withClaimNames(vmi.metadata.name, input.persistent, (name) => input.claims.get(name));
  const m: Mutation = { input, vmi, owners: ownerUidsOf(vmi), result, ops: [] };
  const persistent = persistentByNetwork(m, verdicts);

  // Read both annotations first: a pod with an unreadable one is left alone entirely.
  const unreadable = (reason: PodMutationReportReason, annotation: string, why: string): PodMutation => {
    result.reports.push({ reason, message: `annotation ${annotation} cannot be read (${why}); the pod is left unchanged` });
    return { ...result, skipped: 'UnreadableAnnotation' };
  };
  const networksText = annotations[MULTUS_NETWORKS_ANNOTATION];
  const networks = networksText === undefined ? undefined : parseNetworkSelection(networksText);
  if (networks && !networks.ok) return unreadable('InvalidNetworksAnnotation', MULTUS_NETWORKS_ANNOTATION, networks.error);
  const defaultText = annotations[MULTUS_DEFAULT_NETWORK_ANNOTATION];
  const defaultNetwork = defaultText === undefined ? undefined : parseNetworkSelection(defaultText);
  const primary = verdicts.find((v) => v.claimSpec && isPodNetwork(vmi, v.network));
  if (primary && input.operation === 'CREATE' && defaultNetwork && (!defaultNetwork.ok || defaultNetwork.elements.length !== 1)) {
    const why = defaultNetwork.ok ? `it selects ${defaultNetwork.elements.length} networks, not one` : defaultNetwork.error;
    return unreadable('InvalidDefaultNetworkAnnotation', MULTUS_DEFAULT_NETWORK_ANNOTATION, why);
  }

  if (pod.metadata?.annotations === undefined) m.ops.push({ op: 'add', path: '/metadata/annotations', value: {} });
  const before = m.ops.length;
  if (networks?.ok) mutateSecondaryNetworks(m, networks.elements, networksText, persistent);
  const defaultElements = defaultNetwork?.ok ? defaultNetwork.elements : [];
  if (primary && input.operation === 'CREATE') mutatePrimaryNetwork(m, primary, defaultElements[0], defaultText);
  if (!primary && input.operation === 'CREATE') refuseUnvouchedPodNetworkClaims(m, defaultElements);
  result.patch = m.ops.length > before ? m.ops : [];
  return result;
}

/** The persistent networks by name; a network kept from persistence is reported. */
function persistentByNetwork(m: Mutation, verdicts: readonly NetworkVerdict[]): Map<string, NetworkVerdict> {
  const persistent = new Map<string, NetworkVerdict>();
  for (const verdict of verdicts) {
    if (verdict.claimSpec) persistent.set(verdict.network, verdict);
    else if (verdict.problem) {
      m.result.reports.push({
        reason: 'PersistenceBlocked',
        network: verdict.network,
        message: `network "${verdict.network}" gets no claim reference: ${verdict.problem.message}`,
      });
    }
  }
  return persistent;
}

/** Secondary networks: each decided element of a persistent network gets its claim's reference (and addresses). */
function mutateSecondaryNetworks(
  m: Mutation,
  parsed: readonly NetworkSelectionElement[],
  text: string | undefined,
  persistent: ReadonlyMap<string, NetworkVerdict>,
): void {
  const elements = parsed.map((element) => ({ ...element }));
  const matcher = new SecondaryMatcher(m.vmi, m.input.namespace);
  let changed = false;
  elements.forEach((element, i) => {
    if (decideElement(m, matcher, persistent, element, i)) changed = true;
  });
  for (const verdict of persistent.values()) {
    if (!isPodNetwork(m.vmi, verdict.network) && !matcher.taken.has(verdict.network)) {
      m.result.reports.push({
        reason: 'MissingNetworkElement',
        network: verdict.network,
        message: `persistent network "${verdict.network}" has no element in the pod's ${MULTUS_NETWORKS_ANNOTATION}`,
      });
    }
  }
  if (changed) {
    const value = serializeNetworkSelection(elements);
    if (value !== text) m.ops.push({ op: 'replace', path: annotationPath(MULTUS_NETWORKS_ANNOTATION), value });
  }
}

/** One element of the networks annotation, changed in place; whether it changed. */
function decideElement(
  m: Mutation,
  matcher: SecondaryMatcher,
  persistent: ReadonlyMap<string, NetworkVerdict>,
  element: NetworkSelectionElement,
  i: number,
): boolean {
  const { result, input } = m;
  const key = keyString({ namespace: elementNamespace(element, input.namespace), name: element.name });
  const named = referenceOf(element);
  if (!decided(m, i)) {
    // A running pod's element: its reference (if any) was carried over from the old object; only mark which
    // network it serves, so that a network whose element is untouched is not reported as missing.
    const match = isBindingPluginElement(element) ? undefined : matcher.match(element, key);
    if (match) matcher.taken.add(match.network);
    return false;
  }
  if (isBindingPluginElement(element)) {
    if (named !== undefined) result.denials.push(unverifiedReference(i, key, named));
    return false;
  }
  const iface = typeof element.interface === 'string' && element.interface !== '' ? element.interface : undefined;
  const match = matcher.match(element, key);
  if (!match && named !== undefined) {
    // Nothing shows that the claim this element names is this VM's: the IPAM plugin would hand the pod its
    // addresses. A stale cached VMI is read again by the caller, and the denial stands only if it persists.
    result.staleVmiSuspected = true;
    result.denials.push(unverifiedReference(i, key, named));
    return false;
  }
  if (!match) {
    result.staleVmiSuspected = true;
    result.reports.push({
      reason: 'UnknownNetworkElement',
      message: `element ${i} (${key}${iface ? `@${iface}` : ''}) matches no network of VirtualMachineInstance ${input.namespace}/${m.vmi.metadata.name}; left unchanged`,
    });
    return false;
  }
  matcher.taken.add(match.network);
  const verdict = persistent.get(match.network);
  if (!verdict) {
    // A reference on a network that gets none from us (not persistent, gate-blocked...): nothing shows it is
    // this VM's claim.
    if (named !== undefined) result.denials.push(unverifiedReference(i, key, named));
    return false;
  }
  // A reference to another claim, written by someone else: nothing proves that claim is this VM's, and the IPAM
  // plugin would hand the pod its addresses, so the pod is refused.
  if (named !== undefined && named !== verdict.claim) {
    result.denials.push(foreignReference(verdict, `element ${i} (${key}) of ${MULTUS_NETWORKS_ANNOTATION}`, named));
    return false;
  }
  if (!usable(m, verdict)) return false;
  const withIps = allocatedIps(m, element, `element ${i} (${key})`, match.network, verdict.claim);
  if (named !== undefined) return withIps;
  element[IPAM_CLAIM_REFERENCE] = verdict.claim;
  result.references.push({ annotation: MULTUS_NETWORKS_ANNOTATION, network: match.network, claim: verdict.claim });
  return true;
}

/** Built-in allocator networks, at CREATE: the element gets exactly its claim's addresses, or the pod is denied. */
function allocatedIps(m: Mutation, element: NetworkSelectionElement, where: string, network: string, claim: string): boolean {
  const addresses = m.input.operation === 'CREATE' ? m.input.addresses?.get(network) : undefined;
  if (!addresses) return false;
  if ('deny' in addresses) {
    m.result.denials.push({ network, message: addresses.deny });
    return false;
  }
  const asked = Array.isArray(element.ips) ? element.ips : [];
  if (asked.length === 0) {
    element.ips = [...addresses.ips];
    return true;
  }
  if ([...asked].sort().join() !== [...addresses.ips].sort().join()) {
    m.result.denials.push({ network, message: `${where} asks for ${asked.join(', ')}, but IPAMClaim ${claim} holds ${addresses.ips.join(', ')}` });
  }
  return false;
}

// Primary user-defined network. OVN-Kubernetes before December 2025 reads the claim only from the pod annotation
// k8s.ovn.org/primary-udn-ipamclaim; later releases read `ipam-claim-reference` of the default-network element
// first and fall back to that annotation. So the annotation is always set, and the element is written only where
// it carries something the annotation cannot, IP or MAC requests (Multus then requires its NAD to exist:
// --default-network-nad), or where the pod already has one (it only gets the reference).
function mutatePrimaryNetwork(m: Mutation, primary: NetworkVerdict, current: NetworkSelectionElement | undefined, defaultText: string | undefined): void {
  const { input, result } = m;
  const legacy = input.pod.metadata?.annotations?.[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION];
  const requests = primaryRequests(m.vmi, primary.network, input.nads, input.namespace);
  // Either one is enough for some OVN-Kubernetes release to hand the pod another claim's addresses.
  const foreign = podNetworkClaims(m, current ? [current] : []).filter(([, claim]) => claim !== primary.claim);
  for (const [annotation, claim] of foreign) result.denials.push(foreignReference(primary, annotation, claim));
  if (foreign.length > 0) return;
  if (!usable(m, primary)) return; // Denied: no reference to a claim that is not this VM's.
  if ('problem' in requests) {
    result.denials.push({ network: primary.network, message: requests.problem });
    return;
  }
  if (legacy !== primary.claim) {
    m.ops.push({ op: legacy === undefined ? 'add' : 'replace', path: annotationPath(OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION), value: primary.claim });
    result.references.push({ annotation: OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION, network: primary.network, claim: primary.claim });
  }
  if (current === undefined && requests.ips.length === 0 && requests.mac === undefined) return;
  // Respect an existing element (its network, namespace, interface, requests...): only what is missing is added.
  const cluster = input.clusterDefaultNetwork ?? DEFAULT_CLUSTER_NETWORK;
  const element: NetworkSelectionElement = current ? { ...current } : { name: cluster.name, namespace: cluster.namespace };
  if (current && !current.namespace) element.namespace = input.namespace;
  if (requests.ips.length > 0 && !Array.isArray(element.ips)) element.ips = requests.ips;
  if (requests.mac !== undefined && typeof element.mac !== 'string') element.mac = requests.mac;
  element[IPAM_CLAIM_REFERENCE] = primary.claim;
  const value = serializeNetworkSelection([element]);
  if (value === defaultText) return;
  m.ops.push({ op: defaultText === undefined ? 'add' : 'replace', path: annotationPath(MULTUS_DEFAULT_NETWORK_ANNOTATION), value });
  result.references.push({ annotation: MULTUS_DEFAULT_NETWORK_ANNOTATION, network: primary.network, claim: primary.claim });
}

// No persistent pod network (none, not persistent, or blocked): a claim named for the pod network anyway (a template
// annotation virt-controller copied to the pod, another webhook) is vouched for by nothing, and OVN-Kubernetes would
// hand the pod that claim's addresses.
function refuseUnvouchedPodNetworkClaims(m: Mutation, defaultElements: readonly NetworkSelectionElement[]): void {
  for (const [annotation, claim] of podNetworkClaims(m, defaultElements)) {
    m.result.denials.push(
      unvouched(annotation, claim, `annotation ${annotation} names IPAMClaim ${claim}, but no persistent pod network of this VM gets a claim`),
    );
  }
}

/** The claims the pod names for its pod network: in default-network elements, then in OVN-Kubernetes' legacy annotation. */
function podNetworkClaims(m: Mutation, defaultElements: readonly NetworkSelectionElement[]): (readonly [string, string])[] {
  const legacy = m.input.pod.metadata?.annotations?.[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION];
  return [
    ...defaultElements.flatMap((e) => referenceOf(e) ?? []).map((claim) => [MULTUS_DEFAULT_NETWORK_ANNOTATION, claim] as const),
    ...(typeof legacy === 'string' && legacy !== '' ? [[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION, legacy] as const] : []),
  ];
}
