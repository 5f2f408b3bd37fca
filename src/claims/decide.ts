// The lifecycle rules of persistent IPs, all in this file: given what the caches hold for one VM key, which
// IPAMClaims must be created, which must be deleted, which may lose the finalizer, and what blocks persistence.
// The rules, by the names the code below uses for them:
//
//   OWNER        who owns the claims of this key: the VM, or a standalone VMI.
//   WANTED       which networks get a claim: gate on, owner alive, network attached, NAD acceptable (NAD-* below).
//   NAD-*        what makes a NAD acceptable for persistence: exists, parses, opts in, same namespace, topology,
//                subnets.
//   EXISTING-*   what to do when a claim of the wanted name already exists: ours, terminating, another owner's,
//                nobody's.
//   FINALIZER-OWNER-GONE        when a claim's VM or VMI (any incarnation of this name) no longer needs it.
//   FINALIZER-DELETED-UNUSED    when a claim someone deleted may go although its owner lives.
//   UNPLUG       which claims of the live owner belong to no network in use any more, and are deleted.
//   ORPHAN       what happens to a claim of ours that lost every owner (`kubectl delete vm --cascade=orphan`).
//   KEEP-NOT-PERSISTENT         why claims of networks in use that stopped being persistent are kept.
//
// The function is pure and level-triggered: the same input gives the same plan, and a state that already matches
// gives a plan without writes. It never updates a claim; a claim is created whole, or left alone, or deleted.

import type {
  IPAMClaim,
  KubeObject,
  NetworkAttachmentDefinition,
  OwnerReference,
  VirtualMachine,
  VirtualMachineInstance,
  VmiSpecLike,
  VmNetwork,
} from '../kube/types.ts';
import { apiVersionOf, resources } from '../kube/resources.ts';
import { CLAIM_FINALIZER, VM_LABEL } from './constants.ts';
import { claimName, collisionClaimName, podInterfaceName, PRIMARY_POD_INTERFACE, referenceClaimName, swapClaimName } from './names.ts';
import { effectiveVmiSpec } from './effective-spec.ts';
import { parseNadReference, type ObjectKey } from './nad-reference.ts';
import { isOvnKubernetes, parseNadConfig, type NadConfig } from './nad-config.ts';
import { controllerRef, kubevirtOwnerRefs } from './owners.ts';

export interface DecideInput {
  /** The VM's namespace and name (a VMI has the same name as its VM). */
  key: ObjectKey;
  /** Undefined when no VM of this name exists. */
  vm?: VirtualMachine;
  /** Undefined when no VMI of this name exists. */
  vmi?: VirtualMachineInstance;
  /**
   * By `namespace/name`: every NAD the VM or VMI references, and every NAD of the key's namespace (where the
   * primary network of `pod: {}` networks is found). A referenced NAD that is not here is taken as not existing.
   */
  nads: ReadonlyMap<string, NetworkAttachmentDefinition>;
  /** Every claim of the namespace that may concern this key: labelled for it, owned by its VM/VMI, or so named. */
  claims: readonly IPAMClaim[];
  /** Whether the KubeVirt feature gate `PersistentIPs` is on. */
  gateEnabled: boolean;
  /**
   * A fresh read (not the VMI's status.activePods, which lags pod creation) of whether the VMI has any launcher pod
   * left; only read when a terminating standalone VMI would otherwise release its claims. Undefined: not read.
   */
  launcherPodsGone?: boolean;
  /**
   * A fresh read of the claims named by the VMI's launcher pods that are neither finished nor being deleted; read
   * when the plan asks for it (Plan.needsPodRead), to know whether a claim left from an earlier NAD is still used.
   */
  namedByRunningPods?: ReadonlySet<string>;
}

export type OwnerKind = 'VirtualMachine' | 'VirtualMachineInstance';

/** The object that owns new claims, and that Events about this key go on. */
export interface ClaimOwner {
  kind: OwnerKind;
  name: string;
  uid: string;
}

/** A write to one existing claim, with what its precondition must check (uid, and resourceVersion). */
export interface ClaimWrite {
  name: string;
  uid: string;
  resourceVersion: string;
}

export type ProblemReason =
  | 'NetworkAttachmentDefinitionNotFound'
  | 'InvalidNetworkReference'
  | 'InvalidNetworkConfig'
  | 'MissingNetworkName'
  | 'CrossNamespacePersistentNetwork'
  | 'UnsupportedTopology'
  | 'MissingSubnets'
  | 'AmbiguousPrimaryNetwork'
  | 'ClaimNameConflict'
  | 'ClaimTerminating'
  | 'ClaimOwnedByAnotherObject'
  | 'ClaimNotOwned'
  | 'ClaimNetworkMismatch'
  | 'ClaimAwaitingAddresses'
  | 'DuplicateNetworkName'
  | 'InvalidNetwork';

export interface Problem {
  reason: ProblemReason;
  message: string;
  /** The logical network (VM network `name`) concerned. */
  network?: string;
  claim?: string;
}

/** `wanted`: to be created by this plan; `created`: exists and is ours; `blocked`: see `reason`. */
export type WantedStatus = 'wanted' | 'created' | 'blocked';

export interface WantedClaim {
  network: string;
  claim: string;
  status: WantedStatus;
  reason?: ProblemReason;
}

/** A claim of ours that lost its KubeVirt owner given one back, guarded by its uid and resourceVersion. */
export interface ClaimAdoption extends ClaimWrite {
  owner: OwnerReference;
  /** The claim has other owners (not KubeVirt's), which the new reference joins rather than replaces. */
  append: boolean;
}

export interface Plan {
  /** Undefined when there is no VM and no standalone VMI: nothing to create, nowhere to post Events. */
  owner?: ClaimOwner;
  creates: IPAMClaim[];
  /** ORPHAN: claims of ours without an owner, to be owned again by `owner`. */
  adopts: ClaimAdoption[];
  /** Remove CLAIM_FINALIZER, guarded by the claim's uid and resourceVersion. */
  removeFinalizers: ClaimWrite[];
  /**
   * Delete, guarded by the claim's uid and resourceVersion. Never lists a claim that `removeFinalizers` lists. Every
   * claim here is unused, so its finalizer is removed as soon as the delete is answered (the same reconcile): waiting
   * for the watch to show the deletion would hang on whichever of the two arrives first.
   */
  deletes: ClaimWrite[];
  problems: Problem[];
  /** Requeue with backoff: progress waits on something whose change no watch event of ours announces. */
  retry: boolean;
  /** Every network that persistence applies to, and how its claim stands. */
  wanted: WantedClaim[];
  /** SWAP: decide again with DecideInput.namedByRunningPods, which a claim of an earlier NAD waits on. */
  needsPodRead?: true;
}

export function hasWrites(plan: Plan): boolean {
  return plan.creates.length + plan.adopts.length + plan.removeFinalizers.length + plan.deletes.length > 0;
}

export function decide(input: DecideInput): Plan {
  const plan: Plan = { creates: [], adopts: [], removeFinalizers: [], deletes: [], problems: [], retry: false, wanted: [] };
  const { key } = input;
  const claims = input.claims.filter((claim) => (claim.metadata.namespace ?? key.namespace) === key.namespace);

  const owner = ownerOf(input);
  if (owner) plan.owner = owner.ref;

  const vmiNetworks = [...networksOf(input.vmi?.spec, true)];
  const inVmi = usageOf(key.name, vmiNetworks);

  // WANTED: claims are created only while the gate is on and the owner is not going away; a terminating owner
  // would only get claims that garbage collection removes again.
  if (owner && input.gateEnabled && !owner.terminating) {
    planWantedClaims(input, owner, claims, plan, inVmi);
  }

  const inUse = usageOf(key.name, [...networksOf(input.vm?.spec?.template?.spec, false), ...vmiNetworks]);
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
      if (input.vmi && input.namedByRunningPods === undefined) plan.needsPodRead = true;
      else if (!input.namedByRunningPods?.has(claim.metadata.name)) plan.deletes.push(write);
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
  if (vm) {
    const uid = vm.metadata.uid;
    if (!uid) return undefined;
    return {
      ref: { kind: 'VirtualMachine', name: vm.metadata.name, uid },
      apiVersion: apiVersionOf(resources.virtualMachines),
      terminating: isTerminating(vm),
      spec: vm.spec?.template?.spec,
    };
  }
  if (vmi && !controllerRef(vmi, 'VirtualMachine')) {
    const uid = vmi.metadata.uid;
    if (!uid) return undefined;
    return {
      ref: { kind: 'VirtualMachineInstance', name: vmi.metadata.name, uid },
      apiVersion: apiVersionOf(resources.virtualMachineInstances),
      terminating: isTerminating(vmi),
      spec: vmi.spec,
    };
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// WANTED: one claim per network of the owner's spec that (1) is a Multus secondary network, or the pod network of a
// namespace with a primary user-defined network, (2) has an interface that is not `state: absent`, and (3) refers to
// an acceptable persistent NAD (NAD-*). A stopped VM still has a spec, so its claims exist and a later start reuses
// them.

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

function planWantedClaims(input: DecideInput, owner: Owner, claims: readonly IPAMClaim[], plan: Plan, inVmi: Usage): void {
  const existing = new Map(claims.map((claim) => [claim.metadata.name, claim]));
  const claimedBy = new Map<string, string>();

  // With no claim at all, every name is the plain one (claimNameFor without a lookup), and the other names a network
  // may have need not be hashed only to be looked up in vain.
  const lookup: ClaimLookup | undefined = existing.size > 0 ? (name) => existing.get(name) : undefined;
  for (const { network, claim: name, claimSpec, problem } of persistentNetworks(input.key, owner.spec, input.nads, lookup)) {
    const block = (problem: Finding, retry = false): void => {
      plan.problems.push({ ...problem, network, claim: name });
      plan.wanted.push({ network, claim: name, status: 'blocked', reason: problem.reason });
      if (retry) plan.retry = true;
    };

    if (!claimSpec) {
      if (problem) block(problem);
      continue;
    }
    // Two networks on one claim would share addresses; see claimName() for why this needs a deliberate effort.
    const rival = claimedBy.get(name);
    if (rival !== undefined) {
      block({
        reason: 'ClaimNameConflict',
        message: `networks "${rival}" and "${network}" map to the same IPAMClaim name; rename one of them`,
      });
      continue;
    }
    claimedBy.set(name, network);

    const found = existing.get(name);
    if (!found) {
      plan.creates.push(newClaim(input.key, owner, name, claimSpec));
      plan.wanted.push({ network, claim: name, status: 'wanted' });
      continue;
    }
    const refs = found.metadata.ownerReferences ?? [];
    const ours = refs.some((ref) => ref.uid === owner.ref.uid);
    if (isTerminating(found)) {
      // EXISTING-TERMINATING: wait for it to go, then create the new one. Our own deleted claim is released by
      // FINALIZER-DELETED-UNUSED as soon as no VMI uses it, which a VMI event announces; another owner's goes when
      // garbage collection gets to it, which we must poll for.
      block(
        {
          reason: 'ClaimTerminating',
          message: ours
            ? `IPAMClaim ${name} was deleted while in use; it is kept until no VMI uses it, then created anew`
            : `IPAMClaim ${name} is being deleted; the new claim is created once it is gone`,
        },
        !ours,
      );
    } else if (ours && found.spec?.network !== claimSpec.network) {
      // EXISTING-OURS-STALE: our claim was made for another network than the NAD the VM names now (the network
      // moved to another NAD under the same logical name). The IPAM plugin would allocate on the old network, or
      // fail to, or hand its address out again on the new one: the claim is replaced, but only once no VMI uses it,
      // since deleting it would free the addresses of a running VM. Until then it is reported, and the webhook
      // refuses new launcher pods on it (ClaimNetworkMismatch).
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
        block({
          reason: 'ClaimNetworkMismatch',
          message:
            `IPAMClaim ${name} is for network "${found.spec?.network ?? ''}", but ${owner.ref.kind} ${owner.ref.name} now ` +
            `names network "${claimSpec.network}"; it is replaced once no VMI uses it (stop the VM), and new launcher ` +
            'pods are refused until then',
        });
      }
    } else if (ours) {
      // EXISTING-OURS: steady state. Never "fixing" its spec or labels keeps resyncs at zero writes, and the IPAM
      // plugin keys its allocation on the claim as it is.
      plan.wanted.push({ network, claim: name, status: 'created' });
      planSuperseded(input, owner, existing, network, name, claimSpec.network, plan);
    } else if (isOrphanOfOurs(found, input.key.name)) {
      // ORPHAN (below): ours, owned again by this plan.
      plan.wanted.push({ network, claim: name, status: 'created' });
    } else if (refs.length === 0) {
      // EXISTING-NOT-OWNED: made by hand (or orphaned). Adopting would hand a stranger's addresses to the VM, and
      // deleting would lose them: report, and look again later.
      block(
        {
          reason: 'ClaimNotOwned',
          message:
            `IPAMClaim ${name} exists without an owner; delete it, or give it an ownerReference to ` +
            `${owner.ref.kind} ${owner.ref.name}, for the ${owner.ref.kind} to use it`,
        },
        true,
      );
    } else {
      // EXISTING-OTHER-OWNER: typically the leftover of an earlier VM of the same name, which garbage collection
      // removes (FINALIZER-OWNER-GONE releases it); never overwrite or adopt it.
      const others = refs.map((ref) => `${ref.kind} ${ref.name} (uid ${ref.uid})`).join(', ');
      block(
        {
          reason: 'ClaimOwnedByAnotherObject',
          message: `IPAMClaim ${name} belongs to ${others}, not to this ${owner.ref.kind} (uid ${owner.ref.uid}); ` + 'waiting for it to be removed',
        },
        true,
      );
    }
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
function planSuperseded(
  input: DecideInput,
  owner: Owner,
  existing: ReadonlyMap<string, IPAMClaim>,
  network: string,
  current: string,
  nadNetwork: string,
  plan: Plan,
): void {
  for (const [name, old] of existing) {
    const oldNetwork = old.spec?.network;
    if (name === current || typeof oldNetwork !== 'string' || oldNetwork === nadNetwork || !claimNamesOf(input.key.name, network, oldNetwork).includes(name))
      continue;
    if (isTerminating(old) || !isOwnedBy(old, owner.ref.uid) || !hasOurMark(old, owner)) continue;
    const write = writeRef(old);
    if (!write || !kubevirtOwnerRefs(old).every((ref) => ref.name === input.key.name)) continue;
    if (input.namedByRunningPods === undefined) plan.needsPodRead = true;
    else if (!input.namedByRunningPods.has(name) && !plan.deletes.some((d) => d.uid === write.uid)) plan.deletes.push(write);
  }
}

/** The claims of the namespace by name, as far as the caller knows them. */
export type ClaimLookup = (name: string) => IPAMClaim | undefined;

/**
 * NAME: the claim name of one network of VM `vmName`. `<vm>.<network>` (claimName) unless that name is already
 * another VM's claim, which a dotted-name collision makes possible (VM `a` with network `b.c`, VM `a.b` with network
 * `c`): then collisionClaimName(), which is this VM's alone. The second VM of a collision thus gets its own claim
 * while every VM that does not collide keeps the name ipam-extensions gives it. Once a VM has its claim under the
 * collision name it keeps it, even after the other VM is gone, so its address never changes. "Another VM's" is read
 * from the KubeVirt owner references' NAMES: an earlier VM of the same name is not a collision (its claim is waited
 * for, EXISTING-OTHER-OWNER), and a claim with no KubeVirt owner is reported, not avoided (EXISTING-NOT-OWNED).
 * Controller and webhook call this with the same claims and get the same name.
 */
export function claimNameFor(vmName: string, network: string, lookup?: ClaimLookup, nadNetwork?: string): string {
  const plain = claimName(vmName, network);
  if (!lookup) return plain;
  const alternative = collisionClaimName(vmName, network);
  // SWAP: a claim of this VM already made for the network its NAD names now, under any of its names, is the one.
  if (nadNetwork !== undefined) {
    for (const name of claimNamesOf(vmName, network, nadNetwork)) {
      const claim = lookup(name);
      if (claim?.spec?.network === nadNetwork && kubevirtOwnerNames(claim).includes(vmName)) return name;
    }
  }
  if (alternative === plain) return plain;
  if (kubevirtOwnerNames(lookup(alternative)).includes(vmName)) return alternative;
  const holders = kubevirtOwnerNames(lookup(plain));
  return holders.length > 0 && !holders.includes(vmName) ? alternative : plain;
}

/**
 * NAME for each verdict that gets a claim: the name claimNameFor() picks among the claims `lookup` shows. The pod
 * mutation and the allocator's pod addresses both take the names from here, with the same claims, so a launcher
 * pod's `ips` always come from the claim its reference names.
 */
export function withClaimNames(vmName: string, verdicts: readonly NetworkVerdict[], lookup: ClaimLookup): NetworkVerdict[] {
  return verdicts.map((v) => (v.claimSpec ? { ...v, claim: claimNameFor(vmName, v.network, lookup, v.claimSpec.network) } : v));
}

/** Every name the claim of `network` of VM `vmName` may have: plain, collision, and (with its NAD network) swap. */
export function claimNamesOf(vmName: string, network: string, nadNetwork?: string): string[] {
  const names = [claimName(vmName, network), collisionClaimName(vmName, network)];
  if (nadNetwork !== undefined) names.push(swapClaimName(vmName, network, nadNetwork));
  return [...new Set(names)];
}

function kubevirtOwnerNames(claim: IPAMClaim | undefined): string[] {
  return claim ? kubevirtOwnerRefs(claim).map((ref) => ref.name) : [];
}

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

function secondaryVerdict(key: ObjectKey, nads: ReadonlyMap<string, NetworkAttachmentDefinition>, network: string, reference: unknown): Verdict {
  const ref = parseNadReference(reference, key.namespace);
  if (!ref) {
    return blocked('InvalidNetworkReference', `networkName ${JSON.stringify(reference)} is neither "name" nor "namespace/name"`);
  }
  const nad = nads.get(`${ref.namespace}/${ref.name}`);
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
  const slash = mapKey.indexOf('/');
  return {
    namespace: nad.metadata?.namespace ?? (slash >= 0 ? mapKey.slice(0, slash) : ''),
    name: nad.metadata?.name ?? mapKey.slice(slash + 1),
  };
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

interface Usage {
  vmName: string;
  networks: readonly VmNetwork[];
  /** Worked out by identitiesOf() when a claim is first judged against this usage. */
  identities?: UsageIdentities;
}

interface UsageIdentities {
  networks: Set<string>;
  claimNames: Set<string>;
  interfaces: Set<string>;
}

/**
 * The networks of a VM template (skipping absent interfaces) or of a VMI spec (all of them: an unplug in progress
 * keeps the network there until the interface is gone).
 */
function* networksOf(spec: VmiSpecLike | undefined, includeAbsent: boolean): Generator<VmNetwork> {
  spec = effectiveVmiSpec(spec);
  for (const net of spec?.networks ?? []) {
    if (!net || typeof net.name !== 'string') continue;
    if (includeAbsent || !isAbsent(spec, net.name)) yield net;
  }
}

/** The networks in use, whose identities are only worked out if a claim is judged against them. */
function usageOf(vmName: string, networks: readonly VmNetwork[]): Usage {
  return { vmName, networks };
}

/**
 * What identifies the claim of each network: its claim name, the name kubevirt/ipam-extensions gave it (claims
 * adopted after a switch from the reference implementation keep the reference's name), and its pod interface.
 * Worked out once per decision, and only when there is a claim to judge: a VM without claims (every VM of a cold
 * start) would otherwise hash names it never compares.
 */
function identitiesOf(usage: Usage): UsageIdentities {
  if (usage.identities) return usage.identities;
  const ids: UsageIdentities = { networks: new Set(), claimNames: new Set(), interfaces: new Set() };
  for (const net of usage.networks) {
    ids.networks.add(net.name);
    ids.claimNames.add(claimName(usage.vmName, net.name));
    ids.claimNames.add(collisionClaimName(usage.vmName, net.name));
    ids.claimNames.add(referenceClaimName(usage.vmName, net.name));
    ids.interfaces.add(net.pod || net.multus?.default ? PRIMARY_POD_INTERFACE : podInterfaceName(net.name));
  }
  usage.identities = ids;
  return ids;
}

/**
 * By name (any name this VM gives or gave the claim of a network it has), or by pod interface, which for a secondary
 * network is a hash of the network's name and so identifies it whatever the claim is called. `eth0` identifies no
 * network (every pod network is on eth0): an eth0 claim is in use only under a name this VM produces for a pod
 * network it has, so a renamed pod network's old claim is not kept for the VM's whole life.
 */
function isUsed(claim: IPAMClaim, usage: Usage): boolean {
  const ids = identitiesOf(usage);
  const iface = claim.spec?.interface;
  if (ids.claimNames.has(claim.metadata.name)) return true;
  // A swap name (SWAP) carries the claim's own NAD network in its hash: recognised from the claim itself.
  const nadNetwork = claim.spec?.network;
  if (typeof nadNetwork === 'string' && [...ids.networks].some((net) => swapClaimName(usage.vmName, net, nadNetwork) === claim.metadata.name)) return true;
  return !!iface && iface !== PRIMARY_POD_INTERFACE && ids.interfaces.has(iface);
}

// ---------------------------------------------------------------------------------------------------------------
// Small facts about objects.

function isTerminating(obj: KubeObject): boolean {
  return !!obj.metadata.deletionTimestamp;
}

function hasFinalizer(claim: IPAMClaim): boolean {
  return claim.metadata.finalizers?.includes(CLAIM_FINALIZER) ?? false;
}

function isOwnedBy(claim: IPAMClaim, uid: string): boolean {
  return (claim.metadata.ownerReferences ?? []).some((ref) => ref.uid === uid);
}

function isAbsent(spec: VmiSpecLike | undefined, network: string): boolean {
  return spec?.domain?.devices?.interfaces?.find((iface) => iface?.name === network)?.state === 'absent';
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
