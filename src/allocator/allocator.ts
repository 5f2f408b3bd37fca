// In-memory allocation state for ONE network's pool. Pure: no Kubernetes I/O, no clocks, no randomness. The
// caller (the allocator loop) owns the mapping between claims and keys, writes claim status, and calls
// `rebuild` whenever it has to trust the claims again (start-up, pool change, resync).
//
// Rules:
// - Claims are the source of truth. `rebuild` takes what the claims hold, as they hold it. Two claims holding one
//   address are both reported and neither is changed; allocating for either returns IPAddressConflict until one
//   of them is released.
// - An address is never handed out twice: only free addresses are handed out, and an address becomes free only
//   when its last holder is released.
// - Allocation is idempotent per key: a key that holds addresses gets exactly the strings it holds back. A key
//   missing a family of the pool (e.g. IPv6 was added to the network) gets the missing family added; the
//   addresses it holds never change.
// - One address per family of the pool, all or nothing.
// - Dynamic allocation takes the LOWEST free address of each family. Deterministic: the next answer depends only
//   on which addresses are held, so a restarted controller (rebuilt from the claims) continues exactly where the
//   previous one stopped.
// - A static request (VMI annotation `network.kubevirt.io/addresses`) is honoured when each address is inside the
//   pool, not excluded/reserved, and not held by another key; otherwise it is refused with the reason. A request
//   covering only some families gets the others allocated dynamically.

import { type IPFamily, familyName, formatAddress, formatCidr, parseAddress } from '../ip/address.ts';
import { IntervalSet, cmp } from '../ip/intervals.ts';
import { type Pool, classifyAddress, subnetOf } from '../ip/pool.ts';

/** What a claim holds, as written in `IPAMClaim.status.ips` ("10.0.0.5/24"; a bare address is accepted). */
export interface ClaimAddresses {
  key: string;
  ips: readonly string[];
}

export interface AddressConflict {
  /** The address (no prefix). */
  ip: string;
  /** Every key holding it, sorted. */
  keys: string[];
}

export type RebuildProblemCode = 'InvalidAddress' | 'AddressOutsidePool' | 'AddressExcluded' | 'MultipleAddressesPerFamily' | 'DuplicateKey';

export interface RebuildProblem {
  key: string;
  ip?: string;
  code: RebuildProblemCode;
  message: string;
}

export interface RebuildReport {
  /** Addresses held by more than one claim. */
  conflicts: AddressConflict[];
  /** Claims holding something this pool would not hand out; they keep holding it (reported, never changed). */
  problems: RebuildProblem[];
}

export type AllocationErrorCode =
  /** No free address left in (at least) one family of the pool. */
  | 'SubnetExhausted'
  /** The key holds an address another key holds too (found by `rebuild`). */
  | 'IPAddressConflict'
  /** A requested address is held by another key. */
  | 'AddressInUse'
  /** A requested (or held) address is not inside any subnet of the pool. */
  | 'AddressOutsidePool'
  /** A requested (or held) address is a network/broadcast/anycast address, the gateway, or inside an exclude. */
  | 'AddressExcluded'
  /** The key holds a string that is not an address (a hand-edited status). */
  | 'InvalidAddress'
  /** The request itself is malformed: not an address, two addresses of one family, wrong prefix length. */
  | 'InvalidRequest';

export type AllocateResult =
  | {
      ok: true;
      /** CIDR form with the prefix of the pool subnet, one per family, IPv4 first. */
      ips: string[];
      /** False when the key already held exactly these (nothing to write). */
      changed: boolean;
      /** E.g. a static request that differs from what the key already holds (it is not applied). */
      warnings: string[];
    }
  | Refusal;

export type Refusal = { ok: false; error: AllocationErrorCode; message: string };

export interface AllocateOptions {
  /** Specific addresses, bare or CIDR form, at most one per family. Empty means "any free address". */
  requested?: readonly string[];
}

export interface FamilyStats {
  family: IPFamily;
  /** Addresses the pool may hand out. */
  size: bigint;
  /** Of those, held by at least one key. */
  used: bigint;
  free: bigint;
  /** Distinct addresses held that the pool would not hand out (outside, excluded: see RebuildReport). */
  heldUnusable: number;
  /** Free intervals: a measure of fragmentation. */
  freeIntervals: number;
}

export interface AllocatorStats {
  /** Keys holding at least one address (or an invalid string). */
  claims: number;
  /** Addresses held by more than one key. */
  conflicts: number;
  families: FamilyStats[];
}

interface Held {
  family: IPFamily;
  value: bigint;
  /** As stored in the claim (or as handed out). */
  text: string;
}

interface ClaimState {
  held: Held[];
  /** Strings of the claim that are not addresses. */
  invalid: string[];
}

interface FamilyState {
  free: IntervalSet;
  /** address → keys holding it (more than one only after a rebuild found a conflict). */
  holders: Map<bigint, string[]>;
  /** The addresses with more than one holder, kept in step so that a pass does not scan every holder for them. */
  conflicted: Set<bigint>;
}

export class PoolAllocator {
  readonly pool: Pool;
  #claims = new Map<string, ClaimState>();
  #families = new Map<IPFamily, FamilyState>();

  constructor(pool: Pool) {
    this.pool = pool;
    this.#reset();
  }

  /** Replaces the whole state with what the claims hold. */
  rebuild(claims: Iterable<ClaimAddresses>): RebuildReport {
    this.#reset();
    const problems: RebuildProblem[] = [];
    for (const { key, ips } of claims) {
      let state = this.#claims.get(key);
      if (state) {
        const message = `claim ${key} is listed more than once; its addresses are merged`;
        problems.push({ key, code: 'DuplicateKey', message });
      } else {
        state = { held: [], invalid: [] };
      }
      for (const text of Array.isArray(ips) ? ips : []) {
        const r = parseAddress(text, { allowPrefix: true });
        if (!r.ok) {
          state.invalid.push(String(text));
          problems.push({ key, ip: String(text), code: 'InvalidAddress', message: `claim ${key}: ${r.message}` });
          continue;
        }
        const { family, value } = r.value;
        if (state.held.some((h) => h.family === family && h.value === value)) continue;
        if (state.held.some((h) => h.family === family)) {
          problems.push({
            key,
            ip: text,
            code: 'MultipleAddressesPerFamily',
            message: `claim ${key} holds more than one ${familyName(family)} address (${text} is one of them)`,
          });
        }
        const verdict = classifyAddress(this.pool, family, value);
        if (!verdict.usable) {
          problems.push({ key, ip: text, code: verdict.code, message: `claim ${key}: ${verdict.message}` });
        }
        state.held.push({ family, value, text });
        const fam = this.#family(family);
        const others = fam.holders.get(value);
        if (others) {
          others.push(key);
          fam.conflicted.add(value);
        } else fam.holders.set(value, [key]);
      }
      if (state.held.length > 0 || state.invalid.length > 0) this.#claims.set(key, state);
    }
    for (const family of this.pool.families) {
      const fam = this.#family(family);
      fam.free = this.#usable(family).withoutSorted([...fam.holders.keys()].sort(cmp));
    }
    return { conflicts: this.conflicts(), problems };
  }

  allocate(key: string, opts: AllocateOptions = {}): AllocateResult {
    const state = this.#claims.get(key);
    const refusal = state && this.#checkHeld(key, state);
    if (refusal) return refusal;
    const held = state?.held ?? [];
    const missing = this.pool.families.filter((f) => !held.some((h) => h.family === f));
    const requested = opts.requested ?? [];
    if (missing.length === 0) return { ok: true, ips: held.map((h) => h.text), changed: false, warnings: this.#requestMismatch(key, held, requested) };

    const wanted = parseRequest(requested);
    if (!wanted.ok) return wanted;
    for (const [family, want] of wanted.byFamily) {
      if (this.pool.families.includes(family)) continue;
      const verdict = classifyAddress(this.pool, family, want.value); // a family the pool does not have
      if (!verdict.usable) return refuse(verdict.code, `requested ${verdict.message}`);
    }
    const picks: Held[] = [];
    const exhausted: IPFamily[] = [];
    for (const family of missing) {
      const pick = this.#pick(family, wanted.byFamily.get(family));
      if (pick === undefined) exhausted.push(family);
      else if ('ok' in pick) return pick;
      else picks.push(pick);
    }
    if (exhausted.length > 0) return refuse('SubnetExhausted', exhausted.map((f) => this.#exhausted(f)).join('; '));
    const extra = [...wanted.byFamily].filter(([family]) => !missing.includes(family)).map(([, w]) => w.text);
    const warnings = this.#requestMismatch(key, held, extra);

    // Commit: every check passed, so the whole set is taken at once.
    const next: ClaimState = state ?? { held: [], invalid: [] };
    for (const pick of picks) this.#take(key, next, pick);
    next.held.sort((a, b) => a.family - b.family);
    this.#claims.set(key, next);
    return { ok: true, ips: next.held.map((h) => h.text), changed: true, warnings };
  }

  /**
   * Marks free addresses of the pool as held by `key` without any request or claim: a running VM's address that no
   * claim records, kept from being handed out. Addresses already held, not in the pool, excluded or unreadable are
   * skipped (none of them can be handed out anyway). Returns the ones it took.
   */
  hold(key: string, ips: Iterable<string>): string[] {
    const state = this.#claims.get(key) ?? { held: [], invalid: [] };
    const taken: string[] = [];
    for (const text of ips) {
      const r = parseAddress(text, { allowPrefix: true });
      if (!r.ok || !this.pool.families.includes(r.value.family)) continue;
      const { family, value } = r.value;
      const fam = this.#family(family);
      if (fam.holders.has(value) || !fam.free.has(value)) continue;
      this.#take(key, state, { family, value, text });
      taken.push(text);
    }
    if (state.held.length > 0) this.#claims.set(key, state);
    return taken;
  }

  /** Frees everything the key holds (an address still held by another key stays taken). Returns what it held. */
  release(key: string): string[] {
    const state = this.#claims.get(key);
    if (!state) return [];
    this.#claims.delete(key);
    for (const { family, value } of state.held) {
      const fam = this.#family(family);
      const rest = (fam.holders.get(value) ?? []).filter((k) => k !== key);
      if (rest.length < 2) fam.conflicted.delete(value);
      if (rest.length > 0) fam.holders.set(value, rest);
      else if (fam.holders.delete(value) && this.#usable(family).has(value)) fam.free.add(value);
    }
    return [...state.held.map((h) => h.text), ...state.invalid];
  }

  /** Every key holding an address (bare or CIDR form), sorted; [] when free or not an address. */
  holdersOf(ip: string): string[] {
    const r = parseAddress(ip, { allowPrefix: true });
    if (!r.ok) return [];
    return [...(this.#families.get(r.value.family)?.holders.get(r.value.value) ?? [])].sort();
  }

  /** What a key holds, as stored; undefined for an unknown key. */
  ipsOf(key: string): string[] | undefined {
    const state = this.#claims.get(key);
    return state ? [...state.held.map((h) => h.text), ...state.invalid] : undefined;
  }

  /** Everything held, by key (sorted): what the claims' status should say. `rebuild(claims())` is a no-op. */
  claims(): ClaimAddresses[] {
    return [...this.#claims.keys()].sort().map((key) => ({ key, ips: this.ipsOf(key)! }));
  }

  /** Addresses held by more than one key: IPv4 first, then by value. */
  conflicts(): AddressConflict[] {
    return ([4, 6] as const).flatMap((family) => {
      const fam = this.#families.get(family);
      return [...(fam?.conflicted ?? [])].sort(cmp).map((value) => ({ ip: formatAddress(family, value), keys: [...fam!.holders.get(value)!].sort() }));
    });
  }

  stats(): AllocatorStats {
    const families: FamilyStats[] = [];
    // The pool's families come first (#reset); a family outside the pool can hold addresses too (a claim from before
    // the pool changed), with nothing usable.
    for (const [family, fam] of this.#families) {
      const size = this.#usable(family).size;
      const used = size - fam.free.size;
      families.push({ family, size, used, free: fam.free.size, heldUnusable: fam.holders.size - Number(used), freeIntervals: fam.free.intervalCount });
    }
    return { claims: this.#claims.size, conflicts: this.conflicts().length, families };
  }

  #reset(): void {
    this.#claims = new Map();
    this.#families = new Map();
    for (const family of this.pool.families) this.#family(family);
  }

  #family(family: IPFamily): FamilyState {
    let fam = this.#families.get(family);
    if (!fam) {
      fam = { free: this.#usable(family).clone(), holders: new Map(), conflicted: new Set() };
      this.#families.set(family, fam);
    }
    return fam;
  }

  #usable(family: IPFamily): IntervalSet {
    return this.pool.usable[family] ?? EMPTY;
  }

  /** Why a key's existing holding cannot be confirmed, if it cannot. */
  #checkHeld(key: string, state: ClaimState): Refusal | undefined {
    if (state.invalid.length > 0) {
      return refuse('InvalidAddress', `claim ${key} holds ${state.invalid.map((s) => JSON.stringify(s)).join(', ')}, not an IP address`);
    }
    for (const h of state.held) {
      const holders = this.#family(h.family).holders.get(h.value) ?? [];
      if (holders.length > 1) {
        const others = holders.filter((k) => k !== key).sort();
        return refuse('IPAddressConflict', `${formatAddress(h.family, h.value)} is held by ${key} and also by ${others.join(', ')}`);
      }
    }
    for (const h of state.held) {
      const verdict = classifyAddress(this.pool, h.family, h.value);
      if (!verdict.usable) return refuse(verdict.code, `claim ${key}: ${verdict.message}`);
    }
    return undefined;
  }

  /** The address a missing family gets: the requested one if it may be handed out, else the lowest free one (none: undefined). */
  #pick(family: IPFamily, want: RequestedAddress | undefined): Held | Refusal | undefined {
    const fam = this.#family(family);
    if (want === undefined) {
      const value = fam.free.first();
      return value === undefined ? undefined : { family, value, text: formatCidr(family, value, subnetOf(this.pool, family, value)!.prefix) };
    }
    const verdict = classifyAddress(this.pool, family, want.value);
    if (!verdict.usable) return refuse(verdict.code, `requested ${verdict.message}`);
    if (want.prefix !== undefined && want.prefix !== verdict.subnet.prefix) {
      const subnet = verdict.subnet;
      return refuse('InvalidRequest', `requested ${want.text}, but the pool subnet is ${subnet.text}: give the address alone or with /${subnet.prefix}`);
    }
    const holders = fam.holders.get(want.value);
    if (holders) return refuse('AddressInUse', `requested ${formatAddress(family, want.value)} is already held by ${holders.join(', ')}`);
    return { family, value: want.value, text: formatCidr(family, want.value, verdict.subnet.prefix) };
  }

  #take(key: string, state: ClaimState, h: Held): void {
    const fam = this.#family(h.family);
    fam.free.delete(h.value);
    fam.holders.set(h.value, [key]);
    state.held.push(h);
  }

  #exhausted(family: IPFamily): string {
    const subnets = this.pool.subnets.filter((s) => s.family === family).map((s) => s.text);
    return `no free ${familyName(family)} address left in ${subnets.join(', ')} (${this.#usable(family).size} usable, all in use)`;
  }

  #requestMismatch(key: string, held: readonly Held[], requested: readonly string[]): string[] {
    if (requested.length === 0) return [];
    const heldSet = new Set(held.map((h) => `${h.family}/${h.value}`));
    const same =
      requested.length === held.length &&
      requested.every((text) => {
        const r = parseAddress(text, { allowPrefix: true });
        return r.ok && heldSet.has(`${r.value.family}/${r.value.value}`);
      });
    if (same) return [];
    return [
      `requested ${requested.join(', ')} not applied: ${key} already holds ${held.map((h) => h.text).join(', ')}` +
        ` and the addresses of a claim never change (delete the claim to get new ones)`,
    ];
  }
}

const EMPTY = IntervalSet.from([]);

interface RequestedAddress {
  value: bigint;
  prefix?: number;
  text: string;
}

/** Syntax only: whether each requested address is usable is checked for the families actually allocated. */
function parseRequest(requested: readonly string[]): { ok: true; byFamily: Map<IPFamily, RequestedAddress> } | Refusal {
  const byFamily = new Map<IPFamily, RequestedAddress>();
  for (const text of requested) {
    const r = parseAddress(text, { allowPrefix: true });
    if (!r.ok) return refuse('InvalidRequest', `requested address ${r.message}`);
    const { family, value, prefix } = r.value;
    if (byFamily.has(family)) return refuse('InvalidRequest', `requested ${requested.join(', ')}: at most one ${familyName(family)} address per interface`);
    byFamily.set(family, prefix === undefined ? { value, text } : { value, prefix, text });
  }
  return { ok: true, byFamily };
}

function refuse(error: AllocationErrorCode, message: string): Refusal {
  return { ok: false, error, message };
}
