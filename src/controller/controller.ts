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
  const gate = new FeatureGate(options.gateOverride, sources.kubeVirts, metrics);
  const summary = new WorkerSummary(sources, log);
  const gateEnabled = (): boolean => gate.state.enabled;
  const loop = createLoop({
    name: CONTROLLER_NAME,
    reconciler: createReconciler({ sources, client, gateEnabled, recorder, overlay, log, tally: summary.tally, ...(metrics ? { metrics } : {}) }),
    keys: () => allKeys(sources),
    watches: [...watchesOf(sources, overlay, recorder), watch(sources.kubeVirts.events$, () => (gate.refresh(log) ? allKeys(sources) : []))],
    log,
    ...(metrics ? { metrics } : {}),
  });
  const { queue } = loop;

  return {
    queue,
    gate: () => gate.state,
    async lead(signal: AbortSignal, drainTimeoutMs = 30_000): Promise<void> {
      log.info({ concurrency: options.concurrency, gate: gate.state }, 'starting workers');
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

/** The feature gate as the KubeVirt CRs (or the override) set it, and its metric. */
class FeatureGate {
  state: GateState;
  readonly #override: GateOverride;
  readonly #kubeVirts: Sources['kubeVirts'];
  readonly #metrics: Metrics | undefined;

  constructor(override: GateOverride, kubeVirts: Sources['kubeVirts'], metrics: Metrics | undefined) {
    this.#override = override;
    this.#kubeVirts = kubeVirts;
    this.#metrics = metrics;
    this.state = resolveGate(override, kubeVirts.list());
    metrics?.featureGate.set({ name: FEATURE_GATE }, this.state.enabled ? 1 : 0);
  }

  /** Resolves the gate again after a KubeVirt CR changed. True when that switched it on or off. */
  refresh(log: Logger): boolean {
    const next = resolveGate(this.#override, this.#kubeVirts.list());
    const changed = next.enabled !== this.state.enabled;
    this.state = next;
    if (!changed) return false;
    this.#metrics?.featureGate.set({ name: FEATURE_GATE }, next.enabled ? 1 : 0);
    // While the KubeVirt CRs are first listed the gate is being learnt, not changed: the state is logged once,
    // at info, when the caches have synced (run.ts).
    const level = this.#kubeVirts.hasSynced ? 'info' : 'debug';
    log[level]({ gate: FEATURE_GATE, enabled: next.enabled, source: next.source, state: describeGate(next) }, 'feature gate changed; reconciling every VM');
    return true;
  }
}

/** The workers' running totals, and the info line that sums up what they did since the last one. */
class WorkerSummary {
  readonly tally: ReconcileTally & { reconciles: number; errors: number } = { reconciles: 0, errors: 0, created: 0, finalizersRemoved: 0, deleted: 0 };
  #reported = { ...this.tally };
  readonly #sources: Sources;
  readonly #log: Logger;

  constructor(sources: Sources, log: Logger) {
    this.#sources = sources;
    this.#log = log;
  }

  async count(reconcile: () => Promise<ReconcileResult>): Promise<ReconcileResult> {
    this.tally.reconciles++;
    try {
      return await reconcile();
    } catch (err) {
      this.tally.errors++;
      throw err;
    }
  }

  report(queue: WorkQueue): void {
    const { tally } = this;
    if (tally.reconciles === this.#reported.reconciles) return;
    const since = (k: keyof typeof tally): number => tally[k] - this.#reported[k];
    const sources = this.#sources;
    this.#log.info(
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
    this.#reported = { ...tally };
  }
}
