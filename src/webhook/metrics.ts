// Webhook metrics. The HTTP-level ones carry controller-runtime's names and labels, so that dashboards for Go
// webhooks work unchanged; the admission outcomes are this project's.

import { Counter, Gauge, Histogram, type Registry } from '../telemetry/prom.ts';

export interface WebhookMetrics {
  requests: Counter<'webhook' | 'code'>;
  inFlight: Gauge<'webhook'>;
  latency: Histogram<'webhook'>;
  admissions: Counter<'result'>;
  vmiLookups: Counter<'source'>;
  claimLookups: Counter<'source'>;
}

/** Registers the webhook metrics in `registry` (once per registry). */
export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  const registers = [registry];
  const counter = <T extends string>(name: string, help: string, labelNames: T[]) => new Counter<T>({ name, help, labelNames, registers });
  return {
    requests: counter('controller_runtime_webhook_requests_total', 'Total number of admission requests by HTTP status code.', ['webhook', 'code']),
    inFlight: new Gauge({
      name: 'controller_runtime_webhook_requests_in_flight',
      help: 'Current number of admission requests being served.',
      labelNames: ['webhook'],
      registers,
    }),
    latency: new Histogram({
      name: 'controller_runtime_webhook_latency_seconds',
      help: 'Histogram of the latency of processing admission requests.',
      labelNames: ['webhook'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    admissions: counter(
      'persistent_ips_webhook_admissions_total',
      'Launcher-pod admissions by outcome: patched, unchanged, skipped, denied, allowed_without_vmi, unreadable.',
      ['result'],
    ),
    vmiLookups: counter(
      'persistent_ips_webhook_vmi_lookups_total',
      'Where the webhook found the VMI of a launcher pod: cache, api, api_not_found, api_error.',
      ['source'],
    ),
    claimLookups: counter(
      'persistent_ips_webhook_claim_lookups_total',
      "Where the webhook found the claim a launcher pod is pointed at, by network: cache (this VM's at once), cache_after_wait (appeared while watched), api (read after the wait; usable or not).",
      ['source'],
    ),
  };
}
