// The servers `run` starts on every replica, leader or not: health probes, metrics and the launcher-pod webhook. A
// port the user chose that cannot be bound is said in one line.

import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { merge } from '../streams/rx.ts';
import type { PodAddressLookup } from '../allocator/pod-addresses.ts';
import { EventRecorder } from '../controller/events.ts';
import type { KubeClient } from '../kube/client.ts';
import type { createSources } from '../sources/index.ts';
import type { createMetrics } from '../telemetry/metrics.ts';
import { createMetricsAuthorizer, kubeReviewClient } from '../telemetry/metrics-auth.ts';
import { createTelemetryServer, type TelemetryServer } from '../telemetry/server.ts';
import { apiFetchers, createPodAdmissionHandler } from '../webhook/admission.ts';
import { createFileCertificates, createSelfManagedCertificates, kubeCertStoreClient, type CertificateSource } from '../webhook/cert-provisioning.ts';
import { DEFAULT_CERT_POLICY, DEFAULT_SECRET_NAME, generateCa, generateServing, serviceDnsNames } from '../webhook/certs.ts';
import { createWebhookMetrics } from '../webhook/metrics.ts';
import { createWebhookServer, type WebhookServer } from '../webhook/server.ts';
import { tlsProfile } from '../telemetry/tls-profile.ts';
import { parseBindAddress } from './addresses.ts';
import { CliError, EXIT } from './exit-codes.ts';
import type { RunOptions } from './run-flags.ts';

const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'address already in use',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'no such local address',
  ENOTFOUND: 'unknown host',
};

/** A port the user chose cannot be bound: one line naming the flag and the address. */
async function listenOrExplain<T>(listening: Promise<T>, server: string, address: string): Promise<T> {
  try {
    return await listening;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const why = LISTEN_ERRORS[code];
    if (why === undefined) throw err;
    throw new CliError(`cannot listen on ${address} (--${server}-bind-address): ${why} (${code})`, EXIT.failure, { cause: err });
  }
}

/** What the parts `run` starts share: the checked flags, the cluster, the caches, the log, the metrics, its namespace. */
export interface Process {
  options: RunOptions;
  client: KubeClient;
  sources: ReturnType<typeof createSources>;
  log: Logger;
  metrics: ReturnType<typeof createMetrics>;
  /** The controller's own namespace (the Lease, the webhook certificate Secret). */
  namespace: string;
}

/** The probes server, for the readiness checks added later, and what shutdown closes. */
type Telemetry = { probes: TelemetryServer | undefined; servers: TelemetryServer[]; metricsCertificates: CertificateSource | undefined };

/** The health-probe and metrics servers, listening (probes first). */
export async function startTelemetry({ options, client, sources, log, metrics }: Process): Promise<Telemetry> {
  const probeAddr = parseBindAddress(options.healthProbeBindAddress);
  const metricsAddr = parseBindAddress(options.metricsBindAddress);
  // Each server with the flag and the address it listens on.
  const serving: [TelemetryServer, string, string][] = [];
  let probes: TelemetryServer | undefined;
  if (probeAddr) {
    probes = createTelemetryServer({ logger: log, port: probeAddr.port, host: probeAddr.host, health: true });
    probes.addReadinessCheck('informers-synced', () => sources.all.every((i) => i.hasSynced));
    serving.push([probes, 'health-probe', options.healthProbeBindAddress]);
  }
  let metricsCertificates: CertificateSource | undefined;
  if (metricsAddr) {
    const metricsServer = createTelemetryServer({
      logger: log,
      port: metricsAddr.port,
      host: metricsAddr.host,
      registry: metrics.registry,
      health: false,
      ...(options.metricsSecure
        ? { tls: tlsProfile(options.tlsMinVersion, options.tlsCipherSuites), authorize: createMetricsAuthorizer({ reviews: kubeReviewClient(client) }) }
        : {}),
    });
    if (options.metricsSecure) metricsCertificates = await metricsCertificate(options, metricsServer, log);
    serving.push([metricsServer, 'metrics', options.metricsBindAddress]);
  }
  for (const [server, flag, address] of serving) {
    const addr = await listenOrExplain(server.listen(), flag, address);
    log.info({ address: `${addr.address}:${addr.port}` }, 'serving');
  }
  return { probes, servers: serving.map(([server]) => server), metricsCertificates };
}

/**
 * The serving certificate of the secure metrics server: the files of --metrics-cert-dir (kept current, e.g. from
 * cert-manager), or else a self-signed one made at start, as controller-runtime does; Prometheus then skips
 * verification (its ServiceMonitor says so) and relies on the bearer token for the rest.
 */
async function metricsCertificate(options: RunOptions, server: TelemetryServer, log: Logger): Promise<CertificateSource | undefined> {
  if (options.metricsCertDir !== undefined) {
    const files = createFileCertificates({
      dir: options.metricsCertDir,
      logger: log.child({ server: 'metrics' }),
      onCertificate: (pair) => server.setCertificate(pair),
    });
    await files.start();
    if (!files.ready()) throw new CliError(`--metrics-cert-dir ${options.metricsCertDir}: no usable tls.crt and tls.key`, EXIT.failure);
    return files;
  }
  const now = Date.now();
  const validityMs = 365 * 24 * 3600 * 1000;
  const ca = await generateCa(now, validityMs, 'persistent-ips-metrics-ca');
  const names = [hostname(), 'localhost'];
  server.setCertificate(await generateServing(ca, now, { dnsNames: names, ipAddresses: ['127.0.0.1', '::1'], servingValidityMs: validityMs }));
  return undefined;
}

/**
 * The launcher-pod webhook: served by every replica, leader or not, from the same caches as the controller (with
 * API reads when the cache has not seen a VMI yet).
 */
export async function startWebhook(
  { options, client, sources, log, metrics, namespace }: Process,
  gateEnabled: () => boolean,
  podAddresses: PodAddressLookup | undefined,
): Promise<{ server: WebhookServer; certificates: CertificateSource } | undefined> {
  const addr = parseBindAddress(options.webhookBindAddress);
  if (!addr) return undefined;
  const webhookMetrics = createWebhookMetrics(metrics.registry);
  // Denials are recorded on the VM by every replica that answers admissions, leader or not: a standby is exactly
  // where a VM waits for a claim nobody is creating yet, and its Events say so.
  const denialEvents = new EventRecorder((event) => client.createEvent(event).then(() => undefined), log.child({ component: 'webhook-events' }));
  // What it remembers of a VM goes with the VM (as the controller's recorder does).
  merge(sources.vms.events$, sources.vmis.events$).subscribe((e) => {
    if (e.type === 'delete' && e.object.metadata.uid) denialEvents.forget(e.object.metadata.uid);
  });
  const mutatePod = createPodAdmissionHandler({
    logger: log,
    gateEnabled,
    vmis: sources.vmis,
    nads: sources.nads,
    claims: sources.claims,
    claimEvents: sources.claims.events$,
    clusterDefaultNetwork: options.defaultNetworkNad,
    reportDenials: (target, causes) => void denialEvents.report(target, causes),
    ...apiFetchers(client),
    metrics: webhookMetrics,
    synced: () => sources.all.every((i) => i.hasSynced),
    ...(options.namespace ? { watchNamespace: options.namespace } : {}),
    ...(podAddresses ? { podAddresses } : {}),
  });
  const tls = tlsProfile(options.tlsMinVersion, options.tlsCipherSuites);
  if (tls.weak.length > 0) log.warn({ weak: tls.weak }, 'weak TLS cipher suites configured with --tls-cipher-suites');
  const server = createWebhookServer({ logger: log, port: addr.port, host: addr.host, mutatePod, metrics: webhookMetrics, tls });
  const onCertificate = (pair: Parameters<WebhookServer['setCertificate']>[0]) => server.setCertificate(pair);
  let certificates: CertificateSource;
  if (options.webhookCertProvisioning === 'external') {
    certificates = createFileCertificates({ dir: options.webhookCertDir, logger: log, onCertificate });
  } else {
    const isIp = (h: string) => /^[0-9.]+$/.test(h) || h.includes(':');
    const names = { namespace: namespace, secretName: DEFAULT_SECRET_NAME, webhookConfigurationName: options.webhookConfigurationName };
    certificates = createSelfManagedCertificates({
      client: kubeCertStoreClient(client, names),
      ...names,
      logger: log,
      onCertificate,
      policy: {
        dnsNames: serviceDnsNames(
          options.webhookServiceName,
          namespace,
          options.webhookCertHosts.filter((h) => !isIp(h)),
        ),
        ipAddresses: options.webhookCertHosts.filter(isIp),
        ...(options.webhookCertValidity ? { servingValidityMs: options.webhookCertValidity * 1000 } : {}),
        ...(options.webhookCaValidity ? { caValidityMs: options.webhookCaValidity * 1000 } : {}),
        ...(options.webhookCertValidity || options.webhookCaValidity ? { trustPropagationMs: Math.min(DEFAULT_CERT_POLICY.trustPropagationMs, 2000) } : {}),
      },
    });
  }
  const bound = await listenOrExplain(server.listen(), 'webhook', options.webhookBindAddress);
  await certificates.start();
  log.info(
    {
      address: `${bound.address}:${bound.port}`,
      provisioning: options.webhookCertProvisioning,
      certificate: certificates.ready(),
      tlsMinVersion: tls.minVersion,
      cipherSuites: tls.suites,
    },
    'serving the launcher-pod webhook',
  );
  return { server, certificates };
}
