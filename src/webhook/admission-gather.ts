// The reads of an admission: the VMI, the NADs and the claims, from the caches first and the API when the caches
// have not seen them (admission.ts's header says what each failure means). A failed API read throws
// TransientLookupError, which the handler answers with a retriable refusal (LookupFailed).

import { keyString, type ObjectKey } from '../kube/key.ts';
import { TransientLookupError } from '../allocator/pod-addresses.ts';

export { TransientLookupError };
import { MULTUS_NETWORKS_ANNOTATION } from '../claims/constants.ts';
import {
  claimNameFor,
  claimNamesOf,
  claimStanding,
  ownerUidsOf,
  parseNadReference,
  persistentNetworks,
  withClaimNames,
  type NetworkVerdict,
} from '../claims/index.ts';
import { elementNamespace, parseNetworkSelection } from '../claims/network-selection.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VirtualMachineInstance } from '../kube/types.ts';
import type { AdmissionFacts, NetworkFacts, Owner } from './admission-decide.ts';
import type { Fetch, PodAdmissionDeps } from './admission-types.ts';

/** A GET from the API; a failure (or the admission's deadline) is a TransientLookupError naming the object. */
async function apiRead<T>(kind: string, namespace: string, name: string, signal: AbortSignal, read: Fetch<T>): Promise<T | undefined> {
  try {
    return await read(namespace, name, signal);
  } catch (error) {
    throw new TransientLookupError({ kind, namespace, name }, signal.aborted ? signal.reason : error);
  }
}

export async function fetchVmi(deps: PodAdmissionDeps, namespace: string, name: string, signal: AbortSignal): Promise<VirtualMachineInstance | undefined> {
  const vmi = await apiRead('VirtualMachineInstance', namespace, name, signal, deps.fetchVmi).catch((error: unknown) => {
    deps.metrics?.vmiLookups.inc({ source: 'api_error' });
    throw error;
  });
  deps.metrics?.vmiLookups.inc({ source: vmi ? 'api' : 'api_not_found' });
  return vmi;
}

/** The VMI the owner reference names: the cache's when it has that incarnation, else the API's. */
export async function readVmi(deps: PodAdmissionDeps, namespace: string, owner: Owner, signal: AbortSignal): Promise<NonNullable<AdmissionFacts['vmi']>> {
  const cached = deps.vmis.get(namespace, owner.name);
  if (cached && cached.metadata.uid === owner.uid) {
    deps.metrics?.vmiLookups.inc({ source: 'cache' });
    return { value: cached, fromApi: false };
  }
  // The cache has not seen this VMI (just created) or holds an earlier incarnation of the name.
  return { value: await fetchVmi(deps, namespace, owner.name, signal), fromApi: true };
}

/**
 * The namespace's NADs and those `named`, from the cache. With `signal` (what the pure mutation needs), a NAD the cache
 * has not seen is read from the API; without (mayNeedReferences' quick look), it is taken as missing.
 */
async function nadsNamed(
  deps: PodAdmissionDeps,
  namespace: string,
  named: readonly (ObjectKey | undefined)[],
  signal?: AbortSignal,
): Promise<Map<string, NetworkAttachmentDefinition>> {
  const map = new Map(deps.nads.list(namespace).map((nad) => [keyString({ namespace: nad.metadata.namespace ?? namespace, name: nad.metadata.name }), nad]));
  for (const ref of named) {
    if (!ref || map.has(keyString(ref))) continue;
    const fetch = signal && deps.fetchNad;
    const nad = deps.nads.get(ref.namespace, ref.name) ?? (fetch && (await apiRead('NetworkAttachmentDefinition', ref.namespace, ref.name, signal, fetch)));
    if (nad) map.set(keyString(ref), nad);
  }
  return map;
}

/** From the caches only: the namespace's NADs and those the pod's elements name (for mayNeedReferences). */
export function nadsForPod(deps: PodAdmissionDeps, pod: Pod, namespace: string): Promise<Map<string, NetworkAttachmentDefinition>> {
  const selection = parseNetworkSelection(pod.metadata?.annotations?.[MULTUS_NETWORKS_ANNOTATION] ?? '');
  const named = (selection.ok ? selection.elements : []).map((element) => ({ namespace: elementNamespace(element, namespace), name: element.name }));
  return nadsNamed(deps, namespace, named);
}

/** Everything the mutation of a pod of `vmi` needs read: its NADs, its persistent networks' claims, their addresses. */
export async function readNetworks(
  deps: PodAdmissionDeps,
  operation: string,
  namespace: string,
  vmi: VirtualMachineInstance,
  waitUntil: number,
  signal: AbortSignal,
): Promise<NetworkFacts> {
  // The namespace's NADs and those the VMI references, from the API if not cached.
  const named = (vmi.spec?.networks ?? []).map((net) => (net?.multus ? parseNadReference(net.multus.networkName, namespace) : undefined));
  const nads = await nadsNamed(deps, namespace, named, signal);
  // Once per admission: the claims wait and the mutation work on the same verdicts.
  const persistent = persistentNetworks({ namespace, name: vmi.metadata.name }, vmi.spec, nads);
  const claims = await claimsForVmi(deps, { vmi, namespace, waitUntil, signal }, persistent);
  if (!deps.podAddresses || operation !== 'CREATE') return { nads, persistent, claims };
  // A failed read throws TransientLookupError, which the handler answers with a retriable refusal.
  const verdicts = withClaimNames(vmi.metadata.name, persistent, (name) => claims.get(name));
  return { nads, persistent, claims, addresses: await deps.podAddresses(namespace, vmi, nads, verdicts, claims, signal) };
}

interface ClaimRead {
  vmi: VirtualMachineInstance;
  namespace: string;
  waitUntil: number;
  signal: AbortSignal;
}

/**
 * The claims the pod's persistent networks would be pointed at. A claim the cache shows as this VM's is taken as
 * is (uids are never reused, and a claim of ours that is deleted meanwhile keeps its finalizer while this VMI
 * runs). Any other answer is not trusted yet (at CREATE, and for the fresh elements of an UPDATE): the cache is
 * watched until `waitUntil` (the controller may be creating the claim, or releasing a leftover of an earlier VM of
 * the same name), then the API has the last word.
 */
async function claimsForVmi(deps: PodAdmissionDeps, read: ClaimRead, persistent: readonly NetworkVerdict[]): Promise<Map<string, IPAMClaim>> {
  const owners = ownerUidsOf(read.vmi);
  const out = new Map<string, IPAMClaim>();
  for (const verdict of persistent) {
    if (!verdict.claimSpec) continue;
    for (const [name, claim] of await claimsOfNetwork(deps, read, owners, verdict.network, verdict.claimSpec.network)) out.set(name, claim);
  }
  return out;
}

/** Two or more dots: `<vm>.<network>` may then be another VM's name for another network (a dotted-name collision). */
function mayCollide(claim: string): boolean {
  return claim.indexOf('.') !== claim.lastIndexOf('.');
}

async function claimsOfNetwork(
  deps: PodAdmissionDeps,
  { vmi, namespace, waitUntil, signal }: ClaimRead,
  owners: ReturnType<typeof ownerUidsOf>,
  network: string,
  nadNetwork: string | undefined,
): Promise<ReadonlyMap<string, IPAMClaim>> {
  // Every name the network's claim may have (claimNameFor): which one applies depends on the claims themselves.
  const names = claimNamesOf(vmi.metadata.name, network, nadNetwork);
  const fromCache = () =>
    new Map(
      names.flatMap((n) => {
        const c = deps.claims.get(namespace, n);
        return c ? [[n, c] as const] : [];
      }),
    );
  const chosen = (view: ReadonlyMap<string, IPAMClaim>) => claimNameFor(vmi.metadata.name, network, (n) => view.get(n), nadNetwork);
  const usable = (view: ReadonlyMap<string, IPAMClaim>) => {
    const name = chosen(view);
    return claimStanding(view.get(name), name, owners, nadNetwork).usable;
  };
  // A name with two or more dots can be another VM's claim that the cache has not shown yet: the chosen claim
  // is confirmed by the API before a pod is pointed at it.
  let view: ReadonlyMap<string, IPAMClaim> = fromCache();
  if (usable(view) && !mayCollide(chosen(view))) {
    deps.metrics?.claimLookups.inc({ source: 'cache' });
    return view;
  }
  const keys = new Set(names.map((name) => keyString({ namespace, name })));
  while (Date.now() < waitUntil && !signal.aborted && !usable(view)) {
    // Listening before the cache is read again: a change in between is not lost.
    const change = nextChange(deps, keys, waitUntil, signal);
    view = fromCache();
    if (usable(view)) {
      change.cancel();
      break;
    }
    await change.settled;
    view = fromCache();
  }
  const fromApi = !usable(view) || mayCollide(chosen(view));
  deps.metrics?.claimLookups.inc({ source: fromApi ? 'api' : 'cache_after_wait' });
  return fromApi ? await fetchClaims(deps, namespace, names, signal) : view;
}

async function fetchClaims(deps: PodAdmissionDeps, namespace: string, names: readonly string[], signal: AbortSignal): Promise<Map<string, IPAMClaim>> {
  const fetched = new Map<string, IPAMClaim>();
  for (const name of names) {
    const claim = await apiRead('IPAMClaim', namespace, name, signal, deps.fetchClaim);
    if (claim) fetched.set(name, claim);
  }
  return fetched;
}

/** Settles at the next change of a claim of `keys` in the cache, at `until`, or when `signal` aborts. */
function nextChange(deps: PodAdmissionDeps, keys: ReadonlySet<string>, until: number, signal: AbortSignal): { settled: Promise<void>; cancel(): void } {
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
      if (keys.has(keyString(object.metadata))) finish();
    });
    if (done) subscription.unsubscribe();
  });
  return { settled, cancel };
}
