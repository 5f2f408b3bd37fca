import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from './prom.ts';

const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A metric of a table (METRICS here, the webhook's in webhook/metrics.ts), made when the table is registered. */
type Make<M> = (registers: Registry[]) => M;

export const counter =
  <L extends string = never>(name: string, help: string, labelNames: L[] = []): Make<Counter<L>> =>
  (registers) =>
    new Counter({ name, help, labelNames, registers });
export const gauge =
  <L extends string = never>(name: string, help: string, labelNames: L[] = []): Make<Gauge<L>> =>
  (registers) =>
    new Gauge({ name, help, labelNames, registers });
/** Every histogram measures durations. */
export const histogram =
  <L extends string>(name: string, help: string, labelNames: L[], buckets = durationBuckets): Make<Histogram<L>> =>
  (registers) =>
    new Histogram({ name, help, labelNames, buckets, registers });

export type Registered<T> = { [K in keyof T]: T[K] extends Make<infer M> ? M : never };

/** Registers every metric of `table` in `registry`, in the table's order (once per registry). */
export function registerAll<T extends Record<string, Make<unknown>>>(table: T, registry: Registry): Registered<T> {
  return Object.fromEntries(Object.entries(table).map(([key, make]) => [key, make([registry])])) as Registered<T>;
}

/**
 * Metric names follow controller-runtime where a metric means the same thing, so dashboards and alerts written for
 * Go controllers work unchanged; project-specific ones carry the `persistent_ips_` prefix. Registered in this order.
 */
const METRICS = {
  reconcileTotal: counter(
    'controller_runtime_reconcile_total',
    'Total number of reconciliations per controller and result (success, error, requeue, requeue_after).',
    ['controller', 'result'],
  ),
  reconcileErrors: counter('controller_runtime_reconcile_errors_total', 'Total number of reconciliation errors per controller.', ['controller']),
  reconcileTime: histogram('controller_runtime_reconcile_time_seconds', 'Length of time per reconciliation per controller.', ['controller']),
  activeWorkers: gauge('controller_runtime_active_workers', 'Number of currently used workers per controller.', ['controller']),
  workqueueDepth: gauge('workqueue_depth', 'Current depth of the work queue.', ['name']),
  workqueueAdds: counter('workqueue_adds_total', 'Total number of adds handled by the work queue.', ['name']),
  workqueueRetries: counter('workqueue_retries_total', 'Total number of retries handled by the work queue.', ['name']),
  workqueueQueueDuration: histogram('workqueue_queue_duration_seconds', 'How long in seconds an item stays in the work queue before being processed.', [
    'name',
  ]),
  workqueueWorkDuration: histogram('workqueue_work_duration_seconds', 'How long in seconds processing an item from the work queue takes.', ['name']),
  claimsCreated: counter('persistent_ips_claims_created_total', 'IPAMClaims created by this controller.'),
  claimsDeleted: counter('persistent_ips_claims_deleted_total', 'IPAMClaims deleted by this controller (hot-unplugged or removed networks).'),
  finalizersRemoved: counter('persistent_ips_finalizers_removed_total', 'Finalizers removed from IPAMClaims once no VM or VMI could use them.'),
  persistenceBlocked: counter(
    'persistent_ips_persistence_blocked_total',
    'Times persistence was found blocked for a VM network, by reason (counted once per new cause).',
    ['reason'],
  ),
  apiRequests: counter('persistent_ips_api_requests_total', 'Requests this controller sent to the API server, by verb, resource and status code.', [
    'verb',
    'resource',
    'code',
  ]),
  eventsDropped: counter(
    'persistent_ips_events_dropped_total',
    'Events that could not be recorded: namespace_terminating (expected during a namespace deletion, not retried) or error (retried at the next reconcile).',
    ['reason'],
  ),
  featureGate: gauge(
    'persistent_ips_feature_gate_enabled',
    'Whether a KubeVirt feature gate this controller obeys is on (1) or off (0), as the controller currently sees it.',
    ['name'],
  ),
  isLeader: gauge('leader_election_master_status', 'Whether this replica currently holds the leader lease (1) or not (0).'),
};

export type Metrics = { registry: Registry } & Registered<typeof METRICS>;

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics(registry);
  return { registry, ...registerAll(METRICS, registry) };
}
