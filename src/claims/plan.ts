// The decision's plain data: what decide() reads for one VM key (DecideInput), and the plan it returns (Plan). The
// rules that turn one into the other are in decide.ts.

import type { IPAMClaim, NetworkAttachmentDefinition, OwnerReference, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import type { ObjectKey } from './nad-reference.ts';

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
  /** One of the launcher pods read for namedByRunningPods is being deleted: no event of ours says when it has finished. */
  runningPodTerminating?: boolean;
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
  | 'IPAllocationRefused'
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
