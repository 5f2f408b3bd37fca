// The gather step of the allocator loop (loop.ts) for a network: its state from its NADs, every claim of it through
// the WriteOverlay, and the pods read only while a claim is about to get a new address (a steady state reads none).

import { keyString } from '../kube/key.ts';
import type { IPAMClaim, Pod } from '../kube/types.ts';
import { hasActivePods, interfacesOfNetwork, ownerUidsOf } from '../claims/index.ts';
import { CLAIMS_BY_NETWORK, NADS_BY_NETWORK } from '../sources/indexes.ts';
import { resolveNetwork } from './nad.ts';
import { emptyClaimExit, lacksFamily, type PlanClaim } from './plan.ts';
import type { Pool } from '../ip/pool.ts';
import { ownerRequest, type OwnerLookup } from './requests.ts';
import { addressesInUse, runningAddresses, type RunningAddresses, type VmiOnNetwork, vmisOnNetwork } from './running-address.ts';
import { mapLimit, settlePending } from './apply.ts';
import type { LauncherPodLister, NetworkInput, NetworkReconcilerDeps } from './pass.ts';

/** Launcher pod lists of one pass in flight at once. */
const POD_READ_CONCURRENCY = 8;

/** The launcher pods of a VMI, listed at most once per pass whoever asks first. */
type PodReader = (namespace: string, vmiUid: string) => Promise<Pod[]>;

function podReader(list: LauncherPodLister, signal: AbortSignal): PodReader {
  const read = new Map<string, Promise<Pod[]>>();
  return (namespace, uid) => {
    let pods = read.get(uid);
    if (!pods) read.set(uid, (pods = list(namespace, uid, signal)));
    return pods;
  };
}

/**
 * A network's state, its claims through the overlay, and what the running pods of empty claims have. Writes of
 * earlier passes whose outcome is unknown are settled first, so the claims read are the ones the plan may trust.
 */
export async function gatherNetwork(deps: NetworkReconcilerDeps, now: () => Date, network: string, signal: AbortSignal): Promise<NetworkInput> {
  // Let go of what the cache has caught up with, whatever follows (a network no longer served keeps nothing).
  for (const key of deps.overlay.keysOf(network)) deps.overlay.view(key, deps.claims.getByKey(key));
  const nads = deps.nads.byIndex(NADS_BY_NETWORK, network);
  const state = resolveNetwork(network, nads);
  const input: NetworkInput = {
    kind: 'network',
    network,
    nads,
    state,
    claims: [],
    unsettled: false,
    podsUnread: false,
    inUse: [],
    now: now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z'),
  };
  if (state.kind !== 'ready') return input;
  input.unsettled = await settlePending(deps, network, signal);
  const pods = deps.listLauncherPods ? podReader(deps.listLauncherPods, signal) : undefined;
  await gatherClaims(deps, input, pods);
  // Only while a claim is about to get a new address: the pods of running VMs none of whose claims of the network
  // holds an address are read, and what they use is held back (plan.ts). A steady state reads nothing.
  if (pods && input.claims.some((c) => willAllocate(c, state.pool))) await gatherInUse(deps, input, pods);
  return input;
}

/** Every claim of the network (cache and overlay) with its owner's request and, if read, its running addresses. */
async function gatherClaims(deps: NetworkReconcilerDeps, input: NetworkInput, pods: PodReader | undefined): Promise<void> {
  const { network } = input;
  const keys = new Set([...deps.claims.indexKeys(CLAIMS_BY_NETWORK, network), ...deps.overlay.keysOf(network)]);
  const nadKeys = new Set(input.nads.map((nad) => keyString(nad.metadata)));
  for (const key of keys) {
    const claim = deps.overlay.view(key, deps.claims.getByKey(key));
    if (!claim || claim.spec?.network !== network) continue;
    const lookup = ownerRequest(claim, deps.vms, deps.vmis);
    const running = await runningOf(deps, claim, lookup, nadKeys, pods);
    if (running?.kind === 'unknown') input.podsUnread = true;
    input.claims.push({
      key: keyString(claim.metadata),
      claim,
      request: lookup.request,
      ...(lookup.owner ? { owner: lookup.owner } : {}),
      ...(lookup.network !== undefined ? { network: lookup.network } : {}),
      ...(running ? { running } : {}),
    });
  }
}

/**
 * For an empty claim about to be allocated whose VMI runs: what its running launcher pods have on the claim's
 * network. Undefined (nothing read) for every other claim, so a steady state reads no pod.
 */
async function runningOf(
  deps: NetworkReconcilerDeps,
  claim: IPAMClaim,
  lookup: OwnerLookup,
  nadKeys: ReadonlySet<string>,
  pods: PodReader | undefined,
): Promise<RunningAddresses | undefined> {
  if (!pods || (claim.status?.ips?.length ?? 0) > 0 || claim.metadata.deletionTimestamp) return undefined;
  if (lookup.network === undefined || (lookup.request.kind !== 'none' && lookup.request.kind !== 'addresses')) return undefined;
  // The owner's own VMI (the VM's, controlled by it, or the owning VMI) with an active pod. A terminating VMI counts:
  // its guest keeps the address through the pods' grace period, and the claim of that same VM should keep it.
  const vmi = lookup.vmi && hasActivePods(lookup.vmi) ? lookup.vmi : undefined;
  const namespace = claim.metadata.namespace ?? '';
  const iface = vmi ? interfacesOfNetwork(vmi, lookup.network, namespace) : undefined;
  // A VMI still on a NAD of another network (its VM's NAD swapped, the move pending) has no address on this one.
  if (!vmi?.metadata.uid || !iface || !nadKeys.has(iface.nad)) return undefined;
  const uid = vmi.metadata.uid;
  const listed = pods(namespace, uid);
  try {
    return runningAddresses(await listed, uid, iface, namespace);
  } catch (err) {
    deps.log.warn(
      { claim: keyString(claim.metadata), err },
      'cannot read the launcher pods of a running VM; its claim waits, rather than get an address the VM does not have',
    );
    return { kind: 'unknown', message: `cannot read the launcher pods of VMI ${namespace}/${vmi.metadata.name}` };
  }
}

// Whether the plan gives the claim a new address. As plan.ts decides: a claim holding some addresses is completed
// whatever else is true of it; an empty one only when nothing makes it wait or refuses it.
function willAllocate(c: PlanClaim, pool: Pool): boolean {
  const held = c.claim.status?.ips ?? [];
  return lacksFamily(pool, held) && (held.length > 0 || emptyClaimExit(c) === undefined);
}

/** What the launcher pods of the network's running VMIs use that no claim of the network records: held back. */
async function gatherInUse(deps: NetworkReconcilerDeps, input: NetworkInput, pods: PodReader): Promise<void> {
  // A VMI's interface whose claim holds addresses is the claim's; any other may use an address no claim holds.
  const covered = new Set<string>();
  for (const c of input.claims) {
    if ((c.claim.status?.ips?.length ?? 0) === 0 || c.network === undefined) continue;
    for (const ref of c.claim.metadata.ownerReferences ?? []) covered.add(`${ref.uid}/${c.network}`);
  }
  await mapLimit(vmisOnNetwork(input.nads, deps.vmis), POD_READ_CONCURRENCY, async (on) => {
    const owners = ownerUidsOf(on.vmi);
    const uids = [owners.vmiUid, owners.vmUid].filter((u): u is string => u !== undefined);
    if (on.ifaces.every((iface) => uids.some((u) => covered.has(`${u}/${iface.network}`)))) return;
    await readInUse(deps, input, pods, on, uids);
  });
}

async function readInUse(deps: NetworkReconcilerDeps, input: NetworkInput, pods: PodReader, on: VmiOnNetwork, uids: string[]): Promise<void> {
  const { namespace = '', name, uid = '' } = on.vmi.metadata;
  const listed = pods(namespace, uid);
  try {
    const ips = addressesInUse(await listed, on);
    if (ips.length === 0) return;
    // Its own claims that take these addresses in this pass (running-address.ts): held back only if they do not.
    const claims = input.claims
      .filter((c) => c.running?.kind === 'addresses' && (c.claim.metadata.ownerReferences ?? []).some((r) => uids.includes(r.uid)))
      .map((c) => c.key);
    input.inUse.push({ holder: `VMI ${namespace}/${name} (no claim records its address)`, ips, ...(claims.length > 0 ? { claims } : {}) });
  } catch (err) {
    deps.log.warn(
      { vmi: `${namespace}/${name}`, err },
      'cannot read the launcher pods of a running VM whose address no claim records; no new address on its network',
    );
    input.podsUnread = true;
    input.inUseUnknown ??= `the launcher pods of VMI ${namespace}/${name}, which runs on the network and whose address no claim records, cannot be read`;
  }
}
