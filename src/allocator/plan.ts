// One pass over one network, as a pure function: given the pool and every claim of the network (as the caches and
// our own recent writes show them) with what each claim's owner asks for, which claim statuses to write and what to
// tell people. The allocator loop (loop.ts) gathers the input, writes the plan, and comes back on the next change.
//
// Rules (docs/allocator.md):
// - The claims are the truth: the pool's state is rebuilt from every claim's status.ips on every pass. Two claims
//   holding one address are both reported (IPAddressConflict, Events on both owners) and neither is changed.
// - A claim without addresses gets one per family of the pool: the requested ones when its owner asks, else the
//   lowest free ones. Claims are served oldest first (creationTimestamp, then namespace/name), so a pass repeated
//   after a crash between choosing and recording makes the same choices.
// - An empty claim whose VMI runs takes the address its running launcher pod has (network-status, running-address.ts),
//   never a new one: when that address is outside the pool, excluded or held by another claim, the claim is refused
//   and reported. Such claims are served before any other, so a dynamic choice never takes the address a VM has.
//   The addresses of running VMs whose claims do not record them (and will not in this pass) are held back. While an
//   empty claim's VM may be running with an address nobody could read (its pods unreadable, its owner not in the
//   cache yet), no new address is handed out on the network at all: any free-looking one could be that one.
// - A claim keeps its addresses forever; a request that differs from them is reported, never applied.
// - Every claim of the network ends with the condition IPsAllocated: True/SuccessfulAllocation when it holds valid
//   addresses, False with OVN-Kubernetes' reasons otherwise. A claim whose condition already says so is not written:
//   a steady state costs no write.

import type { IPAMClaim, IPAMClaimCondition } from '../kube/types.ts';
import { familyOfAddress, parseAddress } from './address.ts';
import { type AllocationErrorCode, PoolAllocator, type RebuildReport } from './allocator.ts';
import type { Pool } from './pool.ts';
import type { OwnerRequest, OwnerTarget } from './requests.ts';
import type { RunningAddresses } from './running-address.ts';

export const CONDITION_TYPE = 'IPsAllocated';

/**
 * The IPAMClaim condition `IPsAllocated` reason for each outcome. The claim API knows four reasons; refusals that
 * are not conflicts or exhaustion map to InternalError (as OVN-Kubernetes does for its unclassified allocation
 * errors) and the condition message carries the precise reason.
 */
export const ALLOCATION_CONDITION_REASON: Readonly<Record<AllocationErrorCode | 'Success', string>> = {
  Success: 'SuccessfulAllocation',
  SubnetExhausted: 'SubnetExhausted',
  IPAddressConflict: 'IPAddressConflict',
  AddressInUse: 'IPAddressConflict',
  AddressOutsidePool: 'InternalError',
  AddressExcluded: 'InternalError',
  InvalidAddress: 'InternalError',
  InvalidRequest: 'InternalError',
};

export interface PlanClaim {
  /** `namespace/name` */
  key: string;
  claim: IPAMClaim;
  request: OwnerRequest;
  owner?: OwnerTarget;
  /** For an empty claim of a running VMI: what its running launcher pods have on the network (absent: not looked). */
  running?: RunningAddresses;
  /** The VM network (`spec.networks[].name`) of the owner the claim is for, when known. */
  network?: string;
}

export interface PlanInput {
  network: string;
  pool: Pool;
  claims: readonly PlanClaim[];
  /** Addresses launcher pods use on the network that no claim holds (running-address.ts): held back from the pool. */
  inUse?: readonly InUse[];
  /** Some of those could not be read (why): no new address is handed out on the network. */
  inUseUnknown?: string;
  /** RFC 3339, for lastTransitionTime. */
  now: string;
}

/** The addresses one running VMI's launcher pods use on the network, while no claim of the VM holds any. */
export interface InUse {
  /** Names the VMI, for messages ("held by ..."). */
  holder: string;
  ips: readonly string[];
  /** The VM's own claims of the network (keys), which may take these addresses in this pass. */
  claims?: readonly string[];
}

/** The status to write to one claim. `ips` is what status.ips must hold afterwards (unchanged ones included). */
export interface StatusWrite {
  key: string;
  claim: IPAMClaim;
  ips: string[];
  /** Whether `ips` differs from what the claim holds (new addresses were chosen). */
  allocated: boolean;
  condition: IPAMClaimCondition;
}

export interface PlanEvent {
  target: OwnerTarget;
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /** The claim concerned (`namespace/name`). */
  claim: string;
}

export interface NetworkPlan {
  writes: StatusWrite[];
  events: PlanEvent[];
  /** Claims left for later, and why (owner not cached yet, owner gone, terminating). */
  skipped: { key: string; why: string }[];
  /** No new address was handed out on the network: why (a claim whose VM may run with an address not read yet). */
  withheld?: string;
  report: RebuildReport;
  allocator: PoolAllocator;
}

/** Claims whose IPsAllocated condition says this, by outcome (for metrics and tests). */
export type Outcome = AllocationErrorCode | 'Success';

export function planNetwork(input: PlanInput): NetworkPlan {
  const allocator = new PoolAllocator(input.pool);
  const ordered = [...input.claims].sort(byAge);
  const report = allocator.rebuild(ordered.map((c) => ({ key: c.key, ips: c.claim.status?.ips ?? [] })));
  const plan: NetworkPlan = { writes: [], events: [], skipped: [], report, allocator };

  const conflictOf = new Map<string, string>();
  for (const conflict of report.conflicts) {
    for (const key of conflict.keys) {
      const others = conflict.keys.filter((k) => k !== key);
      const text = `${conflict.ip} is held by ${key} and also by ${others.join(', ')}`;
      conflictOf.set(key, conflictOf.has(key) ? `${conflictOf.get(key)}; ${text}` : text);
    }
  }

  // The addresses running VMs have are taken first: a dynamic choice must not take one of them.
  const takesRunning = (c: PlanClaim) => c.running?.kind === 'addresses' && (c.claim.status?.ips?.length ?? 0) === 0;
  // ...and while one of them is not known, no new address is handed out (the pass is repeated once it is).
  const unread = ordered.find(
    (c) => (c.claim.status?.ips?.length ?? 0) === 0 && !c.claim.metadata.deletionTimestamp && (c.running?.kind === 'unknown' || c.request.kind === 'wait'),
  );
  const withheld = unread
    ? `the VM of ${unread.key} may be running with an address not read yet (${unread.running?.kind === 'unknown' ? unread.running.message : 'its owner is not known yet'})`
    : input.inUseUnknown;
  // Addresses running VMs use that no claim holds are held back under the VMI's name from the start, so that neither a
  // new nor a requested address can be one of them (one a claim holds stays that claim's: hold() skips it). A VMI's
  // own empty claim takes them: they are released for its own allocation only, and held again if it took nothing.
  const inUse = input.inUse ?? [];
  for (const u of inUse) allocator.hold(u.holder, u.ips);
  /** Whether an allocation for these addresses would pick a new one (a family of the pool they have none of). */
  const lacksFamily = (ips: readonly string[]): boolean => {
    const families = ips.map(familyOfAddress);
    // A string that is not an address is refused as it is (InvalidAddress), whatever is withheld.
    if (families.includes(undefined)) return false;
    return input.pool.families.some((f) => !families.includes(f));
  };
  const serve = (c: PlanClaim): void => {
    const held = c.claim.status?.ips ?? [];
    const tell = (type: PlanEvent['type'], reason: string, message: string) => {
      if (c.owner) plan.events.push({ target: c.owner, type, reason, message, claim: c.key });
    };
    const refuse = (code: Outcome, message: string) => {
      const reason = code === 'Success' ? ALLOCATION_CONDITION_REASON.Success : ALLOCATION_CONDITION_REASON[code];
      // The condition is on the claim already; the Event, on the VM, says which claim.
      want(plan, c, held, false, condition(c.claim, 'False', reason, message, input.now));
      tell('Warning', code, `IPAMClaim ${c.key} on network "${input.network}": ${message}`);
    };

    const conflict = conflictOf.get(c.key);
    if (conflict !== undefined) {
      // Neither holder is changed: which one is right is not ours to guess.
      refuse('IPAddressConflict', `${conflict}; neither claim is changed, delete the wrong one to resolve it`);
      return;
    }
    if (held.length === 0) {
      if (c.claim.metadata.deletionTimestamp) {
        plan.skipped.push({ key: c.key, why: 'the claim is being deleted' });
        return;
      }
      if (c.request.kind === 'wait' || c.request.kind === 'gone') {
        plan.skipped.push({ key: c.key, why: c.request.message });
        return;
      }
      if (c.request.kind === 'invalid') {
        refuse('InvalidRequest', `the requested addresses cannot be read: ${c.request.message}`);
        return;
      }
      const running = c.running ?? { kind: 'none' };
      if (running.kind === 'unknown') {
        plan.skipped.push({ key: c.key, why: running.message });
        return;
      }
      if (running.kind === 'invalid') {
        refuse('InvalidRequest', `${running.message}; no address is handed out until they agree`);
        return;
      }
      if (running.kind === 'addresses') {
        // A family the pod has no address of is filled from the pool: not while an address in use is unknown.
        if (withheld && lacksFamily(running.ips)) {
          plan.withheld = withheld;
          plan.skipped.push({ key: c.key, why: `no new address while ${withheld}` });
          return;
        }
        const choice = takeRunningAddress(allocator, c.key, running, input.network);
        if (!choice.ok) {
          refuse(choice.error, choice.message);
          return;
        }
        if (c.request.kind === 'addresses') {
          const asked = c.request.addresses.map(bareAddress).sort().join(', ');
          if (asked !== running.ips.join(', ')) {
            tell(
              'Warning',
              'StaticAddressNotApplied',
              `IPAMClaim ${c.key}: requested ${asked}, but the VM is running with ${running.ips.join(', ')}; the claim keeps the address the VM has`,
            );
          }
        }
        want(plan, c, choice.ips, true, condition(c.claim, 'True', ALLOCATION_CONDITION_REASON.Success, choice.message, input.now));
        return;
      }
    }
    if (withheld && lacksFamily(held)) {
      plan.withheld = withheld;
      plan.skipped.push({ key: c.key, why: `no new address while ${withheld}` });
      return;
    }
    const requested = c.request.kind === 'addresses' ? c.request.addresses : [];
    const result = allocator.allocate(c.key, { requested });
    if (!result.ok) {
      refuse(result.error, result.message);
      return;
    }
    for (const warning of result.warnings) tell('Warning', 'StaticAddressNotApplied', `IPAMClaim ${c.key}: ${warning}`);
    const message =
      result.changed && held.length === 0
        ? `allocated ${result.ips.join(', ')} from network "${input.network}"`
        : `holds ${result.ips.join(', ')} on network "${input.network}"`;
    const previous = currentCondition(c.claim);
    // Keep the message of an unchanged success, so that re-confirming an allocation never writes.
    const text =
      previous?.status === 'True' && previous.reason === ALLOCATION_CONDITION_REASON.Success && !result.changed ? (previous.message ?? message) : message;
    want(plan, c, result.ips, result.changed, condition(c.claim, 'True', ALLOCATION_CONDITION_REASON.Success, text, input.now));
  };
  for (const c of [...ordered.filter(takesRunning), ...ordered.filter((c) => !takesRunning(c))]) {
    const own = c.running?.kind === 'addresses' ? inUse.filter((u) => u.claims?.includes(c.key)) : [];
    const running = new Set(c.running?.kind === 'addresses' ? c.running.ips.map(addressKey) : []);
    for (const u of own) {
      // Its other addresses (a second interface on the network) stay held: a family it lacks is not filled from them.
      allocator.release(u.holder);
      allocator.hold(
        u.holder,
        u.ips.filter((ip) => !running.has(addressKey(ip))),
      );
    }
    // An address another running VM uses too stays held by that VM, whichever was read first: the claim is refused,
    // naming it, rather than record an address two VMs have.
    if (own.length > 0) for (const o of inUse) if (!own.includes(o)) allocator.hold(o.holder, o.ips);
    serve(c);
    if ((allocator.ipsOf(c.key)?.length ?? 0) === 0) for (const u of own) allocator.hold(u.holder, u.ips);
  }
  return plan;
}

export type RunningChoice = { ok: true; ips: string[]; message: string } | { ok: false; error: AllocationErrorCode; message: string };

/**
 * The claim `key` takes the addresses its running launcher pods have (one per family; a family of the pool they do not
 * have is allocated as usual). Refused, with nothing else handed out, when one of them is outside the pool, excluded,
 * or held by another claim: the VM has that address, a new one would not be its.
 */
export function takeRunningAddress(
  allocator: PoolAllocator,
  key: string,
  running: { ips: readonly string[]; pods: readonly string[] },
  network: string,
): RunningChoice {
  const pods = `running launcher pod${running.pods.length > 1 ? 's' : ''} ${running.pods.join(', ')}`;
  const result = allocator.allocate(key, { requested: running.ips });
  if (!result.ok) {
    const why = result.message.replace(/^requested /, '');
    return {
      ok: false,
      error: result.error,
      message: `the VM has ${running.ips.join(', ')} on network "${network}" (${pods}), which the claim cannot take: ${why}; no other address is handed out, as the VM would lose the one it has`,
    };
  }
  return { ok: true, ips: result.ips, message: `took ${result.ips.join(', ')}, the address the VM has on network "${network}" (${pods})` };
}

function bareAddress(ip: string): string {
  const slash = ip.indexOf('/');
  return slash < 0 ? ip : ip.slice(0, slash);
}

/** Adds a write unless the claim already says exactly this. */
function want(plan: NetworkPlan, c: PlanClaim, ips: readonly string[], allocated: boolean, cond: IPAMClaimCondition): void {
  const previous = currentCondition(c.claim);
  const same = !allocated && previous !== undefined && previous.status === cond.status && previous.reason === cond.reason && previous.message === cond.message;
  if (same) return;
  plan.writes.push({ key: c.key, claim: c.claim, ips: [...ips], allocated, condition: cond });
}

export function currentCondition(claim: IPAMClaim): IPAMClaimCondition | undefined {
  return claim.status?.conditions?.find((cond) => cond.type === CONDITION_TYPE);
}

/** The IPsAllocated condition to write, keeping lastTransitionTime while the status does not change. */
export function condition(claim: IPAMClaim, status: 'True' | 'False', reason: string, message: string, now: string): IPAMClaimCondition {
  const previous = currentCondition(claim);
  const cond: IPAMClaimCondition = {
    type: CONDITION_TYPE,
    status,
    reason,
    message,
    lastTransitionTime: previous?.status === status && previous.lastTransitionTime ? previous.lastTransitionTime : now,
  };
  if (claim.metadata.generation !== undefined) cond.observedGeneration = claim.metadata.generation;
  return cond;
}

/** The status.conditions list after setting `cond`: other condition types are kept as they are, in order. */
export function conditionsWith(claim: IPAMClaim, cond: IPAMClaimCondition): IPAMClaimCondition[] {
  const list = claim.status?.conditions ?? [];
  const at = list.findIndex((c) => c.type === cond.type);
  if (at < 0) return [...list, cond];
  return list.map((c, i) => (i === at ? cond : c));
}

function byAge(a: PlanClaim, b: PlanClaim): number {
  const ta = a.claim.metadata.creationTimestamp ?? '';
  const tb = b.claim.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/** One address whatever its spelling (prefix length, IPv6 zeros); an unreadable string stands for itself. */
function addressKey(ip: unknown): string {
  const r = parseAddress(ip, { allowPrefix: true });
  return r.ok ? `${r.value.family}:${r.value.value}` : String(ip);
}
