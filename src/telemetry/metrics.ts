import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from './prom.ts';

/**
 * Metric names follow controller-runtime where a metric means the same thing, so dashboards and alerts written for
 * Go controllers work unchanged; project-specific ones carry the `persistent_ips_` prefix.
 */
export interface Metrics {
  registry: Registry;
  reconcileTotal: Counter<'controller' | 'result'>;
  reconcileErrors: Counter<'controller'>;
  reconcileTime: Histogram<'controller'>;
  activeWorkers: Gauge<'controller'>;
  workqueueDepth: Gauge<'name'>;
  workqueueAdds: Counter<'name'>;
  workqueueRetries: Counter<'name'>;
  workqueueQueueDuration: Histogram<'name'>;
  workqueueWorkDuration: Histogram<'name'>;
  claimsCreated: Counter<never>;
  claimsDeleted: Counter<never>;
  finalizersRemoved: Counter<never>;
  persistenceBlocked: Counter<'reason'>;
  apiRequests: Counter<'verb' | 'resource' | 'code'>;
  isLeader: Gauge<never>;
  featureGate: Gauge<'name'>;
  eventsDropped: Counter<'reason'>;
}

const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics(registry);
  const on = new MetricsOf(registry);
  return {
    registry,
    reconcileTotal: on.counter(
      'controller_runtime_reconcile_total',
      'Total number of reconciliations per controller and result (success, error, requeue, requeue_after).',
      ['controller', 'result'],
    ),
    reconcileErrors: on.counter('controller_runtime_reconcile_errors_total', 'Total number of reconciliation errors per controller.', ['controller']),
    reconcileTime: on.histogram('controller_runtime_reconcile_time_seconds', 'Length of time per reconciliation per controller.', ['controller']),
    activeWorkers: on.gauge('controller_runtime_active_workers', 'Number of currently used workers per controller.', ['controller']),
    workqueueDepth: on.gauge('workqueue_depth', 'Current depth of the work queue.', ['name']),
    workqueueAdds: on.counter('workqueue_adds_total', 'Total number of adds handled by the work queue.', ['name']),
    workqueueRetries: on.counter('workqueue_retries_total', 'Total number of retries handled by the work queue.', ['name']),
    workqueueQueueDuration: on.histogram('workqueue_queue_duration_seconds', 'How long in seconds an item stays in the work queue before being processed.', [
      'name',
    ]),
    workqueueWorkDuration: on.histogram('workqueue_work_duration_seconds', 'How long in seconds processing an item from the work queue takes.', ['name']),
    claimsCreated: on.counter('persistent_ips_claims_created_total', 'IPAMClaims created by this controller.'),
    claimsDeleted: on.counter('persistent_ips_claims_deleted_total', 'IPAMClaims deleted by this controller (hot-unplugged or removed networks).'),
    finalizersRemoved: on.counter('persistent_ips_finalizers_removed_total', 'Finalizers removed from IPAMClaims once no VM or VMI could use them.'),
    persistenceBlocked: on.counter(
      'persistent_ips_persistence_blocked_total',
      'Times persistence was found blocked for a VM network, by reason (counted once per new cause).',
      ['reason'],
    ),
    apiRequests: on.counter('persistent_ips_api_requests_total', 'Requests this controller sent to the API server, by verb, resource and status code.', [
      'verb',
      'resource',
      'code',
    ]),
    eventsDropped: on.counter(
      'persistent_ips_events_dropped_total',
      'Events that could not be recorded: namespace_terminating (expected during a namespace deletion, not retried) or error (retried at the next reconcile).',
      ['reason'],
    ),
    featureGate: on.gauge(
      'persistent_ips_feature_gate_enabled',
      'Whether a KubeVirt feature gate this controller obeys is on (1) or off (0), as the controller currently sees it.',
      ['name'],
    ),
    isLeader: on.gauge('leader_election_master_status', 'Whether this replica currently holds the leader lease (1) or not (0).'),
  };
}

/** Metrics registered in one registry; every histogram measures durations. */
class MetricsOf {
  readonly #registers: Registry[];

  constructor(registry: Registry) {
    this.#registers = [registry];
  }

  counter<L extends string = never>(name: string, help: string, labelNames: L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: this.#registers });
  }

  gauge<L extends string = never>(name: string, help: string, labelNames: L[] = []): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: this.#registers });
  }

  histogram<L extends string>(name: string, help: string, labelNames: L[]): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets: durationBuckets, registers: this.#registers });
  }
}
