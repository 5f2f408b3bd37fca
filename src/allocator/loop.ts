// The allocator loop, built like the claims loop (controller/loop.ts): its own work queue, fed by claim, NAD, VM and
// VMI events, run only by the leader. A request with the empty namespace is a network (cluster-wide): gather
// (gather.ts) resolves its pool from its NADs and every claim of the network (cache + our own writes the cache has
// not shown yet), decide (decide.ts, with plan.ts, pure) plans, apply (apply.ts) writes the statuses and tells
// people. Any other request is a NAD whose own switch is wrong, reported on it.
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

import { keyString } from '../kube/key.ts';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { merge } from '../streams/rx.ts';
import type { KubeClient } from '../kube/client.ts';
import { ifFound } from '../kube/errors.ts';
import { resources } from '../kube/resources.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod } from '../kube/types.ts';
import { hasActivePods, launcherPodSelector } from '../claims/index.ts';
import { type Clock, realClock, sleep } from '../kube/clock.ts';
import type { WorkQueue } from '../queue/index.ts';
import { createLoop, type LoopReconciler, type Watch, watch } from '../controller/loop.ts';
import type { Sources } from '../sources/kinds.ts';
import { CLAIMS_BY_OWNER_NAME, NADS_BY_NETWORK, nadNetwork, registerIndexes, vmisByNad } from '../sources/indexes.ts';
import { trimIPAMClaim, trimNetworkAttachmentDefinition } from '../sources/trim.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { EventRecorder } from '../controller/events.ts';
import { createAllocatorMetrics } from './metrics.ts';
import { isAllocatorNad } from '../claims/nad-config.ts';
import { ALLOCATOR_ANNOTATION } from './nad.ts';
import { WriteOverlay, resourceVersionAtLeast } from '../controller/write-overlay.ts';
import { createPodAddressLookup, type PodAddressLookup } from './pod-addresses.ts';
import { gatherNetwork } from './gather.ts';
import { decideNad, decideNetwork } from './decide.ts';
import { applyPlan } from './apply.ts';
import type { AllocatorInput, AllocatorPlan, NetworkReconcilerDeps } from './pass.ts';

export const ALLOCATOR_QUEUE = 'ipamclaim-allocator';

// ---------------------------------------------------------------------------------------------------------------
// One pass over one network.

// A request with the empty namespace is a network (cluster-wide); any other, a NAD of that namespace.
export function createNetworkReconciler(deps: NetworkReconcilerDeps): LoopReconciler<AllocatorInput, AllocatorPlan> {
  const now = deps.now ?? (() => new Date());
  return {
    gather: async ({ namespace, name }, ctx) => {
      if (namespace === '') return gatherNetwork(deps, now, name, ctx.signal);
      const key = keyString({ namespace, name });
      return { kind: 'nad', key, nad: deps.nads.getByKey(key) };
    },
    decide: (input) => (input.kind === 'nad' ? decideNad(input.key, input.nad) : decideNetwork(input)),
    apply: (_request, input, plan, ctx) => applyPlan(deps, input, plan, ctx.signal),
  };
}

/**
 * The queue key of a network: `/network`, the empty namespace (a network is cluster-wide). The leading `/` keeps it
 * apart from every NAD's `namespace/name` key; parseKey reads it back as the empty namespace.
 */
export const networkKey = (network: string): string => `/${network}`;

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

type AllocatorSources = AllocatorOptions['sources'];

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
    watches: watches(options.sources, overlay),
    keys: () => allKeys(nads, overlay),
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
      // resourceVersion in a merge patch makes it conditional: 409 Conflict if the claim changed meanwhile.
      writeStatus: (claim, status, resourceVersion, signal) =>
        client.mergePatch<IPAMClaim>(
          resources.ipamClaims,
          claim.metadata.namespace,
          claim.metadata.name,
          { metadata: { resourceVersion }, status },
          { subresource: 'status', signal },
        ),
      readClaim,
      listLauncherPods: async (namespace, vmiUid, signal) =>
        (await client.list<Pod>(resources.pods, { namespace, labelSelector: launcherPodSelector(vmiUid), signal })).items,
    }),
  });
  const { queue } = loop;

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
      await barrier({ client, claims, overlay, log, clock, scope }, signal);
      if (signal.aborted) {
        await queue.shutDown({ timeoutMs: 0 });
        return;
      }
      const concurrency = options.concurrency ?? 2;
      log.info({ concurrency }, 'starting allocator workers');
      for (const key of allKeys(nads, overlay)) queue.add(key);
      await loop.serve({ concurrency, resyncIntervalMs: options.resyncIntervalMs ?? 600_000, drainTimeoutMs }, signal);
    },
    async stop(): Promise<void> {
      loop.dispose();
    },
  };
}

/** Every key to serve: each NAD that names the switch, each network served or still held in the overlay. */
function allKeys(nads: AllocatorSources['nads'], overlay: WriteOverlay): string[] {
  const out = new Set<string>();
  for (const nad of nads.list()) {
    if (nad.metadata.annotations?.[ALLOCATOR_ANNOTATION] !== undefined) out.add(keyString(nad.metadata));
    if (!isAllocatorNad(nad)) continue;
    const network = nadNetwork(nad)[0];
    if (network !== undefined) out.add(networkKey(network));
  }
  for (const network of overlay.networks()) out.add(networkKey(network));
  return [...out];
}

/** The events that bring keys into the queue: a claim's network, a NAD's networks and itself, a VM's or VMI's claims. */
function watches({ nads, vms, vmis, claims }: AllocatorSources, overlay: WriteOverlay): Watch[] {
  const managed = (network: string): boolean => nads.byIndex(NADS_BY_NETWORK, network).some(isAllocatorNad) || overlay.keysOf(network).length > 0;
  const networkKeys = (networks: readonly (string | undefined)[]): string[] =>
    [...new Set(networks)].filter((n): n is string => !!n && managed(n)).map(networkKey);
  return [
    watch(claims.events$, (e) => {
      if (e.type === 'delete') overlay.observeDeleted(keyString(e.object.metadata), e.object.metadata.uid);
      return networkKeys([e.object.spec?.network, e.old?.spec?.network]);
    }),
    watch(nads.events$, (e) => {
      const networks = new Set([...nadNetwork(e.object), ...(e.old ? nadNetwork(e.old) : [])]);
      // A network any of whose NADs opts in, or opted in before this change (to clear what was reported).
      const wasOn = isAllocatorNad(e.object) || (e.old !== undefined && isAllocatorNad(e.old));
      const keys = [...networks].filter((network) => wasOn || managed(network)).map(networkKey);
      const mentions = (n: NetworkAttachmentDefinition | undefined) => n?.metadata.annotations?.[ALLOCATOR_ANNOTATION] !== undefined;
      return mentions(e.object) || mentions(e.old) ? [...keys, keyString(e.object.metadata)] : keys;
    }),
    watch(merge(vms.events$, vmis.events$), (e) => networkKeys(claims.byIndex(CLAIMS_BY_OWNER_NAME, keyString(e.object.metadata)).map((c) => c.spec?.network))),
    // A VMI's pods may hold addresses no claim records (plan.ts, inUse): when it gains or loses its pods, a claim refused
    // because of them may now be served.
    watch(vmis.events$, (e) => {
      if (e.type === 'update' && e.old && hasActivePods(e.old) === hasActivePods(e.object)) return [];
      return networkKeys(
        [...vmisByNad(e.object)].flatMap((key) => {
          const nad = nads.getByKey(key);
          return nad ? nadNetwork(nad) : [];
        }),
      );
    }),
  ];
}

interface BarrierDeps {
  client: KubeClient;
  claims: AllocatorSources['claims'];
  overlay: WriteOverlay;
  log: Logger;
  clock: Clock;
  /** The namespace the sources watch, if only one. */
  scope: { namespace?: string };
}

/** The consistent read that makes the previous leader's last writes count (see the header). */
async function barrier({ client, claims, overlay, log, clock, scope }: BarrierDeps, signal: AbortSignal): Promise<void> {
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      const { items } = await client.listAll<unknown>(resources.ipamClaims, { ...scope, signal });
      let seeded = 0;
      for (const item of items) {
        const fresh = trimIPAMClaim(item);
        const key = keyString(fresh.metadata);
        const cached = claims.getByKey(key);
        const cachedVersion = cached?.metadata.resourceVersion;
        const caughtUp = cachedVersion === fresh.metadata.resourceVersion || resourceVersionAtLeast(cachedVersion, fresh.metadata.resourceVersion);
        if (cached !== undefined && cached.metadata.uid === fresh.metadata.uid && caughtUp) continue;
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
}
