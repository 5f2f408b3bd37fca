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
import { bareAddress, familyOfAddress, parseAddress } from '../ip/address.ts';
import { type AllocationErrorCode, PoolAllocator, type RebuildReport } from './allocator.ts';
import { cmp } from '../ip/intervals.ts';
import type { Pool } from '../ip/pool.ts';
import type { OwnerRequest, OwnerTarget } from './requests.ts';
import type { RunningAddresses } from './running-address.ts';
import { IPS_ALLOCATED_CONDITION } from '../claims/constants.ts';

export const CONDITION_TYPE = IPS_ALLOCATED_CONDITION;

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

export function planNetwork(input: PlanInput): NetworkPlan {
  const allocator = new PoolAllocator(input.pool);
  const ordered = [...input.claims].sort(byAge);
  const report = allocator.rebuild(ordered.map((c) => ({ key: c.key, ips: c.claim.status?.ips ?? [] })));
  const plan: NetworkPlan = { writes: [], events: [], skipped: [], report, allocator };
  const pass: Pass = { input, plan, conflictOf: conflictsByClaim(report), withheld: withheldBecause(ordered, input.inUseUnknown) };
  // Addresses running VMs use that no claim holds are held back under the VMI's name from the start, so that neither a
  // new nor a requested address can be one of them (one a claim holds stays that claim's: hold() skips it). A VMI's
  // own empty claim takes them: they are released for its own allocation only, and held again if it took nothing.
  const inUse = input.inUse ?? [];
  for (const u of inUse) allocator.hold(u.holder, u.ips);
  // The addresses running VMs have are taken first: a dynamic choice must not take one of them.
  for (const c of [...ordered.filter(takesRunning), ...ordered.filter((c) => !takesRunning(c))]) serveBesideInUse(pass, c, inUse);
  return plan;
}

/** What the steps of one pass share. */
interface Pass {
  input: PlanInput;
  plan: NetworkPlan;
  /** Claim key → the conflicts it is in, as its messages say them. */
  conflictOf: Map<string, string>;
  /** Why no new address is handed out on the network in this pass, if so. */
  withheld: string | undefined;
}

function conflictsByClaim(report: RebuildReport): Map<string, string> {
  const conflictOf = new Map<string, string>();
  for (const conflict of report.conflicts) {
    for (const key of conflict.keys) {
      const others = conflict.keys.filter((k) => k !== key);
      const text = `${conflict.ip} is held by ${key} and also by ${others.join(', ')}`;
      conflictOf.set(key, conflictOf.has(key) ? `${conflictOf.get(key)}; ${text}` : text);
    }
  }
  return conflictOf;
}

/** While the VM of an empty claim may run with an address not read yet, no new address is handed out (the pass is repeated once it is). */
function withheldBecause(ordered: readonly PlanClaim[], inUseUnknown: string | undefined): string | undefined {
  const unread = ordered.find(
    (c) => (c.claim.status?.ips?.length ?? 0) === 0 && !c.claim.metadata.deletionTimestamp && (c.running?.kind === 'unknown' || c.request.kind === 'wait'),
  );
  if (!unread) return inUseUnknown;
  return `the VM of ${unread.key} may be running with an address not read yet (${unread.running?.kind === 'unknown' ? unread.running.message : 'its owner is not known yet'})`;
}

function takesRunning(c: PlanClaim): boolean {
  return c.running?.kind === 'addresses' && (c.claim.status?.ips?.length ?? 0) === 0;
}

/** Serves one claim with the addresses its own running VM uses (`inUse`) released to it alone, held again if it took nothing. */
function serveBesideInUse(pass: Pass, c: PlanClaim, inUse: readonly InUse[]): void {
  const { allocator } = pass.plan;
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
  serve(pass, c);
  if ((allocator.ipsOf(c.key)?.length ?? 0) === 0) for (const u of own) allocator.hold(u.holder, u.ips);
}

function serve(pass: Pass, c: PlanClaim): void {
  const conflict = pass.conflictOf.get(c.key);
  if (conflict !== undefined) {
    // Neither holder is changed: which one is right is not ours to guess.
    refuse(pass, c, 'IPAddressConflict', `${conflict}; neither claim is changed, delete the wrong one to resolve it`);
    return;
  }
  const held = c.claim.status?.ips ?? [];
  if (held.length === 0 && serveEmpty(pass, c)) return;
  if (waitsForWithheld(pass, c, held)) return;
  const { input, plan } = pass;
  const result = plan.allocator.allocate(c.key, { requested: c.request.kind === 'addresses' ? c.request.addresses : [] });
  if (!result.ok) {
    refuse(pass, c, result.error, result.message);
    return;
  }
  for (const warning of result.warnings) tell(plan, c, 'Warning', 'StaticAddressNotApplied', `IPAMClaim ${c.key}: ${warning}`);
  const message =
    result.changed && held.length === 0
      ? `allocated ${result.ips.join(', ')} from network "${input.network}"`
      : `holds ${result.ips.join(', ')} on network "${input.network}"`;
  const previous = currentCondition(c.claim);
  // Keep the message of an unchanged success, so that re-confirming an allocation never writes.
  const text =
    previous?.status === 'True' && previous.reason === ALLOCATION_CONDITION_REASON.Success && !result.changed ? (previous.message ?? message) : message;
  want(plan, c, result.ips, result.changed, condition(c.claim, 'True', ALLOCATION_CONDITION_REASON.Success, text, input.now));
}

/**
 * Why an empty claim gets nothing in this pass, in the order the rules are checked: left for later (`skip`) or
 * refused as an InvalidRequest (`refuse`). Undefined: it is served.
 */
export function emptyClaimExit(c: PlanClaim): { skip: string } | { refuse: string } | undefined {
  if (c.claim.metadata.deletionTimestamp) return { skip: 'the claim is being deleted' };
  if (c.request.kind === 'wait' || c.request.kind === 'gone') return { skip: c.request.message };
  if (c.request.kind === 'invalid') return { refuse: `the requested addresses cannot be read: ${c.request.message}` };
  if (c.running?.kind === 'unknown') return { skip: c.running.message };
  if (c.running?.kind === 'invalid') return { refuse: `${c.running.message}; no address is handed out until they agree` };
  return undefined;
}

/** Serves an empty claim that is left for later, refused, or whose VM runs. False: it is allocated as any other. */
function serveEmpty(pass: Pass, c: PlanClaim): boolean {
  const exit = emptyClaimExit(c);
  if (exit && 'skip' in exit) pass.plan.skipped.push({ key: c.key, why: exit.skip });
  else if (exit) refuse(pass, c, 'InvalidRequest', exit.refuse);
  else if (c.running?.kind === 'addresses') serveRunning(pass, c, c.running);
  else return false;
  return true;
}

/**
 * An empty claim whose VM runs takes the addresses its running launcher pods have (one per family; a family of the pool
 * they do not have is allocated as usual), never a new one. Refused, with nothing else handed out, when one of them is
 * outside the pool, excluded, or held by another claim: the VM has that address, a new one would not be its.
 */
function serveRunning(pass: Pass, c: PlanClaim, running: { ips: readonly string[]; pods: readonly string[] }): void {
  const { input, plan } = pass;
  // A family the pod has no address of is filled from the pool: not while an address in use is unknown.
  if (waitsForWithheld(pass, c, running.ips)) return;
  const pods = `running launcher pod${running.pods.length > 1 ? 's' : ''} ${running.pods.join(', ')}`;
  const has = `${running.ips.join(', ')} on network "${input.network}" (${pods})`;
  const result = plan.allocator.allocate(c.key, { requested: running.ips });
  if (!result.ok) {
    const why = result.message.replace(/^requested /, '');
    refuse(
      pass,
      c,
      result.error,
      `the VM has ${has}, which the claim cannot take: ${why}; no other address is handed out, as the VM would lose the one it has`,
    );
    return;
  }
  if (c.request.kind === 'addresses') {
    const asked = c.request.addresses.map(bareAddress).sort().join(', ');
    if (asked !== running.ips.join(', ')) {
      const message = `IPAMClaim ${c.key}: requested ${asked}, but the VM is running with ${running.ips.join(', ')}; the claim keeps the address the VM has`;
      tell(plan, c, 'Warning', 'StaticAddressNotApplied', message);
    }
  }
  const message = `took ${result.ips.join(', ')}, the address the VM has on network "${input.network}" (${pods})`;
  want(plan, c, result.ips, true, condition(c.claim, 'True', ALLOCATION_CONDITION_REASON.Success, message, input.now));
}

/** Whether the claim is left for later because it needs a new address while none is handed out (recorded as such). */
function waitsForWithheld(pass: Pass, c: PlanClaim, ips: readonly string[]): boolean {
  if (!pass.withheld || !lacksFamily(pass.input.pool, ips)) return false;
  pass.plan.withheld = pass.withheld;
  pass.plan.skipped.push({ key: c.key, why: `no new address while ${pass.withheld}` });
  return true;
}

/** Whether an allocation for these addresses would pick a new one (a family of the pool they have none of). */
export function lacksFamily(pool: Pool, ips: readonly string[]): boolean {
  const families = ips.map(familyOfAddress);
  // A string that is not an address is refused as it is (InvalidAddress), whatever is withheld.
  if (families.includes(undefined)) return false;
  return pool.families.some((f) => !families.includes(f));
}

function refuse(pass: Pass, c: PlanClaim, code: AllocationErrorCode, message: string): void {
  const reason = ALLOCATION_CONDITION_REASON[code];
  // The condition is on the claim already; the Event, on the VM, says which claim.
  want(pass.plan, c, c.claim.status?.ips ?? [], false, condition(c.claim, 'False', reason, message, pass.input.now));
  tell(pass.plan, c, 'Warning', code, `IPAMClaim ${c.key} on network "${pass.input.network}": ${message}`);
}

function tell(plan: NetworkPlan, c: PlanClaim, type: PlanEvent['type'], reason: string, message: string): void {
  if (c.owner) plan.events.push({ target: c.owner, type, reason, message });
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
  return cmp(a.claim.metadata.creationTimestamp ?? '', b.claim.metadata.creationTimestamp ?? '') || cmp(a.key, b.key);
}

/** One address whatever its spelling (prefix length, IPv6 zeros); an unreadable string stands for itself. */
function addressKey(ip: unknown): string {
  const r = parseAddress(ip, { allowPrefix: true });
  return r.ok ? `${r.value.family}:${r.value.value}` : String(ip);
}
