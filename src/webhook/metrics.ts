// Webhook metrics. The HTTP-level ones carry controller-runtime's names and labels, so that dashboards for Go
// webhooks work unchanged; the admission outcomes are this project's.

import type { Registry } from '../telemetry/prom.ts';
import { counter, gauge, histogram, registerAll, type Registered } from '../telemetry/metrics.ts';

const WEBHOOK_METRICS = {
  requests: counter('controller_runtime_webhook_requests_total', 'Total number of admission requests by HTTP status code.', ['webhook', 'code']),
  inFlight: gauge('controller_runtime_webhook_requests_in_flight', 'Current number of admission requests being served.', ['webhook']),
  latency: histogram(
    'controller_runtime_webhook_latency_seconds',
    'Histogram of the latency of processing admission requests.',
    ['webhook'],
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  ),
  admissions: counter(
    'persistent_ips_webhook_admissions_total',
    'Launcher-pod admissions by outcome: patched, unchanged, skipped, denied, allowed_without_vmi, unreadable.',
    ['result'],
  ),
  vmiLookups: counter('persistent_ips_webhook_vmi_lookups_total', 'Where the webhook found the VMI of a launcher pod: cache, api, api_not_found, api_error.', [
    'source',
  ]),
  claimLookups: counter(
    'persistent_ips_webhook_claim_lookups_total',
    "Where the webhook found the claim a launcher pod is pointed at, by network: cache (this VM's at once), cache_after_wait (appeared while watched), api (read after the wait; usable or not).",
    ['source'],
  ),
};

export type WebhookMetrics = Registered<typeof WEBHOOK_METRICS>;

/** Registers the webhook metrics in `registry` (once per registry). */
export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  return registerAll(WEBHOOK_METRICS, registry);
}
