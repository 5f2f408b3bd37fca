// WANTED (1)-(3) and NAD-* (the rules are named in decide.ts): which networks of a spec persistence applies to, each
// with the claim it should have or the problem that blocks it. decide() plans the claims from these verdicts.

import { keyString, parseKey } from '../kube/key.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, VmiSpecLike } from '../kube/types.ts';
import { effectiveVmiSpec } from './effective-spec.ts';
import { isAbsent } from './facts.ts';
import { isOvnKubernetes, parseNadConfig, type NadConfig } from './nad-config.ts';
import { parseNadReference, type ObjectKey } from './nad-reference.ts';
import { podInterfaceName, PRIMARY_POD_INTERFACE } from './names.ts';
import { claimNameFor, type ClaimLookup } from './naming.ts';
import type { Problem, ProblemReason } from './plan.ts';

/** A problem before it is tied to a network and claim. */
export type Finding = Pick<Problem, 'reason' | 'message'>;

/** A network that persistence applies to: the claim it should have, or what keeps it from having one. */
export interface NetworkVerdict {
  /** The logical network: the VM/VMI network `name`. */
  network: string;
  claim: string;
  /** What the claim's spec must say; set exactly when `problem` is not. */
  claimSpec?: IPAMClaim['spec'];
  problem?: Finding;
}

type Verdict = Pick<NetworkVerdict, 'claimSpec' | 'problem'> | undefined;

const blocked = (reason: ProblemReason, message: string): Verdict => ({ problem: { reason, message } });

/**
 * WANTED (1)-(3) for one spec: the networks of a VM template or VMI spec that persistence applies to, each with its
 * claim or the problem that blocks it. Ordinary networks are left out. The webhook asks the same question of the
 * VMI spec, so that pods and claims agree on which networks are persistent. `claims`: see claimNameFor (without it,
 * every claim is named `<vm>.<network>`).
 */
export function persistentNetworks(
  key: ObjectKey,
  spec: VmiSpecLike | undefined,
  nads: ReadonlyMap<string, NetworkAttachmentDefinition>,
  claims?: ClaimLookup,
): NetworkVerdict[] {
  spec = effectiveVmiSpec(spec);
  const result: NetworkVerdict[] = [];
  const seen = new Set<string>();
  for (const [index, net] of (spec?.networks ?? []).entries()) {
    // Networks skipped here are reported (an Event on the VM), never dropped silently: KubeVirt's validation should
    // have refused them, so they mean a spec that did not pass through it as expected.
    if (!net || typeof net.name !== 'string' || net.name === '') {
      result.push({ network: '', claim: '', problem: { reason: 'InvalidNetwork', message: `network #${index} has no name; it is skipped` } });
      continue;
    }
    if (seen.has(net.name)) {
      const message = `network "${net.name}" is listed more than once; only the first is considered`;
      result.push({ network: net.name, claim: claimNameFor(key.name, net.name, claims), problem: { reason: 'DuplicateNetworkName', message } });
      continue;
    }
    seen.add(net.name);
    if (isAbsent(spec, net.name)) continue;
    let verdict: Verdict;
    if (net.multus && !net.multus.default) verdict = secondaryVerdict(key, nads, net.name, net.multus.networkName);
    else if (net.pod) verdict = primaryVerdict(key, nads);
    // A Multus network with `default: true` replaces the cluster default network: it is not a secondary network,
    // and the spec gives persistence to secondary networks and to primary user-defined networks only.
    if (verdict) result.push({ network: net.name, claim: claimNameFor(key.name, net.name, claims, verdict.claimSpec?.network), ...verdict });
  }
  return result;
}

/**
 * NAME for each verdict that gets a claim: the name claimNameFor() picks among the claims `lookup` shows. The pod
 * mutation and the allocator's pod addresses both take the names from here, with the same claims, so a launcher
 * pod's `ips` always come from the claim its reference names.
 */
export function withClaimNames(vmName: string, verdicts: readonly NetworkVerdict[], lookup: ClaimLookup): NetworkVerdict[] {
  return verdicts.map((v) => (v.claimSpec ? { ...v, claim: claimNameFor(vmName, v.network, lookup, v.claimSpec.network) } : v));
}

function secondaryVerdict(key: ObjectKey, nads: ReadonlyMap<string, NetworkAttachmentDefinition>, network: string, reference: unknown): Verdict {
  const ref = parseNadReference(reference, key.namespace);
  if (!ref) {
    return blocked('InvalidNetworkReference', `networkName ${JSON.stringify(reference)} is neither "name" nor "namespace/name"`);
  }
  const nad = nads.get(keyString(ref));
  // NAD-EXISTS: a NAD event brings the key back, so no retry.
  if (!nad) {
    return blocked('NetworkAttachmentDefinitionNotFound', `NetworkAttachmentDefinition ${ref.namespace}/${ref.name} does not exist`);
  }
  return nadVerdict(parseNadConfig(nad), ref, key.namespace, podInterfaceName(network), false);
}

function primaryVerdict(key: ObjectKey, nads: ReadonlyMap<string, NetworkAttachmentDefinition>): Verdict {
  const namespace = key.namespace;
  const primaries: { ref: ObjectKey; config: NadConfig }[] = [];
  for (const [mapKey, nad] of nads) {
    const ref = nadKeyOf(mapKey, nad);
    if (ref.namespace !== namespace) continue;
    const config = parseNadConfig(nad);
    if (config.role === 'primary') primaries.push({ ref, config });
  }
  // Without a primary user-defined network the pod network is the cluster default network, whose addresses are
  // not ours to keep.
  const [primary, ...more] = primaries.sort((a, b) => (a.ref.name < b.ref.name ? -1 : 1));
  if (!primary) return undefined;
  if (more.length > 0) {
    const names = primaries.map((p) => p.ref.name).join(', ');
    return blocked('AmbiguousPrimaryNetwork', `namespace ${namespace} has several primary networks (${names})`);
  }
  return nadVerdict(primary.config, primary.ref, namespace, PRIMARY_POD_INTERFACE, true);
}

/** Topologies the IPAM side can keep addresses on, by network role. */
const SUPPORTED_TOPOLOGIES = { secondary: ['layer2', 'localnet'], primary: ['layer2'] } as const;

function nadVerdict(config: NadConfig, ref: ObjectKey, ownerNamespace: string, iface: string, primary: boolean): Verdict {
  const nad = `NetworkAttachmentDefinition ${ref.namespace}/${ref.name}`;
  // NAD-PARSES: a config nobody can read is reported whether or not it meant to opt in; a bad key only when the NAD
  // opts in, or when the bad key is the opt-in itself (someone tried, with e.g. "true" as a string).
  const problems = config.problems.filter((p) => p.field === undefined || p.field === 'allowPersistentIPs' || config.allowPersistentIPs);
  if (problems.length > 0) {
    return blocked('InvalidNetworkConfig', `${nad}: ${problems.map((p) => p.message).join('; ')}`);
  }
  // NAD-OPTS-IN: a NAD that does not ask for persistence is an ordinary network; nothing to say about it.
  if (!config.allowPersistentIPs) return undefined;
  if (config.networkName === undefined) {
    return blocked('MissingNetworkName', `${nad} has no network "name" in its config, which an IPAMClaim must name`);
  }
  // NAD-SAME-NAMESPACE: an owner reference cannot cross namespaces and the IPAM plugin looks the claim up in the
  // NAD's namespace, so a claim could be either owned or found, never both.
  if (ref.namespace !== ownerNamespace) {
    return blocked(
      'CrossNamespacePersistentNetwork',
      `${nad} allows persistent IPs, but only a NetworkAttachmentDefinition in the VM's namespace ` + `(${ownerNamespace}) can have them`,
    );
  }
  // NAD-TOPOLOGY: checked only when set, since CNIs other than OVN-Kubernetes have no topology.
  const supported: readonly string[] = primary ? SUPPORTED_TOPOLOGIES.primary : SUPPORTED_TOPOLOGIES.secondary;
  if (config.topology !== undefined && !supported.includes(config.topology)) {
    return blocked(
      'UnsupportedTopology',
      `${nad} has topology "${config.topology}"; persistent IPs on a ${primary ? 'primary' : 'secondary'} ` + `network need ${supported.join(' or ')}`,
    );
  }
  // NAD-SUBNETS: OVN-Kubernetes allocates on layer2 only from `subnets`; localnet may be address-less (the guest
  // brings its own), and other CNIs keep their address ranges elsewhere.
  if (isOvnKubernetes(config) && config.topology === 'layer2' && config.subnets.length === 0) {
    return blocked('MissingSubnets', `${nad} allows persistent IPs but has no subnets to allocate from`);
  }
  return { claimSpec: { network: config.networkName, interface: iface } };
}

function nadKeyOf(mapKey: string, nad: NetworkAttachmentDefinition): ObjectKey {
  const fallback = parseKey(mapKey);
  return { namespace: nad.metadata?.namespace ?? fallback.namespace, name: nad.metadata?.name ?? fallback.name };
}
