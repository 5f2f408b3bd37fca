// A network's address pool, parsed from the NAD keys OVN-Kubernetes uses: `subnets` and `excludeSubnets`, each a
// comma-separated string. The result is either a validated Pool, whose usable
// space per family is an IntervalSet of BigInts, or the full list of problems: parsing never throws and never stops
// at the first problem, so an operator sees everything wrong with a NAD at once.
//
// Which addresses of a subnet are handed out
// -------------------------------------------
// - IPv4, prefix <= 30: never the network address (first) nor the broadcast address (last).
// - IPv4 /31 and /32: every address (RFC 3021 point-to-point links have no network/broadcast address; a /32 is one
//   host).
// - IPv6, prefix <= 126: never the all-zeros address (the Subnet-Router anycast address, RFC 4291 §2.6.1, which
//   routers answer). IPv6 has no broadcast address, so the last address is handed out.
// - IPv6 /127 and /128: every address (RFC 6164 point-to-point links; a /128 is one host).
//
// The gateway: nothing is reserved implicitly. The first usable address (.1, ::1) is handed out like any other.
// Reasons: this is how the IPAM these networks otherwise use behaves (OVN-Kubernetes layer2/localnet secondary
// networks and whereabouts both hand out the first usable address and expect the router's address to be listed in
// the excludes), so a pool moved to this allocator keeps its capacity and its existing claims stay valid; many
// secondary networks (overlay layer2 between VMs) have no router at all; and where there is one it is not always
// at .1 (.254 is common), so a guessed reservation would waste an address on small subnets while still not
// protecting the real router. Users of bridge + static IPAM therefore list their gateway in `excludeSubnets`
// ("192.0.2.1" or "192.0.2.1/32").

import { type IPFamily, type ParseResult, FAMILY_BITS, familyName, formatAddress, formatCidr, parseAddress } from './address.ts';
import { IntervalSet, cmp } from './intervals.ts';

/** The pool keys as found on a NAD (annotation or config). */
export interface PoolSpec {
  /** "10.0.0.0/24,fd00::/64". OVN's "cidr/hostPrefix" form is accepted. */
  subnets?: string;
  /** Same shape; each entry a CIDR or a single address. */
  excludeSubnets?: string;
  /** The OVN-Kubernetes topology; `layer3` (a subnet per node) cannot be served by a cluster-wide pool. */
  topology?: string;
}

export interface Cidr {
  family: IPFamily;
  prefix: number;
  /** First and last address covered (network and broadcast for IPv4). */
  first: bigint;
  last: bigint;
  /** Canonical text, e.g. "10.0.0.0/24", "fd00::/64". */
  text: string;
}

/**
 * A validated pool. Treat it as immutable: the allocator copies `usable` before changing anything.
 * `families` lists the address families present, IPv4 first; an allocation takes one address of each.
 */
export interface Pool {
  families: readonly IPFamily[];
  subnets: readonly Cidr[];
  excludes: readonly Cidr[];
  /** Addresses that may be handed out: subnets minus reserved and excluded addresses. */
  usable: Readonly<Partial<Record<IPFamily, IntervalSet>>>;
  /** A normalised description; two NADs of one network must agree on it to share the pool. */
  canonical: string;
  /** Things accepted but worth telling the operator (ignored host prefix, host bits set...). */
  warnings: readonly string[];
}

export type PoolProblemCode =
  | 'NoSubnets'
  | 'InvalidSubnet'
  | 'OverlappingSubnets'
  | 'InvalidExclude'
  | 'ExcludeOutsidePool'
  | 'EmptyPool'
  | 'UnsupportedTopology';

export interface PoolProblem {
  code: PoolProblemCode;
  message: string;
  /** The offending entry, when there is one. */
  value?: string;
}

export type PoolParseResult = { ok: true; pool: Pool } | { ok: false; problems: PoolProblem[]; warnings: string[] };

export function parsePool(spec: PoolSpec): PoolParseResult {
  const problems: PoolProblem[] = [];
  const warnings: string[] = [];
  if (spec.topology?.toLowerCase() === 'layer3') {
    problems.push({
      code: 'UnsupportedTopology',
      message: 'topology layer3 gives every node its own subnet; a cluster-wide pool needs layer2 or localnet',
    });
  }
  const subnets = parseSubnets(spec.subnets, problems, warnings);
  const excludes = parseExcludes(spec.excludeSubnets, subnets, problems, warnings);
  const families = ([4, 6] as const).filter((f) => subnets.some((s) => s.family === f));
  const usable = usableSpace(families, subnets, excludes, problems);
  if (problems.length > 0) return { ok: false, problems, warnings };
  const canonical = `subnets=${subnets.map((s) => s.text).join(',')};excludeSubnets=${excludes.map((s) => s.text).join(',')}`;
  return { ok: true, pool: { families, subnets, excludes, usable, canonical, warnings } };
}

/** The subnets, sorted, each valid entry kept (an overlap is a problem, not a reason to drop one). */
function parseSubnets(raw: string | undefined, problems: PoolProblem[], warnings: string[]): Cidr[] {
  const subnets: Cidr[] = [];
  const items = splitList(raw ?? '');
  if (items.length === 0) problems.push({ code: 'NoSubnets', message: 'subnets is empty: a pool needs at least one CIDR' });
  for (const item of items) {
    const r = parseSubnetEntry(item, (w) => warnings.push(`subnets: ${w}`));
    if (!r.ok) problems.push({ code: 'InvalidSubnet', message: `subnets: ${r.message}`, value: item });
    else subnets.push(r.value);
  }
  subnets.sort(cidrOrder);
  for (let i = 1; i < subnets.length; i++) {
    // Two CIDRs are either disjoint or nested. Compare with every earlier subnet of the family (lists are short).
    for (let j = i - 1; j >= 0; j--) {
      const a = subnets[j]!;
      const b = subnets[i]!;
      if (a.family !== b.family) break;
      if (b.first <= a.last) {
        problems.push({
          code: 'OverlappingSubnets',
          message: a.text === b.text ? `subnets: ${a.text} is listed twice` : `subnets: ${a.text} and ${b.text} overlap`,
          value: b.text,
        });
        break;
      }
    }
  }
  return subnets;
}

/** The excludes that lie inside a subnet, sorted. */
function parseExcludes(raw: string | undefined, subnets: readonly Cidr[], problems: PoolProblem[], warnings: string[]): Cidr[] {
  const excludes: Cidr[] = [];
  for (const item of splitList(raw ?? '')) {
    const r = parseCidrOrAddress(item, (w) => warnings.push(`excludeSubnets: ${w}`));
    if (!r.ok) {
      problems.push({ code: 'InvalidExclude', message: `excludeSubnets: ${r.message}`, value: item });
      continue;
    }
    const ex = r.value;
    const inside = subnets.find((s) => s.family === ex.family && s.first <= ex.first && ex.last <= s.last);
    if (!inside) {
      const touching = subnets.find((s) => s.family === ex.family && s.first <= ex.last && ex.first <= s.last);
      problems.push({
        code: 'ExcludeOutsidePool',
        message: touching
          ? `excludeSubnets: ${ex.text} extends outside subnet ${touching.text}`
          : `excludeSubnets: ${ex.text} is not inside any of the subnets (${listOrNone(subnets, ex.family)})`,
        value: item,
      });
      continue;
    }
    excludes.push(ex);
  }
  return excludes.sort(cidrOrder);
}

/** Usable space per family: the subnets' host ranges minus excludes; an empty family is a problem. */
function usableSpace(
  families: readonly IPFamily[],
  subnets: readonly Cidr[],
  excludes: readonly Cidr[],
  problems: PoolProblem[],
): Partial<Record<IPFamily, IntervalSet>> {
  const usable: Partial<Record<IPFamily, IntervalSet>> = {};
  for (const family of families) {
    const own = subnets.filter((s) => s.family === family);
    const removed = IntervalSet.from(excludes.filter((e) => e.family === family).map((e) => ({ start: e.first, end: e.last })));
    const set = IntervalSet.from(own.map(hostRange)).minus(removed);
    usable[family] = set;
    if (set.size === 0n) {
      problems.push({
        code: 'EmptyPool',
        message:
          `no usable ${familyName(family)} address is left in ${own.map((s) => s.text).join(', ')}` +
          ` once ${reservedWording(family, own)}excludeSubnets are taken out`,
      });
    }
  }
  return usable;
}

/** The subnet of the pool containing an address, if any. */
export function subnetOf(pool: Pool, family: IPFamily, value: bigint): Cidr | undefined {
  return pool.subnets.find((s) => s.family === family && s.first <= value && value <= s.last);
}

export type AddressVerdict = { usable: true; subnet: Cidr } | { usable: false; code: 'AddressOutsidePool' | 'AddressExcluded'; message: string; subnet?: Cidr };

/** Whether an address may be handed out by this pool, and if not, why (for messages users read). */
export function classifyAddress(pool: Pool, family: IPFamily, value: bigint): AddressVerdict {
  const subnet = subnetOf(pool, family, value);
  if (subnet && pool.usable[family]?.has(value)) return { usable: true, subnet };
  const text = formatAddress(family, value);
  if (!subnet) {
    return {
      usable: false,
      code: 'AddressOutsidePool',
      message: pool.families.includes(family)
        ? `${text} is outside the pool (${listOrNone(pool.subnets, family)})`
        : `${text} is ${familyName(family)} but the pool has no ${familyName(family)} subnet`,
    };
  }
  const range = hostRange(subnet);
  let why: string;
  if (value < range.start) {
    why = `the ${family === 4 ? 'network' : 'subnet-router anycast'} address of ${subnet.text}`;
  } else if (value > range.end) {
    why = `the broadcast address of ${subnet.text}`;
  } else {
    const ex = pool.excludes.find((e) => e.family === family && e.first <= value && value <= e.last);
    why = ex ? `inside excludeSubnets entry ${ex.text}` : 'not usable';
  }
  return { usable: false, code: 'AddressExcluded', message: `${text} is ${why}`, subnet };
}

/** The addresses of a subnet that may be handed out before excludes (see the header comment). */
function hostRange(s: Cidr): { start: bigint; end: bigint } {
  if (!reserves(s)) return { start: s.first, end: s.last };
  return { start: s.first + 1n, end: s.family === 4 ? s.last - 1n : s.last };
}

/** Whether a subnet keeps addresses back (network/broadcast, subnet-router anycast): all but /31, /32, /127, /128. */
const reserves = (s: Cidr): boolean => s.prefix <= FAMILY_BITS[s.family] - 2;

/** The reserved addresses of subnets of one family, as the EmptyPool message names them. */
function reservedWording(family: IPFamily, subnets: Cidr[]): string {
  if (!subnets.some(reserves)) return '';
  return family === 4 ? 'network/broadcast addresses and ' : 'subnet-router anycast addresses and ';
}

function cidrOrder(a: Cidr, b: Cidr): number {
  return a.family - b.family || cmp(a.first, b.first) || a.prefix - b.prefix;
}

function listOrNone(subnets: readonly Cidr[], family: IPFamily): string {
  const own = subnets.filter((s) => s.family === family);
  return own.length > 0 ? own.map((s) => s.text).join(', ') : `no ${familyName(family)} subnet`;
}

/** A subnet: "a/p", or OVN's "a/p/hostPrefix" whose host prefix only matters for layer3 and is ignored here. */
function parseSubnetEntry(text: string, warn: (warning: string) => void): ParseResult<Cidr> {
  const parts = text.split('/');
  if (parts.length === 3) {
    const [addr, prefix, hostPrefix] = parts as [string, string, string];
    const p = Number(prefix);
    const h = Number(hostPrefix);
    const bits = addr.includes(':') ? 128 : 32;
    if (!/^[0-9]{1,3}$/.test(hostPrefix) || h < p || h > bits) {
      return { ok: false, message: `"${text}": host prefix /${hostPrefix} must be between /${prefix} and /${bits}` };
    }
    const r = parseCidrOrAddress(`${addr}/${prefix}`, warn);
    if (r.ok) warn(`host prefix /${hostPrefix} of "${text}" is ignored (it only matters for layer3)`);
    return r;
  }
  if (parts.length !== 2) return { ok: false, message: `"${text}" is not a CIDR (expected address/prefix, e.g. 192.0.2.0/24)` };
  return parseCidrOrAddress(text, warn);
}

/** "a/p" or a single address (→ /32, /128). Host bits are masked off, with a warning. */
function parseCidrOrAddress(text: string, warn: (warning: string) => void): ParseResult<Cidr> {
  const r = parseAddress(text, { allowPrefix: true });
  if (!r.ok) return r;
  const { family, value } = r.value;
  const prefix = r.value.prefix ?? FAMILY_BITS[family];
  const size = 1n << BigInt(FAMILY_BITS[family] - prefix);
  const first = value - (value % size);
  const cidr: Cidr = { family, prefix, first, last: first + size - 1n, text: formatCidr(family, first, prefix) };
  if (value !== first) warn(`"${text}" has host bits set; it is read as ${cidr.text}`);
  return { ok: true, value: cidr };
}

/** A comma-separated list, each entry trimmed, empty entries dropped. */
export function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}
