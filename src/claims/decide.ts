// The lifecycle rules of persistent IPs: given what the caches hold for one VM key (DecideInput), which IPAMClaims
// must be created, which must be deleted, which may lose the finalizer, and what blocks persistence (Plan; both in
// plan.ts). The rules, by the names the code uses for them; all are in this file but where another is named:
//
//   OWNER        who owns the claims of this key: the VM, or a standalone VMI.
//   WANTED       which networks get a claim: gate on, owner alive, network attached, NAD acceptable (NAD-* below;
//                the networks and their NADs are judged in persistent-networks.ts).
//   NAD-*        what makes a NAD acceptable for persistence: exists, parses, opts in, same namespace, topology,
//                subnets (persistent-networks.ts).
//   NAME         which of the names a network's claim may have is its name (naming.ts).
//   EXISTING-*   what to do when a claim of the wanted name already exists: ours, terminating, another owner's,
//                nobody's.
//   FINALIZER-OWNER-GONE        when a claim's VM or VMI (any incarnation of this name) no longer needs it.
//   FINALIZER-DELETED-UNUSED    when a claim someone deleted may go although its owner lives.
//   UNPLUG       which claims of the live owner belong to no network in use any more, and are deleted ("in use":
//                usage.ts).
//   ORPHAN       what happens to a claim of ours that lost every owner (`kubectl delete vm --cascade=orphan`).
//   KEEP-NOT-PERSISTENT         why claims of networks in use that stopped being persistent are kept.
//
// The function is pure and level-triggered: the same input gives the same plan, and a state that already matches
// gives a plan without writes. It never updates a claim; a claim is created whole, or left alone, or deleted.

import type { IPAMClaim, OwnerReference, VmiSpecLike } from '../kube/types.ts';
import { apiVersionOf, resources } from '../kube/resources.ts';
import { CLAIM_FINALIZER, IPS_ALLOCATED_CONDITION, VM_LABEL } from './constants.ts';
import { allocatorServes, parseNadConfig } from './nad-config.ts';
import { swapClaimName } from './names.ts';
import { hasFinalizer, isOwnedBy, isTerminating } from './facts.ts';
import type { ObjectKey } from './nad-reference.ts';
import { claimNamesOf } from './naming.ts';
import { controllerRef, kubevirtOwnerRefs } from './owners.ts';
import { persistentNetworks, type Finding, type NetworkVerdict } from './persistent-networks.ts';
import type { ClaimOwner, ClaimWrite, DecideInput, Plan } from './plan.ts';
import { isUsed, networksOf, type Usage } from './usage.ts';

export * from './plan.ts';
export { claimNameFor, claimNamesOf, type ClaimLookup } from './naming.ts';
export { persistentNetworks, withClaimNames, type Finding, type NetworkVerdict } from './persistent-networks.ts';

export function decide(input: DecideInput): Plan {
  const plan: Plan = { creates: [], adopts: [], removeFinalizers: [], deletes: [], problems: [], retry: false, wanted: [] };
  const { key } = input;
  const claims = input.claims.filter((claim) => (claim.metadata.namespace ?? key.namespace) === key.namespace);

  const owner = ownerOf(input);
  if (owner) plan.owner = owner.ref;

  const vmiNetworks = [...networksOf(input.vmi?.spec, true)];
  const inVmi: Usage = { vmName: key.name, networks: vmiNetworks };

  // WANTED: claims are created only while the gate is on and the owner is not going away; a terminating owner
  // would only get claims that garbage collection removes again.
  if (owner && input.gateEnabled && !owner.terminating) {
    planWantedClaims(input, owner, claims, plan, inVmi);
  }

  const inUse: Usage = { vmName: key.name, networks: [...networksOf(input.vm?.spec?.template?.spec, false), ...vmiNetworks] };
  for (const claim of claims) {
    const write = writeRef(claim);
    const refs = kubevirtOwnerRefs(claim);
    if (!write) continue;
    if (isOrphanOfOurs(claim, key.name)) {
      planOrphan(claim, write, owner, input, inUse, plan);
      continue;
    }
    // Claims of anything but a VM or VMI of this very name are never written to, whatever else they look like.
    if (refs.length === 0 || refs.some((ref) => ref.name !== key.name)) continue;
    if (hasFinalizer(claim) && (ownersAllGone(refs, input) || deletedAndUnused(claim, owner, inVmi))) {
      plan.removeFinalizers.push(write);
    } else if (owner && !owner.terminating && isUnplugged(claim, owner, inUse) && !plan.deletes.some((d) => d.uid === write.uid)) {
      // A launcher pod may still have the interface after the VMI dropped it (an unplug that ends with a migration,
      // Multus without its dynamic networks controller), and OVN-Kubernetes would free the address under it: as for
      // SWAP, the claim goes once no unfinished launcher pod names it.
      const named = input.vmi ? namedByRunningPod(input, plan, claim.metadata.name) : !!input.namedByRunningPods?.has(claim.metadata.name);
      if (named === false) plan.deletes.push(write);
    }
  }
  plan.adopts.sort(byName);
  plan.removeFinalizers.sort(byName);
  plan.deletes.sort(byName);
  return plan;
}

// ---------------------------------------------------------------------------------------------------------------
// ORPHAN: `kubectl delete vm --cascade=orphan` keeps the VMI running, and garbage collection strips the VM from the
// owner references of its claims. A claim with no KubeVirt owner that carries our finalizer AND our label for this
// key is ours (a hand-made claim has neither; EXISTING-NOT-OWNED keeps the "never adopt" rule for it). While the
// owner of this key lives (the VMI, standalone now, or a VM of that name that adopted it) and uses the network, the
// claim is owned again, so that the VM's pods may use it and garbage collection releases it with its owner. Once no
// VM and no VMI of this name is left, or the owner no longer has the network, it is deleted and released. In
// between (the VM still terminating, the VMI not yet freed of it) nothing is done: their events bring the key back.
// An owner reference someone else added (not KubeVirt's) stays: the new one joins it, and such a claim is only
// released, never deleted, since its other owner still holds it (its garbage collection removes it).

function isOrphanOfOurs(claim: IPAMClaim, vmName: string): boolean {
  return kubevirtOwnerRefs(claim).length === 0 && hasFinalizer(claim) && claim.metadata.labels?.[VM_LABEL] === vmName;
}

function planOrphan(claim: IPAMClaim, write: ClaimWrite, owner: Owner | undefined, input: DecideInput, inUse: Usage, plan: Plan): void {
  const alive = owner !== undefined && !owner.terminating;
  if (alive && isUsed(claim, inUse)) {
    // Deleted by someone while its VM uses it: the finalizer holds the address until the network is no longer used
    // (then the branch below releases it), as FINALIZER-DELETED-UNUSED does for an owned claim.
    if (isTerminating(claim)) return;
    const others = claim.metadata.ownerReferences ?? [];
    // The API server allows one controller among an object's owners.
    const controller = !others.some((ref) => ref.controller === true);
    plan.adopts.push({
      ...write,
      owner: { apiVersion: owner.apiVersion, kind: owner.ref.kind, name: owner.ref.name, uid: owner.ref.uid, controller, blockOwnerDeletion: true },
      append: others.length > 0,
    });
    return;
  }
  if (!alive && (input.vm !== undefined || input.vmi !== undefined)) return;
  if (isTerminating(claim) || (claim.metadata.ownerReferences ?? []).length > 0) plan.removeFinalizers.push(write);
  else plan.deletes.push(write);
}

// ---------------------------------------------------------------------------------------------------------------
// OWNER: the VM when it exists. Otherwise the VMI, but only a standalone one (no controller reference to a VM): a
// VMI whose VM is gone is being torn down by KubeVirt, and a claim owned by it would outlive nothing useful.

interface Owner {
  ref: ClaimOwner;
  apiVersion: string;
  terminating: boolean;
  /** Where the owner's networks are declared: the VM template, or the standalone VMI's spec. */
  spec: VmiSpecLike | undefined;
}

function ownerOf({ vm, vmi }: DecideInput): Owner | undefined {
  const of = vm
    ? { object: vm, resource: resources.virtualMachines, spec: vm.spec?.template?.spec }
    : vmi && !controllerRef(vmi, 'VirtualMachine')
      ? { object: vmi, resource: resources.virtualMachineInstances, spec: vmi.spec }
      : undefined;
  const uid = of?.object.metadata.uid;
  if (!of || !uid) return undefined;
  const ref: ClaimOwner = { kind: of.resource.kind, name: of.object.metadata.name, uid };
  return { ref, apiVersion: apiVersionOf(of.resource), terminating: isTerminating(of.object), spec: of.spec };
}

// ---------------------------------------------------------------------------------------------------------------
// WANTED: one claim per network of the owner's spec that (1) is a Multus secondary network, or the pod network of a
// namespace with a primary user-defined network, (2) has an interface that is not `state: absent`, and (3) refers to
// an acceptable persistent NAD (NAD-*). A stopped VM still has a spec, so its claims exist and a later start reuses
// them.

/** What the wanted claims of one decision are planned from, and into. */
interface Wanted {
  input: DecideInput;
  owner: Owner;
  /** The claims of the namespace that may concern this key, by name. */
  existing: ReadonlyMap<string, IPAMClaim>;
  inVmi: Usage;
  plan: Plan;
}

type PersistentNetwork = Pick<NetworkVerdict, 'network' | 'claim'> & { claimSpec: IPAMClaim['spec'] };

function planWantedClaims(input: DecideInput, owner: Owner, claims: readonly IPAMClaim[], plan: Plan, inVmi: Usage): void {
  const existing = new Map(claims.map((claim) => [claim.metadata.name, claim]));
  const wanted: Wanted = { input, owner, existing, inVmi, plan };
  const claimedBy = new Map<string, string>();

  // With no claim at all, every name is the plain one (claimNameFor without a lookup), and the other names a network
  // may have need not be hashed only to be looked up in vain.
  const lookup = existing.size > 0 ? (name: string) => existing.get(name) : undefined;
  for (const verdict of persistentNetworks(input.key, owner.spec, input.nads, lookup)) {
    const { network, claim: name, claimSpec, problem } = verdict;
    if (!claimSpec) {
      if (problem) block(plan, verdict, problem);
      continue;
    }
    // Two networks on one claim would share addresses; see claimName() for why this needs a deliberate effort.
    const rival = claimedBy.get(name);
    if (rival !== undefined) {
      block(plan, verdict, { reason: 'ClaimNameConflict', message: `networks "${rival}" and "${network}" map to the same IPAMClaim name; rename one of them` });
      continue;
    }
    claimedBy.set(name, network);

    const found = existing.get(name);
    if (found) {
      planExisting(wanted, { network, claim: name, claimSpec }, found);
    } else {
      plan.creates.push(newClaim(input.key, owner, name, claimSpec));
      plan.wanted.push({ network, claim: name, status: 'wanted' });
    }
  }
}

/** The network cannot have its claim (yet): `problem` says why; `retry` when no watch event of ours says when. */
function block(plan: Plan, { network, claim }: Pick<NetworkVerdict, 'network' | 'claim'>, problem: Finding, retry = false): void {
  plan.problems.push({ ...problem, network, claim });
  plan.wanted.push({ network, claim, status: 'blocked', reason: problem.reason });
  if (retry) plan.retry = true;
}

/** EXISTING-*: a claim of the wanted name, `found`, already exists. */
function planExisting(wanted: Wanted, net: PersistentNetwork, found: IPAMClaim): void {
  const { input, owner, plan } = wanted;
  const { network, claim: name } = net;
  const refs = found.metadata.ownerReferences ?? [];
  const ours = refs.some((ref) => ref.uid === owner.ref.uid);
  if (isTerminating(found)) {
    // EXISTING-TERMINATING: wait for it to go, then create the new one. Our own deleted claim is released by
    // FINALIZER-DELETED-UNUSED as soon as no VMI uses it, which a VMI event announces; another owner's goes when
    // garbage collection gets to it, which we must poll for.
    const message = ours
      ? `IPAMClaim ${name} was deleted while in use; it is kept until no VMI uses it, then created anew`
      : `IPAMClaim ${name} is being deleted; the new claim is created once it is gone`;
    block(plan, net, { reason: 'ClaimTerminating', message }, !ours);
  } else if (ours && found.spec?.network !== net.claimSpec.network) {
    planStale(wanted, net, found);
  } else if (ours) {
    // EXISTING-OURS: steady state. Never "fixing" its spec or labels keeps resyncs at zero writes, and the IPAM
    // plugin keys its allocation on the claim as it is.
    plan.wanted.push({ network, claim: name, status: 'created' });
    reportRefusal(wanted, net, found);
    planSuperseded(wanted, network, name, net.claimSpec.network);
  } else if (isOrphanOfOurs(found, input.key.name)) {
    // ORPHAN (below): ours, owned again by this plan.
    plan.wanted.push({ network, claim: name, status: 'created' });
    reportRefusal(wanted, net, found);
  } else if (refs.length === 0) {
    // EXISTING-NOT-OWNED: made by hand (or orphaned). Adopting would hand a stranger's addresses to the VM, and
    // deleting would lose them: report, and look again later.
    const message =
      `IPAMClaim ${name} exists without an owner; delete it, or give it an ownerReference to ` +
      `${owner.ref.kind} ${owner.ref.name}, for the ${owner.ref.kind} to use it`;
    block(plan, net, { reason: 'ClaimNotOwned', message }, true);
  } else {
    // EXISTING-OTHER-OWNER: typically the leftover of an earlier VM of the same name, which garbage collection
    // removes (FINALIZER-OWNER-GONE releases it); never overwrite or adopt it.
    const others = refs.map((ref) => `${ref.kind} ${ref.name} (uid ${ref.uid})`).join(', ');
    const message = `IPAMClaim ${name} belongs to ${others}, not to this ${owner.ref.kind} (uid ${owner.ref.uid}); waiting for it to be removed`;
    block(plan, net, { reason: 'ClaimOwnedByAnotherObject', message }, true);
  }
}

/**
 * EXISTING-REFUSED: the IPAM plugin wrote IPsAllocated False on our claim (a full subnet, a requested address or MAC
 * another claim holds), so the VM waits in Starting. The claim is right and stays; the VM's Event says why while the
 * condition lasts and a VMI waits on it (OVN-Kubernetes judges a claim only when a pod names it, so a stopped VM's
 * claim keeps its last refusal, which tells nobody anything). The built-in allocator reports its refusals on the VM
 * itself, with their own reasons, so its networks are left to it. A status change brings the key back: no retry.
 */
function reportRefusal({ input, plan }: Wanted, { network, claim, claimSpec }: PersistentNetwork, found: IPAMClaim): void {
  const condition = found.status?.conditions?.find((c) => c.type === IPS_ALLOCATED_CONDITION);
  if (condition?.status !== 'False' || !input.vmi || isTerminating(input.vmi)) return;
  if ([...input.nads.values()].some((nad) => parseNadConfig(nad).networkName === claimSpec.network && allocatorServes(nad))) return;
  const why = [condition.reason || 'no reason given', condition.message].filter(Boolean).join(': ');
  plan.problems.push({
    reason: 'IPAllocationRefused',
    message: `the IPAM refused addresses for IPAMClaim ${claim} (network "${network}"): ${why}`,
    network,
    claim,
  });
}

/**
 * EXISTING-OURS-STALE: our claim was made for another network than the NAD the VM names now (the network moved to
 * another NAD under the same logical name). The IPAM plugin would allocate on the old network, or fail to, or hand
 * its address out again on the new one: the claim is replaced, but only once no VMI uses it, since deleting it would
 * free the addresses of a running VM. Until then it is reported, and the webhook refuses new launcher pods on it
 * (ClaimNetworkMismatch).
 */
function planStale({ input, owner, existing, inVmi, plan }: Wanted, net: PersistentNetwork, found: IPAMClaim): void {
  const { network, claim: name, claimSpec } = net;
  const write = writeRef(found);
  const onlyThisKey = kubevirtOwnerRefs(found).every((ref) => ref.name === input.key.name);
  const swap = swapClaimName(input.key.name, network, claimSpec.network);
  if (!isUsed(found, inVmi) && write && onlyThisKey && hasOurMark(found, owner)) {
    plan.deletes.push(write);
    plan.wanted.push({ network, claim: name, status: 'blocked', reason: 'ClaimNetworkMismatch' });
  } else if (write && onlyThisKey && hasOurMark(found, owner) && !existing.has(swap)) {
    // SWAP: the NAD was swapped on a running VM (KubeVirt's LiveUpdateNADRef moves it to a pod on the new NAD
    // through a migration). The running pod keeps its claim; the new network gets a claim of its own, under the
    // swap name, for the target pod; the old one is released once no running pod names it (below).
    plan.creates.push(newClaim(input.key, owner, swap, claimSpec));
    plan.wanted.push({ network, claim: swap, status: 'wanted' });
  } else {
    const message =
      `IPAMClaim ${name} is for network "${found.spec?.network ?? ''}", but ${owner.ref.kind} ${owner.ref.name} now ` +
      `names network "${claimSpec.network}"; it is replaced once no VMI uses it (stop the VM), and new launcher ` +
      'pods are refused until then';
    block(plan, net, { reason: 'ClaimNetworkMismatch', message });
  }
}

/**
 * SWAP, the end: the network's claim is `current`, made for NAD network `nadNetwork`; a claim of ours under another
 * of the network's names, made for another NAD network, is what the VM used before its NAD was swapped. It is kept
 * while a running launcher pod names it (the migration source, until it finishes; OVN-Kubernetes frees a pod's
 * addresses at its deletion unless its element names a claim that holds them), then deleted and released. "Another
 * of the network's names" includes the swap name of any earlier NAD network, read from the claim itself: after
 * n1 → n2 → n1, or n1 → n2 → n3 before a migration finished, the n2 claim is one too, and would otherwise hold its
 * address until the VM is deleted.
 */
function planSuperseded({ input, owner, existing, plan }: Wanted, network: string, current: string, nadNetwork: string): void {
  for (const [name, old] of existing) {
    const oldNetwork = old.spec?.network;
    if (name === current || typeof oldNetwork !== 'string' || oldNetwork === nadNetwork || !claimNamesOf(input.key.name, network, oldNetwork).includes(name))
      continue;
    if (isTerminating(old) || !isOwnedBy(old, owner.ref.uid) || !hasOurMark(old, owner)) continue;
    const write = writeRef(old);
    if (!write || !kubevirtOwnerRefs(old).every((ref) => ref.name === input.key.name)) continue;
    if (namedByRunningPod(input, plan, name) === false && !plan.deletes.some((d) => d.uid === write.uid)) plan.deletes.push(write);
  }
}

/**
 * SWAP: whether an unfinished launcher pod names claim `name`; undefined before the pods were read (the plan then asks
 * for them). A claim kept for a pod being deleted is looked at again (retry) until that pod has finished.
 */
function namedByRunningPod(input: DecideInput, plan: Plan, name: string): boolean | undefined {
  if (input.namedByRunningPods === undefined) {
    plan.needsPodRead = true;
    return undefined;
  }
  if (input.runningPodTerminating) plan.retry = true;
  return input.namedByRunningPods.has(name);
}

function newClaim(key: ObjectKey, owner: Owner, name: string, spec: IPAMClaim['spec']): IPAMClaim {
  return {
    apiVersion: apiVersionOf(resources.ipamClaims),
    kind: resources.ipamClaims.kind,
    metadata: {
      name,
      namespace: key.namespace,
      // Label values stop at 63 characters while object names go to 253; a VM name that cannot be a label value
      // (KubeVirt's own labels would break first) leaves the claim unlabelled rather than uncreatable.
      ...(isLabelValue(key.name) ? { labels: { [VM_LABEL]: key.name } } : {}),
      finalizers: [CLAIM_FINALIZER],
      ownerReferences: [
        {
          apiVersion: owner.apiVersion,
          kind: owner.ref.kind,
          name: owner.ref.name,
          uid: owner.ref.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: { ...spec },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// FINALIZER-OWNER-GONE: the finalizer keeps a claim (and so its addresses) while a VM or VMI may still run on it. A
// claim owned by VM uid X is released once no VM X is alive (gone, or terminating) AND no VMI controlled by X is
// left; a claim owned by standalone VMI uid X once VMI X is gone, or terminating with no launcher pod left by a
// fresh read (`launcherPodsGone`). Every
// incarnation of this name counts, so leftovers of an earlier VM of the same name are released too. This covers
// background deletion (VM terminating behind KubeVirt's finalizer until its VMI is gone), foreground deletion (GC
// marks the claims first; the finalizer holds until the VMI is gone, then lets the VM finish), and a stopped VM (VMI
// gone, VM alive: kept). It applies with the gate off as well, so no finalizer is ever stranded.

/**
 * Whether the decision needs `launcherPodsGone`: a terminating standalone VMI whose activePods is empty, with claims
 * it holds by our finalizer. Only then is the API asked, so a steady state reads nothing.
 */
export function needsLauncherPodRead({ vmi, claims }: Pick<DecideInput, 'vmi' | 'claims'>): boolean {
  if (!vmi?.metadata.uid || !isTerminating(vmi) || controllerRef(vmi, 'VirtualMachine')) return false;
  if (Object.keys(vmi.status?.activePods ?? {}).length > 0) return false;
  return claims.some((claim) => hasFinalizer(claim) && isOwnedBy(claim, vmi.metadata.uid!));
}

/** The finalizer garbage collection puts on an object deleted with propagation Orphan, until its dependents are freed. */
const ORPHAN_FINALIZER = 'orphan';

function ownersAllGone(refs: readonly OwnerReference[], { vm, vmi, launcherPodsGone }: DecideInput): boolean {
  return refs.every((ref) => {
    if (ref.kind === 'VirtualMachine') {
      const vmAlive = vm !== undefined && vm.metadata.uid === ref.uid && !isTerminating(vm);
      // `--cascade=orphan`: until garbage collection has stripped the VM from its dependents (then it drops the
      // `orphan` finalizer), the claim is about to become ORPHAN's, which re-owns or deletes it; released now, it
      // would end up with neither owner nor finalizer, like a hand-made claim, and keep its address for ever.
      if (vm?.metadata.uid === ref.uid && vm.metadata.finalizers?.includes(ORPHAN_FINALIZER)) return false;
      // A VMI of this name with no controller may be this VM's, orphaned (`--cascade=orphan`: garbage collection
      // strips the VM from the VMI and from the claims one object at a time, in any order): it still runs on the
      // claim, which ORPHAN then gives it. Only a VMI controlled by another VM is not this VM's.
      const vmiController = vmi ? controllerRef(vmi, 'VirtualMachine') : undefined;
      const vmiOfIt = vmi !== undefined && (vmiController === undefined || vmiController.uid === ref.uid);
      return !vmAlive && !vmiOfIt;
    }
    if (!vmi || vmi.metadata.uid !== ref.uid) return true;
    // activePods lags pod creation: a foreground delete of a VMI whose pod is starting would free the claim under
    // that pod. Only a fresh read that finds no pod at all counts.
    return isTerminating(vmi) && Object.keys(vmi.status?.activePods ?? {}).length === 0 && launcherPodsGone === true;
  });
}

// FINALIZER-DELETED-UNUSED: someone deleted one of our claims (by hand, or UNPLUG did). Holding it while a VMI has
// the network protects addresses in use; holding it longer would deadlock a network that is plugged back, since its
// wanted claim can only be created once this one is gone.
function deletedAndUnused(claim: IPAMClaim, owner: Owner | undefined, inVmi: Usage): boolean {
  return isTerminating(claim) && owner !== undefined && isOwnedBy(claim, owner.ref.uid) && !isUsed(claim, inVmi);
}

// UNPLUG: a claim of the live owner that belongs to no network in use is deleted (with uid and resourceVersion
// preconditions; its finalizer then goes by FINALIZER-DELETED-UNUSED). "In use" is a network of the VM spec whose
// interface is not absent, or any network of the VMI spec, because an unplug in progress keeps it there until the
// interface is gone. Only claims that carry our finalizer or label are touched: anything else owned by the VM was
// made by someone else, for their own reasons.
//
// KEEP-NOT-PERSISTENT: "in use" does not ask whether the network is still persistent. A NAD edited to drop
// allowPersistentIPs, or the gate turned off, stops new claims, but deleting existing ones would take the addresses
// of a running VM away on a mere config edit; they go with the VM, or when the network is removed from it.
function isUnplugged(claim: IPAMClaim, owner: Owner, inUse: Usage): boolean {
  if (isTerminating(claim) || !isOwnedBy(claim, owner.ref.uid)) return false;
  return hasOurMark(claim, owner) && !isUsed(claim, inUse);
}

function hasOurMark(claim: IPAMClaim, owner: Owner): boolean {
  return hasFinalizer(claim) || claim.metadata.labels?.[VM_LABEL] === owner.ref.name;
}

function writeRef(claim: IPAMClaim): ClaimWrite | undefined {
  const { name, uid, resourceVersion } = claim.metadata;
  // Without both, a write could not be guarded against racing with another writer; objects from the API always
  // have them.
  if (!uid || !resourceVersion) return undefined;
  return { name, uid, resourceVersion };
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function isLabelValue(value: string): boolean {
  return value.length <= 63 && LABEL_VALUE.test(value);
}

function byName(a: ClaimWrite, b: ClaimWrite): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
