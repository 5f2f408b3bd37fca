// `persistent-ips run`: the composition root of the controller process. Everything here is wiring and lifecycle;
// behaviour lives in the modules it composes.

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { createAllocator, type Allocator } from '../allocator/loop.ts';
import { registerNetworkMetrics } from '../allocator/network-metrics.ts';
import { createController, type Controller } from '../controller/controller.ts';
import { FEATURE_GATE } from '../claims/constants.ts';
import { describeGate, parseFeatureGatesFlag } from '../controller/feature-gate.ts';
import { KubeClient } from '../kube/client.ts';
import { ClusterUnreachableError, type LoadedKubeConfig } from '../kube/load-kubeconfig.ts';
import { isUnauthorized } from '../kube/errors.ts';
import { createLeaderElector } from '../leader/elector.ts';
import { kubeLeaseClient } from '../leader/kube-lease-client.ts';
import { createSources } from '../sources/index.ts';
import { createLogger } from '../telemetry/logger.ts';
import { createMetrics } from '../telemetry/metrics.ts';
import type { RunOptions } from './run-flags.ts';
import { CliError, EXIT } from './exit-codes.ts';
import { loadKubeConfigOrExplain } from './kubeconfig.ts';
import { type Process, startTelemetry, startWebhook } from './run-servers.ts';
import { sizeV8ForMemory, whenSteady } from './v8-sizing.ts';

function connect(options: RunOptions, log: Logger): { loaded: LoadedKubeConfig; client: KubeClient; metrics: ReturnType<typeof createMetrics> } {
  const loaded = loadKubeConfigOrExplain(
    options,
    'Tell persistent-ips which cluster to use: --kubeconfig PATH, or set KUBECONFIG, or run it inside a cluster.' +
      '\nFor a local cluster to try it on: npm run cluster:up -- --dir /tmp/pips (then --kubeconfig /tmp/pips/kubeconfig).',
  );
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

/** Runs until SIGINT/SIGTERM; resolves with the exit code. */
export async function run(options: RunOptions): Promise<number> {
  const log = createLogger(options.logLevel as Parameters<typeof createLogger>[0]);
  // Checked with the other flags (run-flags.ts): it parses.
  const gateOverride = parseFeatureGatesFlag(options.featureGates);
  const { loaded, client, metrics } = connect(options, log);
  await checkCluster(client, loaded.server, log);

  const sources = createSources(client, { logger: log, ...(options.namespace ? { namespace: options.namespace } : {}) });
  const networkMetrics = registerNetworkMetrics(metrics.registry, { nads: () => sources.nads.list(), claims: () => sources.claims.list() }, log);
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
  const namespace = options.controllerNamespace ?? process.env.POD_NAMESPACE ?? 'persistent-ips-system';
  const started: Process = { options, client, sources, log, metrics, namespace };
  const telemetry = await startTelemetry(started);
  const webhook = await startWebhook(started, () => controller.gate().enabled, allocator?.podAddresses);
  if (webhook && telemetry.probes) telemetry.probes.addReadinessCheck('webhook-certificate', () => webhook.server.hasCertificate());

  sources.start();
  const stopping = new AbortController();
  const offSignals = onStopSignals(stopping, log);
  await Promise.race([sources.synced(), aborted(stopping.signal)]);
  let stopSizing: () => void = () => undefined;
  let exitCode: number = EXIT.ok;
  if (!stopping.signal.aborted) {
    const gate = controller.gate();
    log.info({ gate }, 'caches synced');
    networkMetrics.start();
    log.info({ featureGate: FEATURE_GATE, enabled: gate.enabled, source: gate.source }, `feature gate ${FEATURE_GATE} is ${describeGate(gate)}`);
    // Start-up runs with V8's defaults, the steady state sized for memory (v8-sizing.ts says why).
    stopSizing = whenSteady({
      // A key waiting out its backoff counts: a cold start whose last keys are retrying is not over.
      queuesIdle: () => controller.queue.idle() && (allocator?.queue.idle() ?? true),
      onSteady: () => {
        if (sizeV8ForMemory()) log.debug('start-up done: V8 now sized for memory (--optimize-for-size)');
      },
    });
    exitCode = await leadUntilStopped(started, { controller, allocator, stopping });
  }

  stopSizing();
  networkMetrics.stop();
  await sources.stop();
  await allocator?.stop();
  controller.dispose();
  if (webhook) {
    await webhook.certificates.stop();
    await webhook.server.close();
  }
  await telemetry.metricsCertificates?.stop();
  await Promise.all(telemetry.servers.map((s) => s.close()));
  offSignals();
  log.info('stopped');
  return exitCode;
}

const aborted = (signal: AbortSignal) => new Promise((r) => signal.addEventListener('abort', r, { once: true }));

/** SIGINT or SIGTERM aborts `stopping`; a second one exits at once. Returns what removes the handlers. */
function onStopSignals(stopping: AbortController, log: Logger): () => void {
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
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

/**
 * Serves the controller's and the allocator's queues, under one leadership (a Lease with --leader-elect), until
 * `stopping` aborts. Resolves with the exit code: a failure when the lease was lost.
 */
async function leadUntilStopped(
  { options, client, log, metrics, namespace }: Process,
  { controller, allocator, stopping }: { controller: Controller; allocator: Allocator | undefined; stopping: AbortController },
): Promise<number> {
  const drainMs = options.gracefulShutdownTimeout * 1000;
  // The allocator serves its own queue under the same leadership as the controller.
  const lead = async (signal: AbortSignal): Promise<void> => {
    await Promise.all([controller.lead(signal, drainMs), allocator?.lead(signal, drainMs)]);
  };
  if (!options.leaderElect) {
    await lead(stopping.signal);
    return EXIT.ok;
  }
  // In a pod (POD_NAME from the downward API) the identity is the pod's: a container restarted in the same pod
  // (after its leader lost the Lease in an API server outage, say) finds itself the holder and leads again at
  // once, instead of waiting out the dead process's lease. Two processes never share a pod name at the same
  // time. Elsewhere, the host name plus a random part keeps processes on one host apart.
  const identity = process.env.POD_NAME || `${hostname()}_${randomBytes(4).toString('hex')}`;
  const lease = { namespace, name: 'persistent-ips-leader' };
  let exitCode: number = EXIT.ok;
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
  await aborted(stopping.signal);
  await elector.stop();
  await running;
  return exitCode;
}
