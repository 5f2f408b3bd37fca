// Which cluster to talk to, as kubectl finds it: --kubeconfig, the in-cluster ServiceAccount, $KUBECONFIG, then
// ~/.kube/config; the chosen context's connection, or a KubeConfigError that lists every place tried.

import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { type ConnectionConfig, type KubeConfigData, connectionFor, mergeKubeConfigs, parseKubeConfig } from './kubeconfig.ts';

export type KubeConfigSource = 'explicit' | 'in-cluster' | 'KUBECONFIG' | 'home';

export interface LoadedKubeConfig {
  /** The cluster, user and context to connect with. */
  connection: ConnectionConfig;
  /** Which rule found the configuration. */
  source: KubeConfigSource;
  /** The file(s) read, or the service-account directory for in-cluster. */
  location: string;
  server: string;
  context: string;
  /** The current context's namespace (in-cluster: the pod's namespace), if any. */
  namespace: string | undefined;
}

/** No usable configuration was found, or the one found cannot be used. */
export class KubeConfigError extends Error {
  override readonly name: string = 'KubeConfigError';
  /** Every place that was looked at, in order. */
  readonly tried: string[];
  constructor(message: string, tried: string[], options?: { cause?: unknown }) {
    super(message, options);
    this.tried = tried;
  }
}

/** The API server did not answer at all (as opposed to answering with an error). */
export class ClusterUnreachableError extends Error {
  override readonly name: string = 'ClusterUnreachableError';
  readonly server: string;
  constructor(server: string, options?: { cause?: unknown }) {
    const why = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(`cannot reach the Kubernetes API server at ${server}${why}`, options);
    this.server = server;
  }
}

export interface LoadKubeConfigOptions {
  /** An explicit kubeconfig file; when given, nothing else is tried. */
  path?: string;
  /** Use this context instead of the file's current-context. */
  context?: string;
  /** Injected for tests; default process.env. */
  env?: Record<string, string | undefined>;
  /** Injected for tests; default os.homedir(). */
  homeDir?: string;
  /** Injected for tests: prefix of /var/run/secrets/kubernetes.io/serviceaccount. */
  serviceAccountRoot?: string;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * Finds a kubeconfig in this order: explicit path → in-cluster service account → $KUBECONFIG → ~/.kube/config,
 * and reports which one was used.
 */
export function loadKubeConfig(options: LoadKubeConfigOptions = {}): LoadedKubeConfig {
  const env = options.env ?? process.env;
  const tried: string[] = [];

  const fromFiles = (files: string[], source: KubeConfigSource): LoadedKubeConfig => {
    let config: KubeConfigData;
    try {
      config = mergeKubeConfigs(files.map((f) => parseKubeConfig(readFileSync(f, 'utf8'), f, dirname(f))));
    } catch (err) {
      throw new KubeConfigError(`cannot read kubeconfig ${files.join(delimiter)}: ${(err as Error).message}`, tried, { cause: err });
    }
    return finish(config, source, files.join(delimiter), options.context, tried);
  };

  if (options.path !== undefined) {
    tried.push(`explicit path ${options.path}`);
    if (!existsSync(options.path)) throw new KubeConfigError(`kubeconfig ${options.path} does not exist`, tried);
    return fromFiles([options.path], 'explicit');
  }

  const saRoot = `${options.serviceAccountRoot ?? ''}${SERVICE_ACCOUNT_DIR}`;
  tried.push(`in-cluster (KUBERNETES_SERVICE_HOST/PORT and ${saRoot}/token)`);
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host && port && existsSync(`${saRoot}/token`)) {
    // What client-go's in-cluster config does, from the injected env rather than process.env. The token file is
    // read again once a minute by the transport, so projected-token rotation is honoured.
    const namespaceFile = `${saRoot}/namespace`;
    const namespace = existsSync(namespaceFile) ? readFileSync(namespaceFile, 'utf8').trim() : undefined;
    const config: KubeConfigData = {
      clusters: [{ name: 'inCluster', server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`, caFile: `${saRoot}/ca.crt` }],
      users: [{ name: 'inClusterUser', tokenFile: `${saRoot}/token` }],
      contexts: [{ name: 'inClusterContext', cluster: 'inCluster', user: 'inClusterUser', ...(namespace ? { namespace } : {}) }],
      currentContext: 'inClusterContext',
    };
    return finish(config, 'in-cluster', saRoot, options.context, tried);
  }

  const kubeconfigEnv = env.KUBECONFIG;
  tried.push(`$KUBECONFIG${kubeconfigEnv ? ` (${kubeconfigEnv})` : ' (unset)'}`);
  if (kubeconfigEnv) {
    const files = kubeconfigEnv.split(delimiter).filter((f) => f !== '');
    const present = files.filter((f) => existsSync(f));
    if (present.length > 0) return fromFiles(present, 'KUBECONFIG');
  }

  const home = options.homeDir ?? homedir();
  const homeConfig = join(home, '.kube', 'config');
  tried.push(homeConfig);
  if (existsSync(homeConfig)) return fromFiles([homeConfig], 'home');

  throw new KubeConfigError(`no Kubernetes configuration found; tried: ${tried.join('; ')}`, tried);
}

function finish(config: KubeConfigData, source: KubeConfigSource, location: string, context: string | undefined, tried: string[]): LoadedKubeConfig {
  const name = context ?? config.currentContext;
  if (context !== undefined && !config.contexts.some((c) => c.name === context))
    throw new KubeConfigError(`context ${context} not found in ${location}`, tried);
  const conn = connectionFor(config, name);
  if ('error' in conn) {
    throw new KubeConfigError(`kubeconfig ${location}: context ${name || '(none)'} has no cluster with a server URL (${conn.error})`, tried);
  }
  return {
    connection: conn,
    source,
    location,
    server: conn.cluster.server,
    context: name,
    namespace: conn.context.namespace,
  };
}
