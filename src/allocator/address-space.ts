// The address space of each persistent network, as an operator asks about it: how many addresses the IPAM may hand
// out, how many the VMs' claims hold, and which claims wait or were refused. Pure: it reads the NADs and claims a
// cache (the controller's) or a list (`persistent-ips status --networks`) gives it, so the metric and the command
// show the same figures, and a steady state costs no API read.
//
// What "capacity" counts, per IPAM
// --------------------------------
// - Built-in allocator: its pool (pool.ts), and only while it serves the network (nad.ts resolveNetwork: NADs that
//   disagree get no new address, so their capacity is unknown).
// - OVN-Kubernetes (v1.3 cluster manager, PreconfiguredUDNAddresses off, its default): per subnet the addresses after
//   the network address, at most 65,536 of them (its bitmap's limit), without the IPv4 broadcast address; none in an
//   IPv4 /31 or /32 or an IPv6 /127 or /128; minus `excludeSubnets`, and on a primary layer2 network minus each
//   subnet's .1 and .2 (gateway, management port). Layer3 gives each node its own subnet: no network-wide figure.
// - Any other IPAM, or a NAD that names no subnet: unknown, and said so rather than guessed.
// "Held" is what claims' `status.ips` record. On OVN-Kubernetes, pods on the same network that name no claim hold
// addresses too; no claim shows them, so "free" is an upper bound there (docs/metrics.md).

import { IPS_ALLOCATED_CONDITION } from '../claims/constants.ts';
import { isOvnKubernetes, parseNadConfig } from '../claims/nad-config.ts';
import { keyString } from '../kube/key.ts';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';
import { FAMILY_BITS, type IPFamily, formatAddress, parseAddress } from '../ip/address.ts';
import { IntervalSet } from '../ip/intervals.ts';
import { resolveNetwork } from './nad.ts';
import { type Cidr, type Pool, parsePool } from '../ip/pool.ts';

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

/** What may be handed out, per family; undefined when unknown (then `unknownBecause` is set). */
type Usable = Partial<Record<IPFamily, IntervalSet>>;

/** The figures of every network with a NAD that allows persistent IPs, sorted by network name. */
export function addressSpace(nads: readonly NetworkAttachmentDefinition[], claims: readonly IPAMClaim[]): NetworkFigures[] {
  // Every NAD of a network counts for its IPAM (the allocator refuses a network whose NADs disagree), but only
  // those that allow persistent IPs make it a persistent network.
  const byNetwork = Map.groupBy(
    nads.filter((nad) => parseNadConfig(nad).networkName !== undefined),
    (nad) => parseNadConfig(nad).networkName!,
  );
  const claimsByNetwork = Map.groupBy(
    claims.filter((claim) => typeof claim.spec?.network === 'string'),
    (claim) => claim.spec.network,
  );
  return [...byNetwork]
    .filter(([, of]) => of.some((nad) => parseNadConfig(nad).allowPersistentIPs))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([network, of]) => networkFigures(network, of, claimsByNetwork.get(network) ?? []));
}

function networkFigures(network: string, nads: readonly NetworkAttachmentDefinition[], claims: readonly IPAMClaim[]): NetworkFigures {
  const ovn = nads.some((nad) => isOvnKubernetes(parseNadConfig(nad)));
  const allocator = ovn ? undefined : resolveNetwork(network, nads);
  const figures: NetworkFigures = {
    network,
    ipam: ovn ? 'ovn-kubernetes' : allocator?.kind !== 'unmanaged' ? 'allocator' : 'other',
    nads: nads
      .filter((nad) => parseNadConfig(nad).allowPersistentIPs)
      .map((nad) => keyString(nad.metadata))
      .sort(),
    subnets: [],
    families: {},
    claims: { allocated: 0, pending: 0, refused: {} },
    refusedClaims: [],
    problems: [],
  };
  let usable: Usable | undefined;
  if (allocator?.kind === 'ready') {
    figures.subnets = allocator.pool.subnets.map((s) => s.text);
    usable = allocator.pool.usable;
  } else if (allocator?.kind === 'invalid') {
    unknown(figures, `the built-in allocator hands out no new address on it: ${[...new Set([...allocator.problems.values()].flat())].join('; ')}`, true);
  } else if (ovn) {
    usable = ovnUsable(figures, nads);
  } else {
    unknown(figures, 'the IPAM of this network is neither OVN-Kubernetes nor the built-in allocator');
  }
  countClaims(figures, claims);
  countHeld(figures, usable, claims);
  return figures;
}

function unknown(figures: NetworkFigures, why: string, problem = false): undefined {
  figures.unknownBecause = why;
  if (problem) figures.problems.push(why);
  return undefined;
}

/** OVN-Kubernetes' allocatable addresses: the one pool every NAD of the network describes, by its range rules. */
function ovnUsable(figures: NetworkFigures, nads: readonly NetworkAttachmentDefinition[]): Usable | undefined {
  const pools = new Map<string, { pool: Pool; primary: boolean }>();
  for (const nad of nads) {
    const config = parseNadConfig(nad);
    if (!isOvnKubernetes(config)) continue;
    const where = `NetworkAttachmentDefinition ${keyString(nad.metadata)}`;
    if (config.topology?.toLowerCase() === 'layer3')
      return unknown(figures, 'topology layer3 gives every node its own subnet: there is no network-wide figure');
    if (config.subnets.length === 0) return unknown(figures, `${where} names no subnet`);
    const parsed = parsePool({ subnets: config.subnets.join(','), excludeSubnets: config.excludeSubnets.join(',') });
    if (!parsed.ok) return unknown(figures, `${where}: ${parsed.problems.map((p) => p.message).join('; ')}`, true);
    const primary = config.role === 'primary' && config.topology?.toLowerCase() === 'layer2';
    pools.set(`${parsed.pool.canonical}${primary ? ';primary layer2' : ''}`, { pool: parsed.pool, primary });
  }
  if (pools.size > 1)
    return unknown(figures, `the NetworkAttachmentDefinitions of the network describe different pools: ${[...pools.keys()].join(' | ')}`, true);
  const { pool, primary } = pools.values().next().value!;
  figures.subnets = pool.subnets.map((s) => s.text);
  const usable: Usable = {};
  for (const family of pool.families) {
    const subnets = pool.subnets.filter((s) => s.family === family);
    // On a primary layer2 network each subnet's .1 and .2 are the gateway's and the management port's.
    const infrastructure = primary ? subnets.map((s) => ({ start: s.first + 1n, end: s.first + 2n })) : [];
    const excludes = pool.excludes.filter((e) => e.family === family).map((e) => ({ start: e.first, end: e.last }));
    usable[family] = IntervalSet.from(subnets.map(ovnRange)).minus(IntervalSet.from([...excludes, ...infrastructure]));
  }
  return usable;
}

/** What OVN-Kubernetes' range allocator hands out of one subnet (pkg/allocator/ip NewAllocatorCIDRRange). */
function ovnRange(s: Cidr): { start: bigint; end: bigint } {
  const hostBits = FAMILY_BITS[s.family] - s.prefix;
  const size = hostBits <= 1 ? 0n : 1n << BigInt(hostBits);
  const count = (size < 65_536n ? size : 65_536n) - 1n - (s.family === 4 ? 1n : 0n);
  return { start: s.first + 1n, end: s.first + count };
}

function countClaims(figures: NetworkFigures, claims: readonly IPAMClaim[]): void {
  for (const claim of claims) {
    const condition = claim.status?.conditions?.find((c) => c.type === IPS_ALLOCATED_CONDITION);
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

/** At most this many examples in a problem: a shrunk subnet under 3,000 claims is one line, not 3,000. */
const EXAMPLES = 3;

function summary(count: number, what: string, examples: readonly string[]): string[] {
  if (count === 0) return [];
  const more = count > EXAMPLES ? `, and ${count - EXAMPLES} more` : '';
  return [`${what}: ${examples.slice(0, EXAMPLES).join('; ')}${more}`];
}

/**
 * Distinct held addresses per family. An address the pool does not hand out, or one held by two claims (the failure
 * this project exists to prevent), is a problem, never hidden in a count and never a negative "free".
 */
function countHeld(figures: NetworkFigures, usable: Usable | undefined, claims: readonly IPAMClaim[]): void {
  const holder: Record<IPFamily, Map<bigint, string>> = { 4: new Map(), 6: new Map() };
  const outside: string[] = [];
  const invalid: string[] = [];
  const twice = new Map<string, Set<string>>();
  for (const claim of claims) {
    const key = keyString(claim.metadata);
    for (const address of heldAddresses(claim)) {
      if ('invalid' in address) {
        invalid.push(`${key} holds "${address.invalid}"`);
        continue;
      }
      const { family, value } = address;
      const text = formatAddress(family, value);
      if (usable && !usable[family]?.has(value)) {
        outside.push(`${key} holds ${text}`);
        continue;
      }
      const first = holder[family].get(value);
      if (first === undefined) holder[family].set(value, key);
      else if (first !== key) twice.set(text, (twice.get(text) ?? new Set([first])).add(key));
    }
  }
  figures.problems.push(
    ...summary(
      twice.size,
      `${twice.size} address(es) held by more than one IPAMClaim`,
      [...twice].map(([text, keys]) => `${text} by ${[...keys].join(', ')}`),
    ),
    ...summary(outside.length, `${outside.length} address(es) in IPAMClaims that the pool does not hand out`, outside),
    ...summary(invalid.length, `${invalid.length} IPAMClaim address(es) that are not IP addresses`, invalid),
  );
  for (const family of [4, 6] as const) {
    const capacity = usable?.[family]?.size;
    const count = holder[family].size;
    if (capacity === undefined && count === 0) continue;
    figures.families[FAMILY[family]] =
      capacity === undefined ? { held: count } : { capacity, held: count, free: capacity > BigInt(count) ? capacity - BigInt(count) : 0n };
  }
}
