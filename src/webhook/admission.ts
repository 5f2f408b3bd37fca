// AdmissionReview v1 in, AdmissionReview v1 out, for launcher pods: find the pod's VMI and NADs (caches first, the
// API when the caches have not seen them), run the pure mutation, and answer. Every request first passes
// claim-guard.ts, which refuses (403) any other pod, and any Binding, that would name a claim.
//
// ERROR BEHAVIOUR (see docs/webhook-behaviour.md; docs/webhook.md explains failurePolicy Fail):
// - The VMI cannot be read (API error or timeout, when the cache has not seen it): DENY, with a message that names
//   the VMI and says it is transient. Allowing would start the VM with an address from the general pool instead of
//   its claim's, the one outcome this product exists to prevent, and silently; a denial makes virt-controller
//   record FailedCreate and retry the pod with backoff, which recovers by itself once the API answers. It is the
//   same trade-off as failurePolicy Fail, made explicitly and answered before the API server's own timeout (5 s):
//   a timeout would be judged by failurePolicy and, if an operator switched it to Ignore, admit the pod without
//   the reference.
// - The API says the VMI does not exist (authoritative 404), or it exists with another UID than the pod's owner
//   reference: ALLOW unchanged, with a warning. The pod belongs to a VMI that is gone; no claim will be made for it
//   and garbage collection removes the pod. Denying would only keep a dead object retrying.
// - A NAD the VMI references cannot be read (API error): DENY, same reasoning as the VMI. A NAD that does not exist:
//   the network is not persistent (the CNI fails that pod anyway), reported.
// - The pod's annotations cannot be parsed: ALLOW unchanged with a warning and a log line. Multus will reject the
//   same annotation; rewriting something we cannot read could only make it worse.
// - The pod has no controller owner reference to a VMI (a copy made by `kubectl debug --copy-to`, a hand-made pod
//   with the launcher label and kubevirt.io/domain): ALLOW unchanged with a warning, and DENY it if it already names
//   a claim. Nothing but that owner reference, uid and all, ties a pod to its VMI.
// - UPDATE (carry-over.ts): every reference of the old object is put back on its element whatever the gate, the NADs
//   or the caches say, so a running pod never loses one (virt-controller rebuilds the annotation without them); an
//   UPDATE that changes one is DENIED. Only elements new at this UPDATE, or gaining a reference, are decided, with
//   CREATE's checks, wait and API read.
// - A pod whose networks cannot be persistent judged from the NADs alone (all NADs known and ordinary, no
//   persistent primary network) is admitted without reading its VMI, so VMs on ordinary networks never wait for
//   the VMI lookups above.
// - Built-in allocator networks (docs/allocator.md, "Pod admission"): a pod whose claim has no address yet, or was
//   refused one, is DENIED with the reason (KubeVirt retries); never admitted with an address other than its
//   claim's. A claim that cannot be read: DENY, as for the VMI.

import { ClaimLookupError, type PodAddresses, type PodAddressLookup } from '../allocator/pod-addresses.ts';
import { MULTUS_NETWORKS_ANNOTATION } from '../claims/constants.ts';
import { isObject } from '../claims/nad-config.ts';
import {
  claimNameFor,
  claimNamesOf,
  claimStanding,
  controllerRef,
  isKubevirtRef,
  nadKeyOfNetworkName,
  ownerUidsOf,
  persistentNetworks,
  withClaimNames,
  type NetworkVerdict,
} from '../claims/index.ts';
import { ifFound } from '../kube/errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { apiVersionOf, resources } from '../kube/resources.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VirtualMachineInstance } from '../kube/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { WebhookMetrics } from './metrics.ts';
import type { JsonPatchOp } from '../kube/patch.ts';
import { carryOverReferences } from './carry-over.ts';
import { elementNamespace, IPAM_CLAIM_REFERENCE, namedClaims, parseNetworkSelection } from '../claims/network-selection.ts';
import { isLauncherPod, mayNeedReferences, mutateLauncherPod, type PodMutation } from './pod-mutation.ts';
import { aggregateReports } from './report-aggregation.ts';
import { annotationsOf, guardClaimReferences } from './claim-guard.ts';

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

export function denialTargetOf(vmi: VirtualMachineInstance, namespace: string): DenialTarget | undefined {
  const vmRef = controllerRef(vmi, 'VirtualMachine');
  if (vmRef?.uid)
    return { apiVersion: vmRef.apiVersion || apiVersionOf(resources.virtualMachines), kind: 'VirtualMachine', namespace, name: vmRef.name, uid: vmRef.uid };
  if (!vmi.metadata.uid) return undefined;
  return {
    apiVersion: apiVersionOf(resources.virtualMachineInstances),
    kind: 'VirtualMachineInstance',
    namespace,
    name: vmi.metadata.name,
    uid: vmi.metadata.uid,
  };
}

/** A request that is not an AdmissionReview v1: the server answers HTTP 400. */
export class BadAdmissionReviewError extends Error {
  override readonly name = 'BadAdmissionReviewError';
}

/** Builds GET functions for the deps from src/kube's client (404 → undefined). */
export function apiFetchers(client: Pick<KubeClient, 'get'>): {
  fetchVmi: Fetch<VirtualMachineInstance>;
  fetchNad: Fetch<NetworkAttachmentDefinition>;
  fetchClaim: Fetch<IPAMClaim>;
} {
  const fetcher =
    <T>(r: (typeof resources)[keyof typeof resources]): Fetch<T> =>
    (namespace, name, signal) =>
      ifFound(client.get<T>(r, namespace, name, { signal }));
  return {
    fetchVmi: fetcher(resources.virtualMachineInstances),
    fetchNad: fetcher(resources.networkAttachmentDefinitions),
    fetchClaim: fetcher(resources.ipamClaims),
  };
}

/** Validates the envelope; throws BadAdmissionReviewError when it is not an AdmissionReview v1 with a request. */
export function readAdmissionReview(body: unknown): AdmissionRequest {
  if (!isObject(body)) throw new BadAdmissionReviewError('the body is not a JSON object');
  if (body['apiVersion'] !== 'admission.k8s.io/v1' || body['kind'] !== 'AdmissionReview') {
    throw new BadAdmissionReviewError(`expected admission.k8s.io/v1 AdmissionReview, got ${String(body['apiVersion'])} ${String(body['kind'])}`);
  }
  const request = body['request'];
  if (!isObject(request) || typeof request['uid'] !== 'string' || request['uid'] === '') {
    throw new BadAdmissionReviewError('the AdmissionReview has no request uid');
  }
  return request as unknown as AdmissionRequest;
}

export function reviewResponse(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

/**
 * The VMI a launcher pod belongs to: its controller owner reference, uid and all. Nothing else identifies it: a pod
 * that merely carries the launcher label and `kubevirt.io/domain` (`kubectl debug --copy-to`, a hand-made pod) is not
 * the VMI's, and pointing it at the VM's claim would give it the VM's address.
 */
export function vmiOf(pod: Pod): { name: string; uid: string } | undefined {
  // The API server lets an object have one controller reference at most.
  const owner = controllerRef(pod, 'VirtualMachineInstance');
  return owner && isKubevirtRef(owner) && owner.name && owner.uid ? { name: owner.name, uid: owner.uid } : undefined;
}

/** Two or more dots: `<vm>.<network>` may then be another VM's name for another network (a dotted-name collision). */
function mayCollide(claim: string): boolean {
  return claim.indexOf('.') !== claim.lastIndexOf('.');
}

const encodePatch = (ops: readonly JsonPatchOp[]): string => Buffer.from(JSON.stringify(ops), 'utf8').toString('base64');

/** The claims named by the given elements of the networks annotation. */
function freshReferences(pod: Pod, indices: readonly number[]): string[] {
  const selection = parseNetworkSelection(pod.metadata?.annotations?.[MULTUS_NETWORKS_ANNOTATION] ?? '');
  if (!selection.ok) return [];
  return indices.flatMap((i) => {
    const ref = selection.elements[i]?.[IPAM_CLAIM_REFERENCE];
    return typeof ref === 'string' && ref !== '' ? [ref] : [];
  });
}

/**
 * The reason of the Events the webhook posts on a VM whose launcher pods it refuses; the message starts with the
 * cause (ClaimNotFound, ClaimOwnedByAnotherObject, ...). Distinct from the controller's reasons, which say what
 * blocks a claim, so that `kubectl get events --field-selector reason=LauncherPodRefused` lists the VMs kept from
 * starting.
 */
export const LAUNCHER_POD_REFUSED = 'LauncherPodRefused';

type Outcome = 'patched' | 'unchanged' | 'skipped' | 'denied' | 'allowed_without_vmi' | 'unreadable';

class TransientLookupError extends Error {
  override readonly name = 'TransientLookupError';
  readonly object: { kind: string; namespace: string; name: string };
  constructor(object: { kind: string; namespace: string; name: string }, cause: unknown) {
    super(`cannot read ${object.kind} ${object.namespace}/${object.name}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.object = object;
  }
}

export type PodAdmissionHandler = (body: unknown, signal?: AbortSignal) => Promise<AdmissionReview>;

export function createPodAdmissionHandler(deps: PodAdmissionDeps): PodAdmissionHandler {
  const budgetMs = deps.budgetMs ?? 3000;
  const claimWaitMs = Math.max(0, Math.min(deps.claimWaitMs ?? 1000, budgetMs - 1000));
  const log = deps.logger.child({ component: 'webhook' });

  const fetchVmi = async (namespace: string, name: string, signal: AbortSignal): Promise<VirtualMachineInstance | undefined> => {
    try {
      const vmi = await deps.fetchVmi(namespace, name, signal);
      deps.metrics?.vmiLookups.inc({ source: vmi ? 'api' : 'api_not_found' });
      return vmi;
    } catch (error) {
      deps.metrics?.vmiLookups.inc({ source: 'api_error' });
      throw new TransientLookupError({ kind: 'VirtualMachineInstance', namespace, name }, signal.aborted ? signal.reason : error);
    }
  };

  /** Settles at the next change of a claim of `keys` in the cache, at `until`, or when `signal` aborts. */
  const nextChange = (keys: ReadonlySet<string>, until: number, signal: AbortSignal): { settled: Promise<void>; cancel(): void } => {
    let cancel = (): void => undefined;
    const settled = new Promise<void>((resolve) => {
      let subscription: { unsubscribe(): void } | undefined;
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', finish);
        subscription?.unsubscribe();
        resolve();
      };
      cancel = finish;
      const timer = setTimeout(finish, Math.max(0, until - Date.now()));
      signal.addEventListener('abort', finish, { once: true });
      subscription = deps.claimEvents.subscribe(({ object }) => {
        if (keys.has(`${object.metadata.namespace}/${object.metadata.name}`)) finish();
      });
      if (done) subscription.unsubscribe();
    });
    return { settled, cancel };
  };

  const namespaceNads = (namespace: string): Map<string, NetworkAttachmentDefinition> =>
    new Map(deps.nads.list(namespace).map((nad) => [`${nad.metadata.namespace ?? namespace}/${nad.metadata.name}`, nad]));

  /** From the caches only: the namespace's NADs and those the pod's elements name (for mayNeedReferences). */
  const nadsForPod = (pod: Pod, namespace: string): Map<string, NetworkAttachmentDefinition> => {
    const map = namespaceNads(namespace);
    const selection = parseNetworkSelection(pod.metadata?.annotations?.[MULTUS_NETWORKS_ANNOTATION] ?? '');
    for (const element of selection.ok ? selection.elements : []) {
      const ns = elementNamespace(element, namespace);
      const nad = map.has(`${ns}/${element.name}`) ? undefined : deps.nads.get(ns, element.name);
      if (nad) map.set(`${ns}/${element.name}`, nad);
    }
    return map;
  };

  /** What the pure mutation needs: the namespace's NADs and those the VMI references, from the API if not cached. */
  const nadsForVmi = async (vmi: VirtualMachineInstance, namespace: string, signal: AbortSignal): Promise<Map<string, NetworkAttachmentDefinition>> => {
    const map = namespaceNads(namespace);
    for (const net of vmi.spec?.networks ?? []) {
      const key = net?.multus ? nadKeyOfNetworkName(net.multus.networkName, namespace) : undefined;
      if (!key || map.has(key)) continue;
      const [ns, name] = key.split('/') as [string, string];
      const cached = deps.nads.get(ns, name);
      if (cached) {
        map.set(key, cached);
        continue;
      }
      if (!deps.fetchNad) continue;
      try {
        const fetched = await deps.fetchNad(ns, name, signal);
        if (fetched) map.set(key, fetched);
      } catch (error) {
        throw new TransientLookupError({ kind: 'NetworkAttachmentDefinition', namespace: ns, name }, signal.aborted ? signal.reason : error);
      }
    }
    return map;
  };

  /**
   * The claims the pod's persistent networks would be pointed at. A claim the cache shows as this VM's is taken as
   * is (uids are never reused, and a claim of ours that is deleted meanwhile keeps its finalizer while this VMI
   * runs). Any other answer is not trusted yet at CREATE: the cache is watched until `waitUntil` (the controller
   * may be creating the claim, or releasing a leftover of an earlier VM of the same name), then the API has the
   * last word. At UPDATE the cache alone decides (nothing is denied then).
   */
  const claimsForVmi = async (
    vmi: VirtualMachineInstance,
    persistent: readonly NetworkVerdict[],
    namespace: string,
    create: boolean,
    waitUntil: number,
    signal: AbortSignal,
  ): Promise<Map<string, IPAMClaim>> => {
    const owners = ownerUidsOf(vmi);
    const out = new Map<string, IPAMClaim>();
    for (const verdict of persistent) {
      if (!verdict.claimSpec) continue;
      // Every name the network's claim may have (claimNameFor): which one applies depends on the claims themselves.
      const nadNetwork = verdict.claimSpec.network;
      const names = claimNamesOf(vmi.metadata.name, verdict.network, nadNetwork);
      const fromCache = () =>
        new Map(
          names.flatMap((n) => {
            const c = deps.claims.get(namespace, n);
            return c ? [[n, c] as const] : [];
          }),
        );
      const usable = (view: ReadonlyMap<string, IPAMClaim>) => {
        const name = claimNameFor(vmi.metadata.name, verdict.network, (n) => view.get(n), nadNetwork);
        return claimStanding(view.get(name), name, owners, verdict.claimSpec?.network).usable;
      };
      let view = fromCache();
      // A name with two or more dots can be another VM's claim that the cache has not shown yet: the chosen claim
      // is confirmed by the API before a pod is pointed at it.
      const confirm = () => mayCollide(claimNameFor(vmi.metadata.name, verdict.network, (n) => view.get(n), nadNetwork));
      if (!create || (usable(view) && !confirm())) deps.metrics?.claimLookups.inc({ source: 'cache' });
      else {
        const keys = new Set(names.map((n) => `${namespace}/${n}`));
        while (Date.now() < waitUntil && !signal.aborted && !usable(view)) {
          // Listening before the cache is read again: a change in between is not lost.
          const change = nextChange(keys, waitUntil, signal);
          view = fromCache();
          if (usable(view)) {
            change.cancel();
            break;
          }
          await change.settled;
          view = fromCache();
        }
        const fromApi = !usable(view) || confirm();
        deps.metrics?.claimLookups.inc({ source: fromApi ? 'api' : 'cache_after_wait' });
        if (fromApi) {
          const fetched = new Map<string, IPAMClaim>();
          for (const name of names) {
            try {
              const claim = await deps.fetchClaim(namespace, name, signal);
              if (claim) fetched.set(name, claim);
            } catch (error) {
              throw new TransientLookupError({ kind: 'IPAMClaim', namespace, name }, signal.aborted ? signal.reason : error);
            }
          }
          view = fetched;
        }
      }
      for (const [name, claim] of view) out.set(name, claim);
    }
    return out;
  };

  const admit = async (request: AdmissionRequest, signal: AbortSignal): Promise<{ response: AdmissionResponse; outcome: Outcome }> => {
    const uid = request.uid;
    const allow = (outcome: Outcome, warnings: string[] = []): { response: AdmissionResponse; outcome: Outcome } => ({
      response: { uid, allowed: true, ...(warnings.length ? { warnings } : {}) },
      outcome,
    });
    const operation = request.operation;
    const core = (request.kind?.group ?? '') === '';
    // pods/status is an UPDATE of the whole pod, annotations included; a Binding's annotations are merged into the pod.
    const isPod = core && request.kind?.kind === 'Pod' && (!request.subResource || (request.subResource === 'status' && operation === 'UPDATE'));
    const isBinding = core && request.kind?.kind === 'Binding' && request.subResource === 'binding';
    if ((!isPod && !isBinding) || (operation !== 'CREATE' && operation !== 'UPDATE') || !isObject(request.object)) return allow('skipped');
    const pod = request.object as unknown as Pod;
    if (!isObject(pod.metadata)) return allow('skipped');
    const namespace = request.namespace || pod.metadata.namespace || '';
    if (deps.watchNamespace !== undefined && namespace !== deps.watchNamespace) return allow('skipped');
    const generateName = (pod.metadata as { generateName?: unknown }).generateName;
    const podName: string = pod.metadata.name || request.name || (typeof generateName === 'string' ? generateName : '');
    const plog = log.child({
      namespace,
      pod: podName,
      operation,
      uid,
      ...(request.subResource ? { subResource: request.subResource } : {}),
      ...(request.dryRun ? { dryRun: true } : {}),
    });
    const oldPod = operation === 'UPDATE' && isObject(request.oldObject) ? (request.oldObject as unknown as Pod) : undefined;
    const launcher = isPod && (isLauncherPod(pod) || (oldPod !== undefined && isLauncherPod(oldPod)));
    const guarded = guardClaimReferences({
      kind: isBinding ? 'Binding' : 'Pod',
      operation,
      subject: `${namespace}/${podName}`,
      annotations: annotationsOf(pod),
      ...(oldPod ? { oldAnnotations: annotationsOf(oldPod) } : {}),
      launcher,
    });
    if (guarded) {
      plog.warn({ rule: guarded.rule, claims: guarded.claims }, guarded.message);
      return { response: { uid, allowed: false, status: { code: 403, reason: 'Forbidden', message: guarded.message } }, outcome: 'denied' };
    }
    if (!launcher) return allow('skipped');

    // UPDATE: every reference of the running pod is carried over first, from the two objects alone (carry-over.ts):
    // nothing below (the gate, the caches, the NADs) may take one away. Only fresh elements are decided.
    const carry = request.operation === 'UPDATE' ? carryOverReferences(oldPod, pod, namespace) : undefined;
    if (carry && carry.carried.length > 0) plog.info({ carried: carry.carried }, 'restored IPAM claim references the update dropped');
    if (carry && carry.refusals.length > 0) {
      const message = `persistent-ips: update of launcher pod ${namespace}/${podName} refused: ${carry.refusals.join('; ')}`;
      plog.warn({ refusals: carry.refusals }, 'refusing an update that would change a claim reference');
      return { response: { uid, allowed: false, status: { code: 403, reason: 'Forbidden', message } }, outcome: 'denied' };
    }
    const subject = carry?.pod ?? pod;
    const carried = carry?.patch ?? [];
    const withCarried = (outcome: Outcome, warnings: string[] = []): { response: AdmissionResponse; outcome: Outcome } =>
      carried.length === 0
        ? allow(outcome, warnings)
        : {
            response: { uid, allowed: true, patchType: 'JSONPatch', patch: encodePatch(carried), ...(warnings.length ? { warnings } : {}) },
            outcome: 'patched',
          };
    if (carry && carry.fresh.length === 0) return withCarried('unchanged');
    const fresh = carry ? new Set(carry.fresh) : undefined;
    // The claims the elements to decide already name: each must be proved this VM's below, or the pod is refused.
    const named = carry ? freshReferences(subject, carry.fresh) : namedClaims(subject);
    const refuse = (why: string): { response: AdmissionResponse; outcome: Outcome } => {
      const message = `persistent-ips: launcher pod ${namespace}/${podName} names IPAMClaim ${named.join(', ')}, but ${why}; nothing shows the claim is its VM's, so the pod is refused`;
      plog.warn({ claims: named }, message);
      return { response: { uid, allowed: false, status: { code: 403, reason: 'Forbidden', message } }, outcome: 'denied' };
    };

    if (deps.synced && !deps.synced()) {
      const message = `persistent-ips is starting and has not read the cluster yet; launcher pod ${namespace}/${podName} will be admitted on KubeVirt's retry`;
      plog.info('denying launcher pod: caches not synced yet');
      return { response: { uid, allowed: false, status: { code: 503, reason: 'ServiceUnavailable', message } }, outcome: 'denied' };
    }
    // A pod that names a claim must be proved to be that VM's launcher pod; nothing below may wave it through.
    if (named.length > 0 && !isLauncherPod(subject)) return refuse('it is not a virt-launcher pod');
    if (!deps.gateEnabled()) return named.length > 0 ? refuse('the PersistentIPs feature gate is off') : withCarried('skipped');

    if (named.length === 0 && !mayNeedReferences(subject, namespace, nadsForPod(subject, namespace))) {
      plog.debug('launcher pod on ordinary networks only');
      return withCarried('unchanged');
    }
    const ref = vmiOf(subject);
    if (!ref) {
      if (named.length > 0) return refuse('it has no controller owner reference to a VirtualMachineInstance (a copied or hand-made pod)');
      const message = `persistent-ips: launcher pod ${namespace}/${podName} has no controller owner reference to a VirtualMachineInstance (a copied or hand-made pod); admitted without IPAM claim references`;
      plog.warn(message);
      return withCarried('allowed_without_vmi', [message]);
    }
    const vmiLog = plog.child({ vmi: ref.name });

    let vmi = deps.vmis.get(namespace, ref.name);
    let fromApi = false;
    if (vmi && vmi.metadata.uid === ref.uid) {
      deps.metrics?.vmiLookups.inc({ source: 'cache' });
    } else {
      // The cache has not seen this VMI (just created) or holds an earlier incarnation of the name.
      vmi = await fetchVmi(namespace, ref.name, signal);
      fromApi = true;
    }
    const gone = (why: string): { response: AdmissionResponse; outcome: Outcome } => {
      if (named.length > 0) return refuse(`VirtualMachineInstance ${namespace}/${ref.name} ${why}`);
      const message = `persistent-ips: VirtualMachineInstance ${namespace}/${ref.name} ${why}; launcher pod admitted without IPAM claim references`;
      vmiLog.warn(message);
      return withCarried('allowed_without_vmi', [message]);
    };
    if (!vmi) return gone('does not exist');
    if (vmi.metadata.uid !== ref.uid) return gone(`has uid ${vmi.metadata.uid ?? '(none)'}, not the pod owner's ${ref.uid}`);

    const waitUntil = Date.now() + claimWaitMs;
    const compute = async (v: VirtualMachineInstance): Promise<PodMutation> => {
      const nads = await nadsForVmi(v, namespace, signal);
      // Fresh elements of an UPDATE get CREATE's wait and API read.
      // Once per admission: the claims wait and the mutation work on the same verdicts.
      const persistent = persistentNetworks({ namespace, name: v.metadata.name }, v.spec, nads);
      const claims = await claimsForVmi(v, persistent, namespace, true, waitUntil, signal);
      let addresses: Map<string, PodAddresses> | undefined;
      if (deps.podAddresses && request.operation === 'CREATE') {
        try {
          const verdicts = withClaimNames(v.metadata.name, persistent, (name) => claims.get(name));
          addresses = await deps.podAddresses(namespace, v, nads, verdicts, claims, signal);
        } catch (error) {
          if (!(error instanceof ClaimLookupError)) throw error;
          throw new TransientLookupError(error.object, error.cause);
        }
      }
      return mutateLauncherPod({
        pod: subject,
        namespace,
        ...(fresh ? { fresh } : {}),
        operation: request.operation!,
        vmi: v,
        nads,
        persistent,
        gateEnabled: true,
        claims,
        ...(deps.clusterDefaultNetwork ? { clusterDefaultNetwork: deps.clusterDefaultNetwork } : {}),
        ...(addresses ? { addresses } : {}),
      });
    };
    let current = vmi;
    let result = await compute(vmi);
    if (result.staleVmiSuspected && !fromApi) {
      // The pod has a network the cached VMI lacks: a hotplug the cache has not caught up with. Ask the API.
      vmiLog.debug('the cached VMI looks older than the pod; reading it from the API');
      const again = await fetchVmi(namespace, ref.name, signal);
      if (!again) return gone('does not exist');
      if (again.metadata.uid !== ref.uid) return gone(`has uid ${again.metadata.uid ?? '(none)'}, not the pod owner's ${ref.uid}`);
      current = again;
      result = await compute(again);
    }
    const target = request.dryRun ? undefined : denialTargetOf(current, namespace);

    const reports = aggregateReports(result.reports);
    const warnings = reports
      .filter((r) => r.reason !== 'PersistenceBlocked' && r.reason !== 'MissingNetworkElement')
      .map((r) => `persistent-ips: ${r.message}`);
    for (const report of reports) vmiLog.warn({ reason: report.reason, network: report.network }, report.message);
    if (result.skipped && named.length > 0) return refuse(`its annotations cannot be checked (${result.skipped})`);
    if (result.skipped === 'UnreadableAnnotation') return allow('unreadable', warnings);
    if (result.denials.length > 0) {
      const message =
        `persistent-ips: launcher pod not admitted yet: ${result.denials.map((d) => d.message).join('; ')}. ` +
        "The pod is rejected rather than started with an address that is not its own claim's; KubeVirt retries the pod creation.";
      vmiLog.warn({ denials: result.denials }, 'denying launcher pod: a claim it needs is not its own, or has no address');
      if (target) {
        deps.reportDenials?.(
          target,
          result.denials.map((d) => ({
            reason: LAUNCHER_POD_REFUSED,
            message: `launcher pods are not admitted (${d.reason ?? 'AddressesNotAllocated'}): ${d.message}`,
          })),
        );
      }
      return { response: { uid, allowed: false, status: { code: 503, reason: 'ServiceUnavailable', message } }, outcome: 'denied' };
    }
    if (target) deps.reportDenials?.(target, []);
    if (result.patch.length === 0) return withCarried('unchanged', warnings);
    vmiLog.debug({ references: result.references }, 'adding IPAM claim references');
    return {
      response: {
        uid,
        allowed: true,
        patchType: 'JSONPatch',
        // The mutation was computed on the pod with its references carried over: both patches apply in turn.
        patch: encodePatch([...carried, ...result.patch]),
        ...(warnings.length ? { warnings } : {}),
      },
      outcome: 'patched',
    };
  };

  return async (body, outer) => {
    const request = readAdmissionReview(body);
    const deadline = AbortSignal.timeout(budgetMs);
    const signal = outer ? AbortSignal.any([outer, deadline]) : deadline;
    let outcome: Outcome;
    let response: AdmissionResponse;
    try {
      ({ response, outcome } = await admit(request, signal));
    } catch (error) {
      if (!(error instanceof TransientLookupError)) throw error;
      const message =
        `persistent-ips: cannot admit launcher pod yet: ${error.message}. ` +
        'The pod is rejected rather than started without its persistent IP address; KubeVirt retries the pod creation.';
      log.warn({ err: error, object: error.object, namespace: request.namespace, uid: request.uid }, 'denying launcher pod: lookup failed');
      outcome = 'denied';
      response = { uid: request.uid, allowed: false, status: { code: 503, reason: 'ServiceUnavailable', message } };
    }
    deps.metrics?.admissions.inc({ result: outcome });
    return reviewResponse(response);
  };
}
