// The allocator loop, built like the claims loop (controller/loop.ts): its own work queue, fed by claim, NAD, VM and
// VMI events, run only by the leader. A request with the empty namespace is a network (cluster-wide): gather
// resolves its pool from its NADs and every claim of the network (cache + our own writes the cache has not shown
// yet), decide plans (plan.ts, pure), apply writes the statuses and tells people. Any other request is a NAD whose
// own switch is wrong, reported on it.
//
// Why no address is ever handed out twice (docs/allocator.md, "Guarantees"):
// - One network is one queue key, and the queue never hands a key to two workers at once: passes over a network
//   are serialized, and within a pass the plan chooses every address from one rebuilt state.
// - Every pass rebuilds the pool from the claims, read through the WriteOverlay, so a status we wrote a moment ago
//   counts even while the cache has not received it (controller/write-overlay.ts).
// - A status write carries the claim's resourceVersion (a merge patch of the status subresource with
//   metadata.resourceVersion is conditional): the write is the commit point. A controller killed between choosing
//   and writing has committed nothing; the next leader rebuilds from the claims and, serving claims oldest first
//   and taking the lowest free address, makes the same choice.
// - A write whose outcome is unknown (timeout, 5xx) keeps its addresses reserved until it is retried to a definite
//   answer.
// - A replica that becomes leader first reads every claim with a consistent list and waits for nothing else: what
//   the list shows and the cache does not is seeded into the overlay, so the last writes of the previous leader
//   count before this replica chooses anything.

import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Subscription } from 'rxjs';
import { merge } from '../streams/rx.ts';
import type { KubeClient } from '../kube/client.ts';
import { KubeApiError, ifFound, isConflict, isNotFound } from '../kube/errors.ts';
import { apiVersionOf, resources } from '../kube/resources.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import { hasActivePods, interfacesOfNetwork, launcherPodSelector, ownerUidsOf } from '../claims/index.ts';
import { type Clock, realClock, sleep } from '../kube/clock.ts';
import type { ReconcileResult, WorkQueue } from '../queue/index.ts';
import { createLoop, type LoopReconciler, requestKey, requestOf } from '../controller/loop.ts';
import type { Sources } from '../sources/kinds.ts';
import { CLAIMS_BY_NETWORK, CLAIMS_BY_OWNER_NAME, NADS_BY_NETWORK, nadNetwork, registerIndexes, vmisByNad } from '../sources/indexes.ts';
import { objectKey } from '../sources/store.ts';
import { trimIPAMClaim, trimNetworkAttachmentDefinition } from '../sources/trim.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { type Cause, EventRecorder } from '../controller/events.ts';
import { familyOfAddress } from './address.ts';
import { createAllocatorMetrics, type AllocatorMetrics } from './metrics.ts';
import { ALLOCATOR_ANNOTATION, isAllocatorNad, type NetworkState, readAllocatorNad, resolveNetwork } from './nad.ts';
import { WriteOverlay, resourceVersionAtLeast } from '../controller/write-overlay.ts';
import { conditionsWith, type InUse, type NetworkPlan, type PlanClaim, planNetwork, type StatusWrite } from './plan.ts';
import { createPodAddressLookup, type PodAddressLookup } from './pod-addresses.ts';
import { ownerRequest, type OwnerLookup, type ReadCache } from './requests.ts';
import { addressesInUse, runningAddresses, runningVmiOf, type RunningAddresses, type VmisByNad, vmisOnNetwork } from './running-address.ts';

export const ALLOCATOR_QUEUE = 'ipamclaim-allocator';

const NETWORK_PREFIX = 'network:';
const NAD_PREFIX = 'nad:';
/** Status writes of one pass in flight at once. */
const WRITE_CONCURRENCY = 16;
/** Launcher pod lists of one pass in flight at once. */
const POD_READ_CONCURRENCY = 8;

// ---------------------------------------------------------------------------------------------------------------
// One pass over one network.

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

type WriteOutcome = 'written' | 'raced' | 'gone' | 'unknown' | 'rejected';

/** Whether the API server certainly did not apply the request (an answer that rejects it). */
function certainlyNotApplied(err: unknown): boolean {
  return err instanceof KubeApiError && err.code !== undefined && err.code >= 400 && err.code < 500 && err.code !== 408;
}

const nadTarget = (nad: NetworkAttachmentDefinition) => ({
  apiVersion: apiVersionOf(resources.networkAttachmentDefinitions),
  kind: resources.networkAttachmentDefinitions.kind,
  namespace: nad.metadata.namespace ?? '',
  name: nad.metadata.name,
  ...(nad.metadata.uid ? { uid: nad.metadata.uid } : {}),
});

export function createNetworkReconciler(deps: NetworkReconcilerDeps) {
  const { overlay, log } = deps;
  const now = deps.now ?? (() => new Date());

  const write = async (
    network: string,
    claim: IPAMClaim,
    status: NonNullable<IPAMClaim['status']>,
    resourceVersion: string,
    signal: AbortSignal,
  ): Promise<WriteOutcome> => {
    const key = objectKey(claim);
    try {
      overlay.record(key, resourceVersion, await deps.writeStatus(claim, status, resourceVersion, signal), network);
      return 'written';
    } catch (err) {
      if (isNotFound(err)) return 'gone';
      if (isConflict(err)) {
        log.debug({ claim: key, err }, 'claim changed meanwhile; will look again');
        return 'raced';
      }
      if (certainlyNotApplied(err)) {
        log.error({ claim: key, network, err }, 'the API server refused the claim status');
        return 'rejected';
      }
      // It may have been applied: keep the addresses reserved until a retry gives a definite answer.
      overlay.recordPending(key, network, resourceVersion, { ...claim, metadata: { ...claim.metadata, resourceVersion }, status });
      log.warn({ claim: key, network, err }, 'claim status write has an unknown outcome; its addresses stay reserved until it is retried');
      return 'unknown';
    }
  };

  /** Retries writes whose outcome is unknown, as they were. Returns whether some are still unsettled. */
  const settlePending = async (network: string, signal: AbortSignal): Promise<boolean> => {
    let unsettled = false;
    for (const p of overlay.pendingOf(network)) {
      overlay.view(p.key, deps.claims.getByKey(p.key)); // drops it if the cache already settled it
      if (!overlay.pendingOf(network).some((q) => q.key === p.key)) continue;
      const { namespace, name } = requestOf(p.key);
      const attempted = overlay.view(p.key, undefined)!;
      const outcome = await write(network, attempted, p.status, p.resourceVersion, signal);
      if (outcome === 'written') continue;
      if (outcome === 'gone' || outcome === 'rejected') {
        overlay.forget(p.key);
        continue;
      }
      if (outcome === 'raced') {
        // The claim changed since the attempt: read what it is now, which settles whether the attempt landed.
        try {
          const fresh = await deps.readClaim(namespace, name, signal);
          if (!fresh) overlay.forget(p.key);
          else overlay.seed(p.key, network, deps.claims.getByKey(p.key)?.metadata.resourceVersion, trimIPAMClaim(fresh));
          continue;
        } catch (err) {
          log.warn({ claim: p.key, err }, 'cannot read the claim to settle an earlier write; will retry');
        }
      }
      unsettled = true;
    }
    return unsettled;
  };

  /**
   * What is wrong with a NAD that no network pass reports: a malformed switch, or a NAD that opts in but whose
   * network cannot be named (an OVN-Kubernetes one included). Reported on the NAD itself.
   */
  const decideNad = (nadKey: string, nad: NetworkAttachmentDefinition | undefined): AllocatorPlan => {
    const read = nad ? readAllocatorNad(nad) : undefined;
    const own = nad && read && (read.problems.length > 0 || read.refused !== undefined) && (!read.enabled || read.network === undefined) ? [nad] : [];
    const causes = nadCauses(
      own,
      new Map(read && nad ? [[nadKey, read.problems]] : []),
      new Map(),
      new Map(read?.refused !== undefined ? [[nadKey, read.refused]] : []),
    );
    return { reports: [{ scope: `${NAD_PREFIX}${nadKey}`, causes }] };
  };

  /**
   * For an empty claim about to be allocated whose VMI runs: what its running launcher pods have on the claim's
   * network. Undefined (nothing read) for every other claim, so a steady state reads no pod.
   */
  const runningOf = async (
    claim: IPAMClaim,
    lookup: OwnerLookup,
    nadKeys: ReadonlySet<string>,
    podsOf: Map<string, Promise<Pod[]>>,
    signal: AbortSignal,
  ): Promise<RunningAddresses | undefined> => {
    if (!deps.listLauncherPods || (claim.status?.ips?.length ?? 0) > 0 || claim.metadata.deletionTimestamp) return undefined;
    if (lookup.network === undefined || (lookup.request.kind !== 'none' && lookup.request.kind !== 'addresses')) return undefined;
    const vmi = runningVmiOf(claim, deps.vms, deps.vmis);
    const namespace = claim.metadata.namespace ?? '';
    const iface = vmi ? interfacesOfNetwork(vmi, lookup.network, namespace) : undefined;
    // A VMI still on a NAD of another network (its VM's NAD swapped, the move pending) has no address on this one.
    if (!vmi?.metadata.uid || !iface || !nadKeys.has(iface.nad)) return undefined;
    const uid = vmi.metadata.uid;
    let pods = podsOf.get(uid);
    if (!pods) podsOf.set(uid, (pods = deps.listLauncherPods(namespace, uid, signal)));
    try {
      return runningAddresses(await pods, uid, iface, namespace);
    } catch (err) {
      log.warn(
        { claim: objectKey(claim), err },
        'cannot read the launcher pods of a running VM; its claim waits, rather than get an address the VM does not have',
      );
      return { kind: 'unknown', message: `cannot read the launcher pods of VMI ${namespace}/${vmi.metadata.name}` };
    }
  };

  /**
   * A network's state, its claims through the overlay, and what the running pods of empty claims have. Writes of
   * earlier passes whose outcome is unknown are settled first, so the claims read are the ones the plan may trust.
   */
  const gatherNetwork = async (network: string, signal: AbortSignal): Promise<NetworkInput> => {
    // Let go of what the cache has caught up with, whatever follows (a network no longer served keeps nothing).
    for (const key of overlay.keysOf(network)) overlay.view(key, deps.claims.getByKey(key));
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
    input.unsettled = await settlePending(network, signal);
    const keys = new Set([...deps.claims.indexKeys(CLAIMS_BY_NETWORK, network), ...overlay.keysOf(network)]);
    const podsOf = new Map<string, Promise<Pod[]>>();
    const nadKeys = new Set(nads.map(objectKey));
    for (const key of keys) {
      const claim = overlay.view(key, deps.claims.getByKey(key));
      if (!claim || claim.spec?.network !== network) continue;
      const lookup = ownerRequest(claim, deps.vms, deps.vmis);
      const running = await runningOf(claim, lookup, nadKeys, podsOf, signal);
      if (running?.kind === 'unknown') input.podsUnread = true;
      input.claims.push({
        key: objectKey(claim),
        claim,
        request: lookup.request,
        ...(lookup.owner ? { owner: lookup.owner } : {}),
        ...(lookup.network !== undefined ? { network: lookup.network } : {}),
        ...(running ? { running } : {}),
      });
    }
    // Only while a claim is about to get a new address: the pods of running VMs none of whose claims of the network
    // holds an address are read, and what they use is held back (plan.ts). A steady state reads nothing.
    const { families } = state.pool;
    const lacksFamily = (ips: readonly string[]) => {
      const have = ips.map(familyOfAddress);
      return !have.includes(undefined) && families.some((f) => !have.includes(f));
    };
    // As plan.ts decides: a claim holding some addresses is completed whatever else is true of it; an empty one only
    // when it is served at all.
    const willAllocate = (c: PlanClaim) => {
      const held = c.claim.status?.ips ?? [];
      if (!lacksFamily(held)) return false;
      if (held.length > 0) return true;
      const served = c.request.kind === 'none' || c.request.kind === 'addresses';
      return served && !c.claim.metadata.deletionTimestamp && c.running?.kind !== 'invalid' && c.running?.kind !== 'unknown';
    };
    if (deps.listLauncherPods && input.claims.some(willAllocate)) {
      // A VMI's interface whose claim holds addresses is the claim's; any other may use an address no claim holds.
      const covered = new Set<string>();
      for (const c of input.claims) {
        if ((c.claim.status?.ips?.length ?? 0) === 0 || c.network === undefined) continue;
        for (const ref of c.claim.metadata.ownerReferences ?? []) covered.add(`${ref.uid}/${c.network}`);
      }
      const list = deps.listLauncherPods;
      await mapLimit(vmisOnNetwork(nads, deps.vmis), POD_READ_CONCURRENCY, async (on) => {
        const owners = ownerUidsOf(on.vmi);
        const uids = [owners.vmiUid, owners.vmUid].filter((u): u is string => u !== undefined);
        if (on.ifaces.every((iface) => uids.some((u) => covered.has(`${u}/${iface.network}`)))) return;
        const { namespace = '', name, uid = '' } = on.vmi.metadata;
        let pods = podsOf.get(uid);
        if (!pods) podsOf.set(uid, (pods = list(namespace, uid, signal)));
        try {
          const ips = addressesInUse(await pods, on);
          if (ips.length === 0) return;
          // Its own claims that take these addresses in this pass (running-address.ts): held back only if they do not.
          const claims = input.claims
            .filter((c) => c.running?.kind === 'addresses' && (c.claim.metadata.ownerReferences ?? []).some((r) => uids.includes(r.uid)))
            .map((c) => c.key);
          input.inUse.push({ holder: `VMI ${namespace}/${name} (no claim records its address)`, ips, ...(claims.length > 0 ? { claims } : {}) });
        } catch (err) {
          log.warn(
            { vmi: `${namespace}/${name}`, err },
            'cannot read the launcher pods of a running VM whose address no claim records; no new address on its network',
          );
          input.podsUnread = true;
          input.inUseUnknown ??= `the launcher pods of VMI ${namespace}/${name}, which runs on the network and whose address no claim records, cannot be read`;
        }
      });
    }
    return input;
  };

  /** Pure: the Events of every scope of the pass and, for a network that can be served, its plan. */
  const decideNetwork = (input: NetworkInput): AllocatorPlan => {
    const { network, nads, state } = input;
    const scope = `${NETWORK_PREFIX}${network}`;
    const claimsScope = `claims:${network}`;
    // OVN-Kubernetes writes a refused network's statuses: no write of ours, not even a condition, and nothing to
    // tell the VMs (what was said about their claims is cleared). The NADs that set the switch are told why.
    if (state.kind === 'unmanaged')
      return {
        reports: [
          { scope, causes: [] },
          { scope: claimsScope, causes: [] },
        ],
        forget: true,
      };
    if (state.kind === 'refused')
      return {
        reports: [
          { scope, causes: nadCauses(nads, new Map(), new Map(), state.refusals) },
          { scope: claimsScope, causes: [] },
        ],
        forget: true,
      };
    if (state.kind === 'invalid') return { reports: [{ scope, causes: nadCauses(nads, state.problems, new Map()) }], forget: true, problems: state.problems };
    const plan = planNetwork({
      network,
      pool: state.pool,
      now: input.now,
      claims: input.claims,
      inUse: input.inUse,
      ...(input.inUseUnknown !== undefined ? { inUseUnknown: input.inUseUnknown } : {}),
    });
    return {
      reports: [{ scope, causes: nadCauses(nads, new Map(), state.warnings) }],
      network: plan,
      claimEvents: { scope: claimsScope, causes: plan.events.map((e) => ({ target: e.target, type: e.type, reason: e.reason, message: e.message })) },
    };
  };

  const applyNetwork = async (input: NetworkInput, plan: AllocatorPlan, signal: AbortSignal): Promise<ReconcileResult> => {
    const { network } = input;
    for (const r of plan.reports) await deps.recorder.report(r.scope, r.causes);
    if (plan.problems) log.warn({ network, problems: Object.fromEntries(plan.problems) }, 'network pool is not usable; no new addresses until it is fixed');
    if (plan.forget) deps.metrics?.forget(network);
    const planned = plan.network;
    if (!planned) return {};
    if (planned.report.problems.length > 0) log.debug({ network, problems: planned.report.problems }, 'claims hold addresses the pool would not hand out');
    const outcomes = await mapLimit(planned.writes, WRITE_CONCURRENCY, async (w: StatusWrite): Promise<WriteOutcome> => {
      const status: NonNullable<IPAMClaim['status']> = { ips: w.ips, conditions: conditionsWith(w.claim, w.condition) };
      const outcome = await write(network, w.claim, status, w.claim.metadata.resourceVersion ?? '', signal);
      if (outcome === 'written') {
        deps.metrics?.written(network, w.condition.reason ?? '');
        if (w.allocated) log.debug({ network, claim: w.key, ips: w.ips }, 'allocated addresses');
        else log.debug({ network, claim: w.key, reason: w.condition.reason }, 'updated claim condition');
      }
      return outcome;
    });
    if (plan.claimEvents) await deps.recorder.report(plan.claimEvents.scope, plan.claimEvents.causes);
    deps.metrics?.observe(network, planned.allocator.stats());
    const raced = outcomes.some((o) => o === 'raced' || o === 'rejected');
    const unknown = outcomes.includes('unknown');
    if (planned.skipped.length > 0) log.debug({ network, skipped: planned.skipped }, 'claims left for later');
    // Pods that cannot be read are an error worth a warning; an owner the cache has not shown yet is a moment's wait.
    if (planned.withheld)
      log[input.podsUnread ? 'warn' : 'debug']({ network, claims: planned.skipped.length }, `no new address on the network while ${planned.withheld}`);
    if (input.inUse.length > 0) log.debug({ network, inUse: input.inUse }, 'addresses of running VMs that no claim records are held back');
    return { requeue: raced || unknown || input.unsettled || input.podsUnread };
  };

  // A request with the empty namespace is a network (cluster-wide); any other, a NAD of that namespace.
  const reconciler: LoopReconciler<AllocatorInput, AllocatorPlan> = {
    gather: async ({ namespace, name }, ctx) => {
      if (namespace === '') return gatherNetwork(name, ctx.signal);
      const key = requestKey(namespace, name);
      return { kind: 'nad', key, nad: deps.nads.getByKey(key) };
    },
    decide: (input) => (input.kind === 'nad' ? decideNad(input.key, input.nad) : decideNetwork(input)),
    apply: async (_request, input, plan, ctx) => {
      if (input.kind === 'network') return applyNetwork(input, plan, ctx.signal);
      for (const r of plan.reports) await deps.recorder.report(r.scope, r.causes);
      return {};
    },
  };
  return reconciler;
}

interface NetworkInput {
  kind: 'network';
  network: string;
  nads: NetworkAttachmentDefinition[];
  state: NetworkState;
  claims: PlanClaim[];
  /** Writes of earlier passes still of unknown outcome. */
  unsettled: boolean;
  /** Launcher pods that could not be read: their claims wait. */
  podsUnread: boolean;
  /** Addresses running VMs use on the network that no claim holds (looked for only while a claim waits). */
  inUse: InUse[];
  /** Why some of those could not be read, if so: no new address then. */
  inUseUnknown?: string;
  now: string;
}

type AllocatorInput = NetworkInput | { kind: 'nad'; key: string; nad: NetworkAttachmentDefinition | undefined };

interface AllocatorPlan {
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

function nadCauses(
  nads: readonly NetworkAttachmentDefinition[],
  problemsByKey: Map<string, string[]>,
  warningsByKey: Map<string, string[]>,
  refusalsByKey: Map<string, string> = new Map(),
): Cause[] {
  const causes: Cause[] = [];
  for (const nad of nads) {
    const key = objectKey(nad);
    const refusal = refusalsByKey.get(key);
    // The message names the NAD's generation: reported once per generation, not at every pass or resync.
    if (refusal !== undefined) causes.push({ target: nadTarget(nad), type: 'Warning', reason: 'AllocatorRefused', message: refusal });
    for (const message of problemsByKey.get(key) ?? []) causes.push({ target: nadTarget(nad), type: 'Warning', reason: 'InvalidAllocatorPool', message });
    for (const message of warningsByKey.get(key) ?? []) causes.push({ target: nadTarget(nad), type: 'Normal', reason: 'AllocatorPoolWarning', message });
  }
  return causes;
}

/** The queue key of a network: the empty namespace (a network is cluster-wide). A NAD's key is its own. */
export const networkKey = (network: string): string => requestKey('', network);

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, () => worker()));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Wiring.

export interface AllocatorOptions {
  client: KubeClient;
  /**
   * The controller's informers: the allocator adds its indexes and reads them (their trims keep the annotations it
   * needs), so it costs no watch of its own.
   */
  sources: Pick<Sources, 'nads' | 'vms' | 'vmis' | 'claims'>;
  /** The namespace the sources watch, if only one (as the controller's --namespace): the barrier's list is scoped so. */
  namespace?: string;
  log: Logger;
  metrics?: Metrics;
  /** Networks served in parallel (one network is never served twice at once). Default 2. */
  concurrency?: number;
  /** Full pass over every network; default 10 minutes. */
  resyncIntervalMs?: number;
  clock?: Clock;
}

export interface Allocator {
  readonly queue: WorkQueue;
  /** The webhook's view: addresses for the allocator networks of a launcher pod. */
  readonly podAddresses: PodAddressLookup;
  /** Serves the queue while `signal` is not aborted (call only as the leader). */
  lead(signal: AbortSignal, drainTimeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Create before the shared sources start, so that their initial claim events reach the allocator. */
export function createAllocator(options: AllocatorOptions): Allocator {
  const { client, metrics } = options;
  const { nads, vms, vmis, claims } = options.sources;
  const log = options.log.child({ component: 'allocator' });
  const clock = options.clock ?? realClock;
  const scope = options.namespace ? { namespace: options.namespace } : {};
  registerIndexes({ nads, claims }, 'allocator');

  const overlay = new WriteOverlay();
  const recorder = new EventRecorder((event) => client.createEvent(event), log, undefined, { component: 'persistent-ips-allocator' });
  const allocatorMetrics = metrics ? createAllocatorMetrics(metrics.registry as Registry) : undefined;
  const readClaim = (namespace: string, name: string, signal: AbortSignal) => ifFound(client.get<IPAMClaim>(resources.ipamClaims, namespace, name, { signal }));

  const loop = createLoop({
    name: ALLOCATOR_QUEUE,
    keys: () => allKeys(),
    log,
    ...(metrics ? { metrics } : {}),
    reconciler: createNetworkReconciler({
      nads,
      claims,
      vms,
      vmis,
      overlay,
      recorder,
      log,
      ...(allocatorMetrics ? { metrics: allocatorMetrics } : {}),
      writeStatus: (claim, status, resourceVersion, signal) =>
        client.mergePatch<IPAMClaim>(
          resources.ipamClaims,
          claim.metadata.namespace,
          claim.metadata.name,
          // resourceVersion in a merge patch makes it conditional: 409 Conflict if the claim changed meanwhile.
          { metadata: { resourceVersion }, status },
          { subresource: 'status', signal },
        ),
      readClaim,
      listLauncherPods: async (namespace, vmiUid, signal) => {
        return (await client.list<Pod>(resources.pods, { namespace, labelSelector: launcherPodSelector(vmiUid), signal })).items;
      },
    }),
  });
  const { queue } = loop;

  const managed = (network: string): boolean => nads.byIndex(NADS_BY_NETWORK, network).some(isAllocatorNad) || overlay.keysOf(network).length > 0;
  const enqueueNetwork = (network: string | undefined): void => {
    if (network && managed(network)) queue.add(networkKey(network));
  };
  const allKeys = (): string[] => {
    const out = new Set<string>();
    for (const nad of nads.list()) {
      if (nad.metadata.annotations?.[ALLOCATOR_ANNOTATION] !== undefined) out.add(objectKey(nad));
      if (!isAllocatorNad(nad)) continue;
      const network = nadNetwork(nad)[0];
      if (network !== undefined) out.add(networkKey(network));
    }
    for (const network of overlay.networks()) out.add(networkKey(network));
    return [...out];
  };

  const subscriptions: Subscription[] = [
    claims.events$.subscribe((e) => {
      if (e.type === 'delete') overlay.observeDeleted(objectKey(e.object), e.object.metadata.uid);
      enqueueNetwork(e.object.spec?.network);
      if (e.old && e.old.spec?.network !== e.object.spec?.network) enqueueNetwork(e.old.spec?.network);
    }),
    nads.events$.subscribe((e) => {
      const networks = new Set([...nadNetwork(e.object), ...(e.old ? nadNetwork(e.old) : [])]);
      // A network any of whose NADs opts in, or opted in before this change (to clear what was reported).
      const wasOn = isAllocatorNad(e.object) || (e.old !== undefined && isAllocatorNad(e.old));
      for (const network of networks) if (wasOn || managed(network)) queue.add(networkKey(network));
      const mentions = (n: NetworkAttachmentDefinition | undefined) => n?.metadata.annotations?.[ALLOCATOR_ANNOTATION] !== undefined;
      if (mentions(e.object) || mentions(e.old)) queue.add(objectKey(e.object));
    }),
    merge(vms.events$, vmis.events$).subscribe((e) => {
      for (const claim of claims.byIndex(CLAIMS_BY_OWNER_NAME, objectKey(e.object))) enqueueNetwork(claim.spec?.network);
    }),
    // A VMI's pods may hold addresses no claim records (plan.ts, inUse): when it gains or loses its pods, a claim refused
    // because of them may now be served.
    vmis.events$.subscribe((e) => {
      if (e.type === 'update' && e.old && hasActivePods(e.old) === hasActivePods(e.object)) return;
      for (const key of vmisByNad(e.object)) {
        const nad = nads.getByKey(key);
        if (nad) for (const network of nadNetwork(nad)) enqueueNetwork(network);
      }
    }),
  ];

  /** The consistent read that makes the previous leader's last writes count (see the header). */
  const barrier = async (signal: AbortSignal): Promise<void> => {
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        const { items } = await client.listAll<unknown>(resources.ipamClaims, { ...scope, signal });
        let seeded = 0;
        for (const item of items) {
          const fresh = trimIPAMClaim(item);
          const key = objectKey(fresh);
          const cached = claims.getByKey(key);
          const cachedVersion = cached?.metadata.resourceVersion;
          if (cached && cached.metadata.uid === fresh.metadata.uid) {
            if (cachedVersion === fresh.metadata.resourceVersion || resourceVersionAtLeast(cachedVersion, fresh.metadata.resourceVersion)) continue;
          }
          overlay.seed(key, fresh.spec.network, cachedVersion, fresh);
          seeded++;
        }
        log.info({ claims: items.length, newerThanCache: seeded }, 'read every claim before allocating');
        return;
      } catch (err) {
        if (signal.aborted) return;
        const delay = Math.min(30_000, 500 * 2 ** attempt);
        log.warn({ err, retryInMs: delay }, 'cannot list claims before allocating; retrying');
        await sleep(clock, delay, signal).catch(() => undefined);
      }
    }
  };

  return {
    queue,
    podAddresses: createPodAddressLookup({
      allocatorNad: (namespace, name) => nads.get(namespace, name),
      fetchNad: async (namespace, name, signal) => {
        const nad = await ifFound(client.get<unknown>(resources.networkAttachmentDefinitions, namespace, name, { signal }));
        return nad === undefined ? undefined : trimNetworkAttachmentDefinition(nad);
      },
      fetchClaim: readClaim,
    }),
    async lead(signal: AbortSignal, drainTimeoutMs = 30_000): Promise<void> {
      await barrier(signal);
      if (signal.aborted) {
        await queue.shutDown({ timeoutMs: 0 });
        return;
      }
      const concurrency = options.concurrency ?? 2;
      log.info({ concurrency }, 'starting allocator workers');
      for (const key of allKeys()) queue.add(key);
      await loop.serve({ concurrency, resyncIntervalMs: options.resyncIntervalMs ?? 600_000, drainTimeoutMs }, signal);
    },
    async stop(): Promise<void> {
      for (const s of subscriptions) s.unsubscribe();
    },
  };
}
