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
  const registers = [registry];
  return {
    registry,
    reconcileTotal: new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller and result (success, error, requeue, requeue_after).',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileErrors: new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller.',
      labelNames: ['controller'],
      registers,
    }),
    reconcileTime: new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller.',
      labelNames: ['controller'],
      buckets: durationBuckets,
      registers,
    }),
    activeWorkers: new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller.',
      labelNames: ['controller'],
      registers,
    }),
    workqueueDepth: new Gauge({ name: 'workqueue_depth', help: 'Current depth of the work queue.', labelNames: ['name'], registers }),
    workqueueAdds: new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by the work queue.', labelNames: ['name'], registers }),
    workqueueRetries: new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by the work queue.',
      labelNames: ['name'],
      registers,
    }),
    workqueueQueueDuration: new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in the work queue before being processed.',
      labelNames: ['name'],
      buckets: durationBuckets,
      registers,
    }),
    workqueueWorkDuration: new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from the work queue takes.',
      labelNames: ['name'],
      buckets: durationBuckets,
      registers,
    }),
    claimsCreated: new Counter({ name: 'persistent_ips_claims_created_total', help: 'IPAMClaims created by this controller.', registers }),
    claimsDeleted: new Counter({
      name: 'persistent_ips_claims_deleted_total',
      help: 'IPAMClaims deleted by this controller (hot-unplugged or removed networks).',
      registers,
    }),
    finalizersRemoved: new Counter({
      name: 'persistent_ips_finalizers_removed_total',
      help: 'Finalizers removed from IPAMClaims once no VM or VMI could use them.',
      registers,
    }),
    persistenceBlocked: new Counter({
      name: 'persistent_ips_persistence_blocked_total',
      help: 'Times persistence was found blocked for a VM network, by reason (counted once per new cause).',
      labelNames: ['reason'],
      registers,
    }),
    apiRequests: new Counter({
      name: 'persistent_ips_api_requests_total',
      help: 'Requests this controller sent to the API server, by verb, resource and status code.',
      labelNames: ['verb', 'resource', 'code'],
      registers,
    }),
    eventsDropped: new Counter({
      name: 'persistent_ips_events_dropped_total',
      help: 'Events that could not be recorded: namespace_terminating (expected during a namespace deletion, not retried) or error (retried at the next reconcile).',
      labelNames: ['reason'],
      registers,
    }),
    featureGate: new Gauge({
      name: 'persistent_ips_feature_gate_enabled',
      help: 'Whether a KubeVirt feature gate this controller obeys is on (1) or off (0), as the controller currently sees it.',
      labelNames: ['name'],
      registers,
    }),
    isLeader: new Gauge({ name: 'leader_election_master_status', help: 'Whether this replica currently holds the leader lease (1) or not (0).', registers }),
  };
}
