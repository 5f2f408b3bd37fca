// What one pass of the allocator loop (loop.ts) works with: its dependencies, what gather.ts reads, what decide.ts
// decides and apply.ts carries out.

import type { Logger } from 'pino';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import type { Cause, EventRecorder } from '../controller/events.ts';
import type { WriteOverlay } from '../controller/write-overlay.ts';
import type { AllocatorMetrics } from './metrics.ts';
import type { NetworkState } from './nad.ts';
import type { InUse, NetworkPlan, PlanClaim, PlanInput } from './plan.ts';
import type { ReadCache } from './requests.ts';
import type { VmisByNad } from './running-address.ts';

export interface IndexedCache<T> extends ReadCache<T> {
  getByKey(key: string): T | undefined;
  indexKeys(index: string, value: string): string[];
  byIndex(index: string, value: string): T[];
}

/** Writes a claim's status with the resourceVersion precondition; resolves to the API server's answer. */
export type StatusWriter = (claim: IPAMClaim, status: NonNullable<IPAMClaim['status']>, resourceVersion: string, signal: AbortSignal) => Promise<IPAMClaim>;
export type ClaimReader = (namespace: string, name: string, signal: AbortSignal) => Promise<IPAMClaim | undefined>;
/** Lists the launcher pods created by the VMI of uid `vmiUid` (label selector; the caller checks the owner). */
export type LauncherPodLister = (namespace: string, vmiUid: string, signal: AbortSignal) => Promise<Pod[]>;

export interface NetworkReconcilerDeps {
  nads: IndexedCache<NetworkAttachmentDefinition>;
  claims: IndexedCache<IPAMClaim>;
  vms: ReadCache<VirtualMachine>;
  vmis: ReadCache<VirtualMachineInstance> & VmisByNad;
  overlay: WriteOverlay;
  writeStatus: StatusWriter;
  readClaim: ClaimReader;
  /**
   * Read only for an empty claim of a running VMI, about to be allocated: the claim takes the address the VM has
   * (running-address.ts). Without it (tests), such claims are allocated as any other.
   */
  listLauncherPods?: LauncherPodLister;
  recorder: EventRecorder;
  log: Logger;
  metrics?: AllocatorMetrics;
  now?: () => Date;
}

/** What the plan takes (its pool once the state is ready), and what else the pass needs. */
export interface NetworkInput extends Omit<PlanInput, 'pool'> {
  kind: 'network';
  nads: NetworkAttachmentDefinition[];
  state: NetworkState;
  claims: PlanClaim[];
  /** Writes of earlier passes still of unknown outcome. */
  unsettled: boolean;
  /** Launcher pods that could not be read: their claims wait. */
  podsUnread: boolean;
  /** Looked for only while a claim waits. */
  inUse: InUse[];
}

export type AllocatorInput = NetworkInput | { kind: 'nad'; key: string; nad: NetworkAttachmentDefinition | undefined };

export interface AllocatorPlan {
  /** Every current cause of each scope, reported before any write. */
  reports: { scope: string; causes: Cause[] }[];
  /** The network is not served: its metrics go. */
  forget?: true;
  /** The network's pool is not usable (logged). */
  problems?: Map<string, string[]>;
  network?: NetworkPlan;
  /** The claims' Events, reported after the writes. */
  claimEvents?: { scope: string; causes: Cause[] };
}
