// The shapes the webhook's admission modules share: the AdmissionReview v1 envelope, and what the handler is given
// (admission.ts re-exports those used outside the webhook's admission modules).

import type { PodAddressLookup } from '../allocator/pod-addresses.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachineInstance } from '../kube/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { WebhookMetrics } from './metrics.ts';

export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  resource?: { group?: string; version?: string; resource?: string };
  subResource?: string;
  namespace?: string;
  name?: string;
  operation?: string;
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patchType?: 'JSONPatch';
  /** base64 of the JSON patch */
  patch?: string;
  status?: { code?: number; reason?: string; message?: string };
  warnings?: string[];
}

export interface AdmissionReview {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

/** A read-only view of an informer cache (src/sources' Store has this shape). */
export interface ObjectCache<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(namespace?: string): T[];
}

/** The changes of the claims cache, as src/sources' informers deliver them (an Observable's subscribe). */
export interface ClaimEvents {
  subscribe(next: (event: { object: IPAMClaim }) => void): { unsubscribe(): void };
}

/** A GET from the API: resolves undefined when the object does not exist (404), rejects on any other failure. */
export type Fetch<T> = (namespace: string, name: string, signal: AbortSignal) => Promise<T | undefined>;

export interface PodAdmissionDeps {
  logger: Logger;
  /** The PersistentIPs gate as resolved now (flag or KubeVirt CR). */
  gateEnabled: () => boolean;
  vmis: ObjectCache<VirtualMachineInstance>;
  nads: ObjectCache<NetworkAttachmentDefinition>;
  fetchVmi: Fetch<VirtualMachineInstance>;
  /** Optional: without it a NAD missing from the cache is taken as not existing. */
  fetchNad?: Fetch<NetworkAttachmentDefinition>;
  /** The claims the controller watches: a pod is only pointed at a claim of its own VMI or VM (see below). */
  claims: ObjectCache<IPAMClaim>;
  /** Every change of the claims cache (src/sources' events$): what a wait for a claim listens to. */
  claimEvents: ClaimEvents;
  fetchClaim: Fetch<IPAMClaim>;
  /**
   * At CREATE, how long a claim that is not (yet) this VM's is watched for in the cache before the API is asked and
   * the pod denied: the controller creates a new VM's claims within milliseconds of seeing it, so a pod admitted
   * a moment early waits here instead of going through KubeVirt's retry. Default 1000 ms (within budgetMs).
   */
  claimWaitMs?: number;
  /**
   * Reports why launcher pods of a VM are denied (an Event on the VM, or on a standalone VMI); called with no
   * causes when a pod of it is admitted, which clears them. Fire and forget: never delays the answer.
   */
  reportDenials?: (target: DenialTarget, causes: { reason: string; message: string }[]) => void;
  /** The cluster default network NAD named in a primary UDN's default-network element. */
  clusterDefaultNetwork?: { namespace: string; name: string };
  /** Time for the whole admission, API fallbacks included; below the webhook's timeoutSeconds (5). Default 3 s. */
  budgetMs?: number;
  metrics?: WebhookMetrics;
  /** The built-in allocator's addresses for a pod's networks (absent: no allocator). */
  podAddresses?: PodAddressLookup;
  /**
   * False until the caches have their first full list. Before that the gate and the NADs are unknown (an empty
   * cache reads as "gate off, no persistent network"), so launcher pods are refused with a retryable answer rather
   * than admitted without their references.
   */
  synced?: () => boolean;
  /** The one namespace the controller watches (--namespace): launcher pods elsewhere are none of its business. */
  watchNamespace?: string;
}

/** The object Events about a denied launcher pod go on: its VM, or the VMI when it has none. */
export interface DenialTarget {
  apiVersion: string;
  kind: 'VirtualMachine' | 'VirtualMachineInstance';
  namespace: string;
  name: string;
  uid: string;
}
