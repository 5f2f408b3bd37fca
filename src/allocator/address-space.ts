// The address space of each persistent network, as an operator asks about it: how many addresses the IPAM may hand
// out, how many the VMs' claims hold, and which claims wait or were refused. Pure: it reads the NADs and claims a
// cache (the controller's) or a list (`persistent-ips status --networks`) gives it, so the metric and the command
// show the same figures, and a steady state costs no API read.
//
// What "capacity" counts, per IPAM
// --------------------------------
// - Built-in allocator: its pool (pool.ts), from the same keys it allocates from.
// - OVN-Kubernetes (v1.3 cluster manager): `subnets` minus `excludeSubnets`, without the network/broadcast (IPv4) or
//   anycast (IPv6) address, as its range allocator hands them out. On a primary layer2 network it also keeps the
//   infrastructure addresses: `infrastructureSubnets` when given, else each subnet's .1 (gateway) and .2
//   (management port). Layer3 gives each node its own subnet and has no cluster-wide figure.
// - Any other IPAM, or a NAD that names no subnet: unknown, and said so rather than guessed.
// "Held" is what claims' `status.ips` record. On OVN-Kubernetes, pods on the same network that name no claim hold
// addresses too; no claim shows them, so "free" is an upper bound there (docs/metrics.md).

import { ALLOCATOR_ANNOTATION, EXCLUDE_SUBNETS_ANNOTATION, SUBNETS_ANNOTATION } from '../claims/constants.ts';
import { type NadConfig, isOvnKubernetes, parseNadConfig } from '../claims/nad-config.ts';
import { keyString } from '../kube/key.ts';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';
import { type IPFamily, formatAddress, parseAddress } from './address.ts';
import { CONDITION_TYPE } from './plan.ts';
import { type Pool, type PoolSpec, parsePool } from './pool.ts';

export type Ipam = 'ovn-kubernetes' | 'allocator' | 'other';
export type FamilyName = 'ipv4' | 'ipv6';

export interface FamilyFigures {
  /** Undefined when the capacity is unknown (`unknownBecause` says why). */
  capacity?: bigint;
  /** Distinct addresses in claims' status.ips that the pool could hand out. */
  held: number;
  /** capacity − held; never negative. */
  free?: bigint;
}

export interface NetworkFigures {
  /** The CNI network name, which claims' spec.network holds. */
  network: string;
  ipam: Ipam;
  /** `namespace/name` of each NAD of the network that allows persistent IPs. */
  nads: string[];
  /** Canonical subnets, when the pool is known. */
  subnets: string[];
  /** Per family present in the pool, or in the held addresses when the pool is unknown. */
  families: Partial<Record<FamilyName, FamilyFigures>>;
  unknownBecause?: string;
  claims: { allocated: number; pending: number; refused: Record<string, number> };
  /** Claims whose allocation the IPAM refused: name and reason, for the people reading `status`. */
  refusedClaims: { claim: string; reason: string; message: string }[];
  /** What is wrong with the inputs: unreadable subnets, NADs that disagree, addresses outside the pool. */
  problems: string[];
}

const FAMILY: Record<IPFamily, FamilyName> = { 4: 'ipv4', 6: 'ipv6' };

/** The figures of every network with a NAD that allows persistent IPs, sorted by network name. */
export function addressSpace(nads: readonly NetworkAttachmentDefinition[], claims: readonly IPAMClaim[]): NetworkFigures[] {
  const byNetwork = new Map<string, NetworkAttachmentDefinition[]>();
  for (const nad of nads) {
    const config = parseNadConfig(nad);
    if (!config.allowPersistentIPs || config.networkName === undefined) continue;
    const list = byNetwork.get(config.networkName) ?? [];
    list.push(nad);
    byNetwork.set(config.networkName, list);
  }
  const claimsByNetwork = new Map<string, IPAMClaim[]>();
  for (const claim of claims) {
    const network = claim.spec?.network;
    if (typeof network !== 'string' || !byNetwork.has(network)) continue;
    const list = claimsByNetwork.get(network) ?? [];
    list.push(claim);
    claimsByNetwork.set(network, list);
  }
  return [...byNetwork.keys()].sort().map((network) => networkFigures(network, byNetwork.get(network)!, claimsByNetwork.get(network) ?? []));
}

function networkFigures(network: string, nads: readonly NetworkAttachmentDefinition[], claims: readonly IPAMClaim[]): NetworkFigures {
  const figures: NetworkFigures = {
    network,
    ipam: ipamOf(nads),
    nads: nads.map((nad) => keyString(nad.metadata)).sort(),
    subnets: [],
    families: {},
    claims: { allocated: 0, pending: 0, refused: {} },
    refusedClaims: [],
    problems: [],
  };
  const pool = poolOf(figures, nads);
  if (pool) figures.subnets = pool.subnets.map((s) => s.text);
  countClaims(figures, claims);
  countHeld(figures, pool, claims);
  return figures;
}

function ipamOf(nads: readonly NetworkAttachmentDefinition[]): Ipam {
  if (nads.some((nad) => isOvnKubernetes(parseNadConfig(nad)))) return 'ovn-kubernetes';
  const allocator = nads.some((nad) => nad.metadata.annotations?.[ALLOCATOR_ANNOTATION]?.trim().toLowerCase() === 'true');
  return allocator ? 'allocator' : 'other';
}

/** The one pool every NAD of the network describes, or undefined with `unknownBecause` set. */
function poolOf(figures: NetworkFigures, nads: readonly NetworkAttachmentDefinition[]): Pool | undefined {
  if (figures.ipam === 'other') {
    figures.unknownBecause = 'the IPAM of this network is neither OVN-Kubernetes nor the built-in allocator';
    return undefined;
  }
  const pools = new Map<string, Pool>();
  for (const nad of nads) {
    const config = parseNadConfig(nad);
    const spec = poolSpec(figures.ipam, nad, config);
    if (!spec.subnets) {
      figures.unknownBecause = `NetworkAttachmentDefinition ${keyString(nad.metadata)} names no subnet`;
      return undefined;
    }
    if (config.topology?.toLowerCase() === 'layer3') {
      figures.unknownBecause = 'topology layer3 gives every node its own subnet: there is no network-wide figure';
      return undefined;
    }
    const parsed = parsePool(spec);
    if (!parsed.ok) {
      figures.unknownBecause = `NetworkAttachmentDefinition ${keyString(nad.metadata)}: ${parsed.problems.map((p) => p.message).join('; ')}`;
      figures.problems.push(figures.unknownBecause);
      return undefined;
    }
    pools.set(parsed.pool.canonical, parsed.pool);
  }
  if (pools.size > 1) {
    figures.unknownBecause = `the NetworkAttachmentDefinitions of the network describe different pools: ${[...pools.keys()].join(' | ')}`;
    figures.problems.push(figures.unknownBecause);
    return undefined;
  }
  return pools.values().next().value;
}

/** The keys the IPAM reads its pool from; OVN-Kubernetes' infrastructure addresses become excludes. */
function poolSpec(ipam: Ipam, nad: NetworkAttachmentDefinition, config: Readonly<NadConfig>): PoolSpec {
  const annotations = nad.metadata.annotations ?? {};
  if (ipam === 'allocator') {
    return {
      subnets: annotations[SUBNETS_ANNOTATION] ?? config.subnets.join(','),
      excludeSubnets: annotations[EXCLUDE_SUBNETS_ANNOTATION] ?? config.excludeSubnets.join(','),
    };
  }
  const excludes = [...config.excludeSubnets];
  if (config.role === 'primary' && config.topology?.toLowerCase() === 'layer2') {
    excludes.push(...(config.infrastructureSubnets.length > 0 ? config.infrastructureSubnets : config.subnets.flatMap(gatewayAndManagement)));
  }
  return { subnets: config.subnets.join(','), excludeSubnets: excludes.join(','), ...(config.topology ? { topology: config.topology } : {}) };
}

/** A primary layer2 subnet's first two host addresses: OVN-Kubernetes' gateway and management port. */
function gatewayAndManagement(subnet: string): string[] {
  const parsed = parseAddress(subnet.split('/').slice(0, 2).join('/'), { allowPrefix: true });
  if (!parsed.ok || parsed.value.prefix === undefined) return [];
  const { family, value, prefix } = parsed.value;
  const bits = family === 4 ? 32n : 128n;
  const network = (value >> (bits - BigInt(prefix))) << (bits - BigInt(prefix));
  return [network + 1n, network + 2n].map((a) => formatAddress(family, a));
}

function countClaims(figures: NetworkFigures, claims: readonly IPAMClaim[]): void {
  for (const claim of claims) {
    const condition = claim.status?.conditions?.find((c) => c.type === CONDITION_TYPE);
    if (condition?.status === 'False') {
      const reason = condition.reason || 'Unknown';
      figures.claims.refused[reason] = (figures.claims.refused[reason] ?? 0) + 1;
      figures.refusedClaims.push({ claim: keyString(claim.metadata), reason, message: condition.message ?? '' });
    } else if ((claim.status?.ips?.length ?? 0) > 0) {
      figures.claims.allocated++;
    } else {
      figures.claims.pending++;
    }
  }
  figures.refusedClaims.sort((a, b) => (a.claim < b.claim ? -1 : a.claim > b.claim ? 1 : 0));
}

type HeldAddress = { family: IPFamily; value: bigint } | { invalid: string };

// A scrape computes the figures anew (the metrics are read once a second in the benchmark, every 30 s by a usual
// Prometheus); parsing every claim's addresses each time was most of its cost. A cached claim is replaced, never
// mutated, when it changes, so the object keys its parsed addresses, and the entry goes with the object.
const heldByClaim = new WeakMap<IPAMClaim, readonly HeldAddress[]>();

function heldAddresses(claim: IPAMClaim): readonly HeldAddress[] {
  let held = heldByClaim.get(claim);
  if (!held) {
    held = (claim.status?.ips ?? []).map((ip) => {
      const parsed = parseAddress(ip, { allowPrefix: true });
      return parsed.ok ? { family: parsed.value.family, value: parsed.value.value } : { invalid: String(ip) };
    });
    heldByClaim.set(claim, held);
  }
  return held;
}

/** Distinct held addresses per family; one that the pool would not hand out is a problem, never a negative "free". */
function countHeld(figures: NetworkFigures, pool: Pool | undefined, claims: readonly IPAMClaim[]): void {
  const held: Record<IPFamily, Set<bigint>> = { 4: new Set(), 6: new Set() };
  for (const claim of claims) {
    for (const address of heldAddresses(claim)) {
      if ('invalid' in address) {
        figures.problems.push(`IPAMClaim ${keyString(claim.metadata)} holds "${address.invalid}", which is not an IP address`);
        continue;
      }
      const { family, value } = address;
      if (pool && !pool.usable[family]?.has(value)) {
        figures.problems.push(`IPAMClaim ${keyString(claim.metadata)} holds ${formatAddress(family, value)}, which the pool does not hand out`);
        continue;
      }
      held[family].add(value);
    }
  }
  for (const family of [4, 6] as const) {
    const capacity = pool?.usable[family]?.size;
    if (capacity === undefined && held[family].size === 0) continue;
    const count = held[family].size;
    figures.families[FAMILY[family]] =
      capacity === undefined ? { held: count } : { capacity, held: count, free: capacity > BigInt(count) ? capacity - BigInt(count) : 0n };
  }
}
