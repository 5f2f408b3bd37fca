// Wiring: informer events → keys → work queue → reconcile. Informers and the queue's intake run on every replica
// (the webhook reads the same caches); workers run only while this replica leads.

import { keyString } from '../kube/key.ts';
import type { Logger } from 'pino';
import { merge } from '../streams/rx.ts';
import type { KubeClient } from '../kube/client.ts';
import type { WorkQueue } from '../queue/index.ts';
import { type Sources, VMIS_BY_NAD, VMS_BY_NAD } from '../sources/index.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { EventRecorder } from './events.ts';
import { FEATURE_GATE } from '../claims/constants.ts';
import { describeGate, type GateOverride, type GateState, resolveGate } from './feature-gate.ts';
import { keysOfClaim, keysOfNadChange, type NadKeyLookup } from './keys.ts';
import { createLoop, watch, type Watch } from './loop.ts';
import { createReconciler, type ReconcileTally } from './reconciler.ts';
import type { ReconcileResult } from '../queue/index.ts';
import { WriteOverlay } from './write-overlay.ts';

const CONTROLLER_NAME = 'virtualmachine-ipamclaims';
/** How often, while leading, an info line sums up what the workers did (only when they did something); single writes are logged at debug. */
const SUMMARY_INTERVAL_MS = 60_000;

export interface ControllerOptions {
  client: KubeClient;
  sources: Sources;
  gateOverride: GateOverride;
  log: Logger;
  metrics?: Metrics;
  concurrency: number;
  /** Full pass over every key; default 10 minutes. */
  resyncIntervalMs?: number;
}

export interface Controller {
  readonly queue: WorkQueue;
  gate(): GateState;
  /** Runs the workers until `signal` aborts, then lets in-flight reconciles finish within `drainTimeoutMs`. */
  lead(signal: AbortSignal, drainTimeoutMs?: number): Promise<void>;
  /** Stops mapping events to keys (call after the informers stopped). */
  dispose(): void;
}

/** Create before the sources start, so that their initial adds are mapped to keys. */
export function createController(options: ControllerOptions): Controller {
  const { client, sources, log, metrics } = options;
  const overlay = new WriteOverlay();
  const recorder = new EventRecorder((event) => client.createEvent(event), log.child({ component: 'events' }), metrics);
  // The feature gate as the KubeVirt CRs (or the override) set it, and its metric.
  let gate = resolveGate(options.gateOverride, sources.kubeVirts.list());
  const publishGate = () => metrics?.featureGate.set({ name: FEATURE_GATE }, gate.enabled ? 1 : 0);
  publishGate();
  /** Resolves the gate again after a KubeVirt CR changed: every key when that switched it on or off. */
  const onKubeVirtChange = (): Iterable<string> => {
    const next = resolveGate(options.gateOverride, sources.kubeVirts.list());
    const changed = next.enabled !== gate.enabled;
    gate = next;
    if (!changed) return [];
    publishGate();
    // While the KubeVirt CRs are first listed the gate is being learnt, not changed: the state is logged once,
    // at info, when the caches have synced (run.ts).
    const level = sources.kubeVirts.hasSynced ? 'info' : 'debug';
    log[level]({ gate: FEATURE_GATE, enabled: next.enabled, source: next.source, state: describeGate(next) }, 'feature gate changed; reconciling every VM');
    return allKeys(sources);
  };
  const summary = workerSummary(sources, log);
  const gateEnabled = (): boolean => gate.enabled;
  const loop = createLoop({
    name: CONTROLLER_NAME,
    reconciler: createReconciler({ sources, client, gateEnabled, recorder, overlay, log, tally: summary.tally, ...(metrics ? { metrics } : {}) }),
    keys: () => allKeys(sources),
    watches: [...watchesOf(sources, overlay, recorder), watch(sources.kubeVirts.events$, onKubeVirtChange)],
    log,
    ...(metrics ? { metrics } : {}),
  });
  const { queue } = loop;

  return {
    queue,
    gate: () => gate,
    async lead(signal: AbortSignal, drainTimeoutMs = 30_000): Promise<void> {
      log.info({ concurrency: options.concurrency, gate }, 'starting workers');
      const summaries = setInterval(() => summary.report(queue), SUMMARY_INTERVAL_MS);
      summaries.unref();
      // Keys enqueued before we led (while a standby, or before the caches synced) are already in the queue.
      try {
        const serving = { concurrency: options.concurrency, resyncIntervalMs: options.resyncIntervalMs ?? 600_000, drainTimeoutMs };
        await loop.serve(serving, signal, (key, ctx) => summary.count(() => loop.reconcile(key, ctx)));
      } finally {
        clearInterval(summaries);
        summary.report(queue);
      }
    },
    dispose: loop.dispose,
  };
}

function allKeys(sources: Sources): Set<string> {
  const keys = new Set<string>([...sources.vms.keys(), ...sources.vmis.keys()]);
  // Claims whose VM and VMI are both gone still need their finalizers released.
  for (const claim of sources.claims.list()) for (const key of keysOfClaim(claim)) keys.add(key);
  return keys;
}

/** The keys each VM, VMI, claim and NAD event concerns; what a full list brings waits behind live changes. */
function watchesOf(sources: Sources, overlay: WriteOverlay, recorder: EventRecorder): Watch[] {
  const nadLookup: NadKeyLookup = {
    referencing: (nadKey) => [...sources.vms.indexKeys(VMS_BY_NAD, nadKey), ...sources.vmis.indexKeys(VMIS_BY_NAD, nadKey)],
    inNamespace: (ns) => [...sources.vms.keys(ns), ...sources.vmis.keys(ns)],
  };
  const listsLow = { listsLow: true };
  return [
    watch(
      merge(sources.vms.events$, sources.vmis.events$),
      (e) => {
        if (e.type === 'delete' && e.object.metadata.uid) recorder.forget(e.object.metadata.uid);
        return [keyString(e.object.metadata)];
      },
      listsLow,
    ),
    watch(
      sources.claims.events$,
      (e) => {
        if (e.type === 'delete') overlay.observeDeleted(keyString(e.object.metadata), e.object.metadata.uid);
        // Our own create or patch coming back: nothing for the VM's reconcile to learn (every claim a cold start or a
        // churn creates would otherwise reconcile its VM once more).
        else if (overlay.observeUpdated(keyString(e.object.metadata), e.object, e.type === 'add')) return [];
        return new Set([...keysOfClaim(e.object), ...(e.old ? keysOfClaim(e.old) : [])]);
      },
      listsLow,
    ),
    watch(sources.nads.events$, (e) => keysOfNadChange(e.object, e.old, nadLookup), listsLow),
  ];
}

/** The workers' running totals, and the info line that sums up what they did since the last one. */
function workerSummary(sources: Sources, log: Logger) {
  const tally: ReconcileTally & { reconciles: number; errors: number } = { reconciles: 0, errors: 0, created: 0, finalizersRemoved: 0, deleted: 0 };
  let reported = { ...tally };
  return {
    tally,
    async count(reconcile: () => Promise<ReconcileResult>): Promise<ReconcileResult> {
      tally.reconciles++;
      try {
        return await reconcile();
      } catch (err) {
        tally.errors++;
        throw err;
      }
    },
    report(queue: WorkQueue): void {
      if (tally.reconciles === reported.reconciles) return;
      const since = (k: keyof typeof tally): number => tally[k] - reported[k];
      log.info(
        {
          reconciles: since('reconciles'),
          claimsCreated: since('created'),
          finalizersRemoved: since('finalizersRemoved'),
          claimsDeleted: since('deleted'),
          errors: since('errors'),
          queueDepth: queue.len(),
          vms: sources.vms.size,
          vmis: sources.vmis.size,
          claims: sources.claims.size,
        },
        'summary since the last one',
      );
      reported = { ...tally };
    },
  };
}
