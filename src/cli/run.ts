// `persistent-ips run`: the composition root of the controller process. Everything here is wiring and lifecycle;
// behaviour lives in the modules it composes.

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { merge } from '../streams/rx.ts';
import { createAllocator } from '../allocator/loop.ts';
import type { PodAddressLookup } from '../allocator/pod-addresses.ts';
import { createController } from '../controller/controller.ts';
import { EventRecorder } from '../controller/events.ts';
import { FEATURE_GATE } from '../claims/constants.ts';
import { describeGate, parseFeatureGatesFlag } from '../controller/feature-gate.ts';
import { ClusterUnreachableError, KubeClient, KubeConfigError, loadKubeConfig, type LoadedKubeConfig } from '../kube/client.ts';
import { isUnauthorized } from '../kube/errors.ts';
import { createLeaderElector } from '../leader/elector.ts';
import { kubeLeaseClient } from '../leader/kube-lease-client.ts';
import { createSources } from '../sources/index.ts';
import { createLogger } from '../telemetry/logger.ts';
import { createMetrics } from '../telemetry/metrics.ts';
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
import { sizeV8ForMemory, whenSteady } from './v8-sizing.ts';

export { CliError };

export interface RunOptions {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  concurrency: number;
  featureGates?: string;
  logLevel: string;
  leaderElect: boolean;
  controllerNamespace?: string;
  metricsBindAddress: string;
  healthProbeBindAddress: string;
  qps: number;
  burst: number;
  resyncPeriod: number;
  gracefulShutdownTimeout: number;
  webhookBindAddress: string;
  /** `self`: the controller keeps its own CA and serving certificate in a Secret; `external`: files (cert-manager). */
  webhookCertProvisioning: 'self' | 'external';
  webhookCertDir: string;
  webhookServiceName: string;
  webhookConfigurationName: string;
  /** Extra names / IPs in the self-made serving certificate (e.g. 127.0.0.1 when the API server calls a URL). */
  webhookCertHosts: string[];
  /** Validity of self-made serving certificates, in seconds (rotated at 2/3 of it). */
  webhookCertValidity?: number;
  webhookCaValidity?: number;
  /** Run the built-in allocator for NADs that opt in (docs/allocator.md). Default true. */
  allocator?: boolean;
  /** The cluster default network NAD named in a primary UDN's default-network element (--default-network-nad). */
  defaultNetworkNad?: { namespace: string; name: string };
  /** /metrics over HTTPS, each request authenticated and authorised by the cluster (default true). */
  metricsSecure?: boolean;
  /** tls.crt and tls.key of the secure metrics server; default: a self-signed certificate made at start. */
  metricsCertDir?: string;
  /** VersionTLS12 or VersionTLS13 (default VersionTLS12). */
  tlsMinVersion?: string;
  /** IANA names; empty: the AEAD-only default. */
  tlsCipherSuites?: string[];
}

function connect(options: RunOptions, log: Logger): { loaded: LoadedKubeConfig; client: KubeClient; metrics: ReturnType<typeof createMetrics> } {
  let loaded: LoadedKubeConfig;
  try {
    loaded = loadKubeConfig({ ...(options.kubeconfig ? { path: options.kubeconfig } : {}), ...(options.context ? { context: options.context } : {}) });
  } catch (err) {
    if (err instanceof KubeConfigError && (options.kubeconfig !== undefined || options.context !== undefined)) {
      // The file or context the user named is wrong: say which, in one line.
      throw new CliError(err.message.replace(/\s*\n\s*/g, ' '), EXIT.noKubeconfig, { cause: err });
    }
    if (err instanceof KubeConfigError) {
      throw new CliError(
        `${err.message}\nTell persistent-ips which cluster to use: --kubeconfig PATH, or set KUBECONFIG, or run it inside a cluster.` +
          `\nFor a local cluster to try it on: npm run cluster:up -- --dir /tmp/pips (then --kubeconfig /tmp/pips/kubeconfig).`,
        EXIT.noKubeconfig,
        { cause: err },
      );
    }
    throw err;
  }
  const metrics = createMetrics();
  const client = KubeClient.fromKubeConfig(loaded.connection, {
    logger: log,
    rateLimit: { qps: options.qps, burst: options.burst },
    onRequest: (verb, resource, code) => metrics.apiRequests.inc({ verb, resource, code }),
  });
  log.info({ kubeconfig: loaded.location, source: loaded.source, server: loaded.server, context: loaded.context }, 'using cluster');
  return { loaded, client, metrics };
}

/** How long start-up waits for an API server that does not answer before giving up, and how often it asks. */
const CLUSTER_WAIT_MS = 30_000;
const CLUSTER_RETRY_MS = 1_000;

async function checkCluster(client: KubeClient, server: string, log: Logger): Promise<void> {
  let lastError: unknown;
  const deadline = Date.now() + CLUSTER_WAIT_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      const version = await client.version(AbortSignal.timeout(10_000));
      log.info({ kubernetes: version.gitVersion }, 'connected to the API server');
      return;
    } catch (err) {
      if (isUnauthorized(err)) {
        throw new CliError(`the API server at ${server} rejected our credentials (401). Check the kubeconfig's user or token.`, EXIT.notAuthorized, {
          cause: err,
        });
      }
      lastError = err;
      // Asked every second, so that a restart during an API server outage connects as soon as it is back; said
      // once, then every tenth time.
      if (attempt % 10 === 1) log.warn({ err, attempt }, 'API server not reachable yet');
      if (Date.now() + CLUSTER_RETRY_MS > deadline) break;
      await new Promise((r) => setTimeout(r, CLUSTER_RETRY_MS));
    }
  }
  throw new CliError(
    `${new ClusterUnreachableError(server, { cause: lastError }).message.replace(/\s*\n\s*/g, ' ')} (is the cluster running, and is this the right kubeconfig/context?)`,
    EXIT.clusterUnreachable,
    { cause: lastError },
  );
}

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

/** Runs until SIGINT/SIGTERM; resolves with the exit code. */
export async function run(options: RunOptions): Promise<number> {
  const log = createLogger(options.logLevel as Parameters<typeof createLogger>[0]);
  const gateOverride = (() => {
    try {
      return parseFeatureGatesFlag(options.featureGates);
    } catch (err) {
      throw new CliError((err as Error).message, EXIT.usage);
    }
  })();
  const metricsAddr = parseBindAddress(options.metricsBindAddress);
  const probeAddr = parseBindAddress(options.healthProbeBindAddress);
  const { loaded, client, metrics } = connect(options, log);
  await checkCluster(client, loaded.server, log);

  const sources = createSources(client, { logger: log, ...(options.namespace ? { namespace: options.namespace } : {}) });
  const controller = createController({
    client,
    sources,
    gateOverride,
    log,
    metrics,
    concurrency: options.concurrency,
    resyncIntervalMs: options.resyncPeriod * 1000,
  });
  const allocator =
    options.allocator === false
      ? undefined
      : createAllocator({
          client,
          sources,
          ...(options.namespace ? { namespace: options.namespace } : {}),
          log,
          metrics,
          resyncIntervalMs: options.resyncPeriod * 1000,
        });

  const servers: TelemetryServer[] = [];
  let probesServer: TelemetryServer | undefined;
  if (probeAddr) {
    probesServer = createTelemetryServer({ logger: log, port: probeAddr.port, host: probeAddr.host, health: true });
    probesServer.addReadinessCheck('informers-synced', () => sources.all.every((i) => i.hasSynced));
    servers.push(probesServer);
  }
  let metricsCertificates: CertificateSource | undefined;
  if (metricsAddr) {
    const secure = options.metricsSecure !== false;
    const metricsServer = createTelemetryServer({
      logger: log,
      port: metricsAddr.port,
      host: metricsAddr.host,
      registry: metrics.registry,
      health: false,
      ...(secure
        ? { tls: tlsProfile(options.tlsMinVersion, options.tlsCipherSuites), authorize: createMetricsAuthorizer({ reviews: kubeReviewClient(client) }) }
        : {}),
    });
    if (secure) metricsCertificates = await metricsCertificate(options, metricsServer, log);
    servers.push(metricsServer);
  }
  for (const server of servers) {
    const addr = await listenOrExplain(
      server.listen(),
      server === probesServer ? 'health-probe' : 'metrics',
      server === probesServer ? options.healthProbeBindAddress : options.metricsBindAddress,
    );
    log.info({ address: `${addr.address}:${addr.port}` }, 'serving');
  }

  const ownNamespace = options.controllerNamespace ?? process.env.POD_NAMESPACE ?? 'persistent-ips-system';
  const webhook = await startWebhook(options, {
    client,
    sources,
    gateEnabled: () => controller.gate().enabled,
    log,
    metrics,
    namespace: ownNamespace,
    ...(allocator ? { podAddresses: allocator.podAddresses } : {}),
  });
  if (webhook && probesServer) probesServer.addReadinessCheck('webhook-certificate', () => webhook.server.hasCertificate());

  sources.start();
  const stopping = new AbortController();
  let exitCode: number = EXIT.ok;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping.signal.aborted) {
      log.warn({ signal }, 'second signal: exiting at once');
      process.exit(EXIT.failure);
    }
    log.info({ signal }, 'shutting down');
    stopping.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  await Promise.race([sources.synced(), new Promise((r) => stopping.signal.addEventListener('abort', r, { once: true }))]);
  if (!stopping.signal.aborted) {
    const gate = controller.gate();
    log.info({ gate }, 'caches synced');
    log.info({ featureGate: FEATURE_GATE, enabled: gate.enabled, source: gate.source }, `feature gate ${FEATURE_GATE} is ${describeGate(gate)}`);
  }
  // Start-up runs with V8's defaults, the steady state sized for memory (v8-sizing.ts says why).
  const stopSizing = stopping.signal.aborted
    ? () => undefined
    : whenSteady({
        // A key waiting out its backoff counts: a cold start whose last keys are retrying is not over.
        queuesIdle: () => controller.queue.idle() && (allocator?.queue.idle() ?? true),
        onSteady: () => {
          if (sizeV8ForMemory()) log.debug('start-up done: V8 now sized for memory (--optimize-for-size)');
        },
      });

  const drainMs = options.gracefulShutdownTimeout * 1000;
  // The allocator serves its own queue under the same leadership as the controller.
  const lead = async (signal: AbortSignal): Promise<void> => {
    await Promise.all([controller.lead(signal, drainMs), allocator?.lead(signal, drainMs)]);
  };
  if (!stopping.signal.aborted) {
    if (options.leaderElect) {
      // In a pod (POD_NAME from the downward API) the identity is the pod's: a container restarted in the same pod
      // (after its leader lost the Lease in an API server outage, say) finds itself the holder and leads again at
      // once, instead of waiting out the dead process's lease. Two processes never share a pod name at the same
      // time. Elsewhere, the host name plus a random part keeps processes on one host apart.
      const identity = process.env.POD_NAME || `${hostname()}_${randomBytes(4).toString('hex')}`;
      const lease = { namespace: ownNamespace, name: 'persistent-ips-leader' };
      const elector = createLeaderElector({
        lease,
        identity,
        logger: log,
        isLeaderGauge: metrics.isLeader,
        client: kubeLeaseClient(client, lease),
        callbacks: {
          onStartedLeading: (signal) => lead(signal),
          onStoppedLeading: () => {
            if (!stopping.signal.aborted) {
              // As in controller-runtime: a replica that lost its lease exits, so nothing it had in flight writes
              // on; the Deployment restarts it as a standby.
              log.error('lost the leader lease; exiting');
              exitCode = EXIT.failure;
              stopping.abort();
            }
          },
        },
      });
      const running = elector.run();
      await new Promise((r) => stopping.signal.addEventListener('abort', r, { once: true }));
      await elector.stop();
      await running;
    } else {
      await lead(stopping.signal);
    }
  }

  stopSizing();
  await sources.stop();
  await allocator?.stop();
  controller.dispose();
  if (webhook) {
    await webhook.certificates.stop();
    await webhook.server.close();
  }
  await metricsCertificates?.stop();
  await Promise.all(servers.map((s) => s.close()));
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  log.info('stopped');
  return exitCode;
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
async function startWebhook(
  options: RunOptions,
  deps: {
    client: KubeClient;
    sources: ReturnType<typeof createSources>;
    gateEnabled: () => boolean;
    log: Logger;
    metrics: ReturnType<typeof createMetrics>;
    namespace: string;
    podAddresses?: PodAddressLookup;
  },
): Promise<{ server: WebhookServer; certificates: CertificateSource } | undefined> {
  const addr = parseBindAddress(options.webhookBindAddress);
  if (!addr) return undefined;
  const { client, sources, log } = deps;
  const webhookMetrics = createWebhookMetrics(deps.metrics.registry);
  // Denials are recorded on the VM by every replica that answers admissions, leader or not: a standby is exactly
  // where a VM waits for a claim nobody is creating yet, and its Events say so.
  const denialEvents = new EventRecorder((event) => client.createEvent(event).then(() => undefined), log.child({ component: 'webhook-events' }));
  // What it remembers of a VM goes with the VM (as the controller's recorder does).
  merge(sources.vms.events$, sources.vmis.events$).subscribe((e) => {
    if (e.type === 'delete' && e.object.metadata.uid) denialEvents.forget(e.object.metadata.uid);
  });
  const mutatePod = createPodAdmissionHandler({
    logger: log,
    gateEnabled: deps.gateEnabled,
    vmis: sources.vmis,
    nads: sources.nads,
    claims: sources.claims,
    claimEvents: sources.claims.events$,
    ...(options.defaultNetworkNad ? { clusterDefaultNetwork: options.defaultNetworkNad } : {}),
    reportDenials: (target, causes) => void denialEvents.report(target, causes),
    ...apiFetchers(client),
    metrics: webhookMetrics,
    synced: () => sources.all.every((i) => i.hasSynced),
    ...(options.namespace ? { watchNamespace: options.namespace } : {}),
    ...(deps.podAddresses ? { podAddresses: deps.podAddresses } : {}),
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
    const names = { namespace: deps.namespace, secretName: DEFAULT_SECRET_NAME, webhookConfigurationName: options.webhookConfigurationName };
    certificates = createSelfManagedCertificates({
      client: kubeCertStoreClient(client, names),
      ...names,
      logger: log,
      onCertificate,
      policy: {
        dnsNames: serviceDnsNames(
          options.webhookServiceName,
          deps.namespace,
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
