// Binds the queue's and the runner's metric hooks to the prom-client collectors, so src/queue stays free of any
// metrics library.

import type { ReconcileMetrics, WorkQueueMetrics } from '../queue/index.ts';
import type { Metrics } from './metrics.ts';

export function workQueueMetrics(metrics: Metrics, name: string): WorkQueueMetrics {
  const labels = { name };
  return {
    depth: (v) => metrics.workqueueDepth.set(labels, v),
    adds: () => metrics.workqueueAdds.inc(labels),
    queueDuration: (s) => metrics.workqueueQueueDuration.observe(labels, s),
    workDuration: (s) => metrics.workqueueWorkDuration.observe(labels, s),
    retries: () => metrics.workqueueRetries.inc(labels),
  };
}

export function reconcileMetrics(metrics: Metrics, controller: string): ReconcileMetrics {
  return {
    reconcileTotal: (result) => metrics.reconcileTotal.inc({ controller, result }),
    reconcileErrors: () => metrics.reconcileErrors.inc({ controller }),
    reconcileTime: (s) => metrics.reconcileTime.observe({ controller }, s),
    activeWorkers: (v) => metrics.activeWorkers.set({ controller }, v),
  };
}
