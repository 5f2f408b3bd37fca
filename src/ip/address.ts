// IP address text <-> BigInt. Validation is delegated to ip-cidr (and its ip-address base); everything after
// parsing is plain BigInt arithmetic, so address maths never depends on enumerating a range.

import IPCIDR from 'ip-cidr';

export type IPFamily = 4 | 6;

export const FAMILY_BITS: Readonly<Record<IPFamily, number>> = { 4: 32, 6: 128 };

/** An address, optionally with the prefix length it was written with ("10.0.0.5/24" → prefix 24). */
export interface ParsedAddress {
  family: IPFamily;
  value: bigint;
  prefix?: number;
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; message: string };

const PREFIX_RE = /^(?:0|[1-9][0-9]{0,2})$/;

/**
 * Parses "192.0.2.1", "2001:db8::1", or either with a "/prefix". Never throws.
 *
 * Refused on purpose, although ip-address accepts them: zone indexes ("fe80::1%eth0", meaningless for a pool),
 * IPv4-embedded IPv6 text ("::ffff:192.0.2.1", which ip-cidr silently turns into an IPv4 address), IPv4 octets
 * with leading zeros (ambiguous: octal for some parsers), and surrounding spaces (callers trim list items).
 */
export function parseAddress(input: unknown, opts: { allowPrefix?: boolean } = {}): ParseResult<ParsedAddress> {
  if (typeof input !== 'string') return { ok: false, message: `expected a string, got ${describe(input)}` };
  if (input === '') return { ok: false, message: 'empty address' };
  const parts = input.split('/');
  if (parts.length > 2) return { ok: false, message: `"${input}" has more than one "/"` };
  const [addr = '', prefixText] = parts;
  if (prefixText !== undefined && !opts.allowPrefix) {
    return { ok: false, message: `"${input}" is a CIDR, expected a single address` };
  }
  if (addr.includes('%')) return { ok: false, message: `"${input}": zone indexes (%...) are not supported` };
  const v6 = addr.includes(':');
  if (v6 && addr.includes('.')) {
    return {
      ok: false,
      message: `"${input}": IPv4-embedded IPv6 notation is not supported, write the address in hexadecimal groups`,
    };
  }
  const family: IPFamily = v6 ? 6 : 4;
  const value = canonicalValue(family, addr) ?? libraryValue(family, addr);
  if (typeof value === 'string') return { ok: false, message: `"${input}" ${value}` };
  if (prefixText === undefined) return { ok: true, value: { family, value } };
  if (!PREFIX_RE.test(prefixText) || Number(prefixText) > FAMILY_BITS[family]) {
    return {
      ok: false,
      message: `"${input}" has an invalid prefix length (expected 0..${FAMILY_BITS[family]})`,
    };
  }
  return { ok: true, value: { family, value, prefix: Number(prefixText) } };
}

/**
 * Fast path for the canonical text this module writes (what claims hold): a quick split, trusted only when
 * formatting the result gives back exactly the input. formatAddress is tested to agree with ip-address's
 * correctForm, so this accepts nothing the library would read differently; anything else goes to the library.
 */
function canonicalValue(family: IPFamily, addr: string): bigint | undefined {
  if (family === 4) {
    const parts = addr.split('.');
    if (parts.length !== 4) return undefined;
    let n = 0;
    for (const p of parts) {
      const octet = Number(p);
      if (p === '' || !Number.isInteger(octet) || octet < 0 || octet > 255) return undefined;
      n = n * 256 + octet;
    }
    return formatV4(n) === addr ? BigInt(n) : undefined;
  }
  if (addr.length > 39) return undefined;
  const halves = addr.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves[1] ? halves[1].split(':') : [];
  const gap = 8 - head.length - tail.length;
  if (halves.length === 1 ? gap !== 0 : gap < 1) return undefined;
  const groups: number[] = [];
  for (const g of head) groups.push(hexGroup(g));
  for (let k = 0; k < gap && halves.length === 2; k++) groups.push(0);
  for (const g of tail) groups.push(hexGroup(g));
  if (groups.some((g) => g < 0) || formatV6(groups) !== addr) return undefined;
  let value = 0n;
  for (let k = 0; k < 8; k += 2) value = (value << 32n) | BigInt(groups[k]! * 0x10000 + groups[k + 1]!);
  return value;
}

function hexGroup(g: string): number {
  return /^[0-9a-f]{1,4}$/.test(g) ? Number.parseInt(g, 16) : -1;
}

/** Validation by ip-cidr / ip-address; returns the value or what is wrong. */
function libraryValue(family: IPFamily, addr: string): bigint | string {
  let parsed: ReturnType<typeof IPCIDR.createAddress>;
  try {
    parsed = IPCIDR.createAddress(addr);
  } catch (err) {
    return `is not a valid IP address (${errorText(err)})`;
  }
  if (parsed.v4 !== (family === 4)) return 'is not a valid IP address';
  return BigInt(parsed.bigInteger().toString());
}

/** The family of an address (bare or CIDR form); undefined when it is not one. */
export function familyOfAddress(ip: unknown): IPFamily | undefined {
  const r = parseAddress(ip, { allowPrefix: true });
  return r.ok ? r.value.family : undefined;
}

/** Canonical text: dotted quad, or RFC 5952 IPv6 (lowercase, longest run of ≥ 2 zero groups as "::"). */
export function formatAddress(family: IPFamily, value: bigint): string {
  if (family === 4) return formatV4(Number(value));
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((value >> BigInt(i * 16)) & 0xffffn));
  return formatV6(groups);
}

function formatV4(n: number): string {
  return `${(n >>> 24) & 0xff}.${(n >>> 16) & 0xff}.${(n >>> 8) & 0xff}.${n & 0xff}`;
}

function formatV6(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLen = 1; // a single zero group is never compressed
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (gs: readonly number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

/** "10.0.0.5/24" → "10.0.0.5"; a bare address as it is. */
export function bareAddress(ip: string): string {
  const slash = ip.indexOf('/');
  return slash < 0 ? ip : ip.slice(0, slash);
}

/** "10.0.0.5/24" */
export function formatCidr(family: IPFamily, value: bigint, prefix: number): string {
  return `${formatAddress(family, value)}/${prefix}`;
}

export function familyName(family: IPFamily): string {
  return family === 4 ? 'IPv4' : 'IPv6';
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v;
}

function errorText(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.replace(/\.$/, '');
}
