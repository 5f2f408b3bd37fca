// Kubeconfig files read into plain data, without @kubernetes/client-node: importing that library costs tens of MiB
// of resident memory and start-up time (it loads the whole generated API; docs/architecture.md has the measurement),
// while the connection of a controller needs a server URL, TLS material and a token. Only a user with an exec or auth-provider plugin (or a
// cluster behind a proxy-url) is handed to the library, loaded on demand by the transport.

import { isAbsolute, join } from 'node:path';
import { load as loadYaml } from 'js-yaml';

export interface ClusterEntry {
  name: string;
  server: string;
  caFile?: string;
  /** base64, as in the file */
  caData?: string;
  skipTLSVerify?: boolean;
  tlsServerName?: string;
  proxyUrl?: string;
}

export interface UserEntry {
  name: string;
  token?: string;
  tokenFile?: string;
  certFile?: string;
  certData?: string;
  keyFile?: string;
  keyData?: string;
  username?: string;
  password?: string;
  /** `as`: impersonate this user */
  impersonateUser?: string;
  /** Credential plugins: kept as written, interpreted by @kubernetes/client-node. */
  exec?: Record<string, unknown>;
  authProvider?: { name?: string; config?: Record<string, unknown> };
}

export interface ContextEntry {
  name: string;
  cluster: string;
  user: string;
  namespace?: string;
}

export interface KubeConfigData {
  clusters: ClusterEntry[];
  users: UserEntry[];
  contexts: ContextEntry[];
  currentContext: string;
}

/** The cluster, user and context one connection uses. */
export interface ConnectionConfig {
  cluster: ClusterEntry;
  user: UserEntry;
  context: ContextEntry;
}

type Raw = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const obj = (v: unknown): Raw | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Raw) : undefined);

/** kubectl resolves relative file references against the directory of the file that holds them. */
function resolvePath(file: string | undefined, base: string): string | undefined {
  if (file === undefined) return undefined;
  return isAbsolute(file) ? file : join(base, file);
}

function named(list: unknown, what: string, source: string): { name: string; body: Raw }[] {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw new Error(`${source}: ${what} is not a list`);
  return list.map((e, i) => {
    const entry = obj(e);
    const name = str(entry?.name);
    if (!entry || !name) throw new Error(`${source}: ${what}[${i}].name is missing`);
    const key = what.slice(0, -1); // clusters[].cluster, users[].user, contexts[].context
    const body = obj(entry[key]);
    if (!body && key !== 'user') throw new Error(`${source}: ${what}[${i}].${key} is missing`);
    return { name, body: body ?? {} };
  });
}

/** Parses one kubeconfig document; relative paths are resolved against `baseDir`. */
export function parseKubeConfig(text: string, source: string, baseDir: string): KubeConfigData {
  const doc = text.trim() === '' ? undefined : loadYaml(text);
  const root = doc === undefined || doc === null ? {} : obj(doc);
  if (!root) throw new Error(`${source}: not a kubeconfig (expected a mapping)`);
  const clusters = named(root.clusters, 'clusters', source).map(({ name, body }, i): ClusterEntry => {
    const server = str(body.server);
    if (!server) throw new Error(`${source}: clusters[${i}].cluster.server is missing`);
    return prune({
      name,
      server,
      caFile: resolvePath(str(body['certificate-authority']), baseDir),
      caData: str(body['certificate-authority-data']),
      skipTLSVerify: body['insecure-skip-tls-verify'] === true ? true : undefined,
      tlsServerName: str(body['tls-server-name']),
      proxyUrl: str(body['proxy-url']),
    });
  });
  const users = named(root.users, 'users', source).map(
    ({ name, body }): UserEntry =>
      prune({
        name,
        token: str(body.token),
        tokenFile: resolvePath(str(body.tokenFile) ?? str(body['token-file']), baseDir),
        certFile: resolvePath(str(body['client-certificate']), baseDir),
        certData: str(body['client-certificate-data']),
        keyFile: resolvePath(str(body['client-key']), baseDir),
        keyData: str(body['client-key-data']),
        username: str(body.username),
        password: str(body.password),
        impersonateUser: str(body.as),
        exec: obj(body.exec),
        authProvider: obj(body['auth-provider']) as UserEntry['authProvider'],
      }),
  );
  const contexts = named(root.contexts, 'contexts', source).map(({ name, body }, i): ContextEntry => {
    const cluster = str(body.cluster);
    if (!cluster) throw new Error(`${source}: contexts[${i}].context.cluster is missing`);
    return prune({ name, cluster, user: str(body.user) ?? '', namespace: str(body.namespace) });
  });
  return { clusters, users, contexts, currentContext: str(root['current-context']) ?? '' };
}

/**
 * Merges several files as kubectl does for $KUBECONFIG: the first file that defines a name wins, and the first
 * non-empty current-context wins.
 */
export function mergeKubeConfigs(configs: KubeConfigData[]): KubeConfigData {
  const out: KubeConfigData = { clusters: [], users: [], contexts: [], currentContext: '' };
  for (const c of configs) {
    for (const key of ['clusters', 'users', 'contexts'] as const) {
      const have = new Set(out[key].map((e) => e.name));
      for (const e of c[key]) if (!have.has(e.name)) (out[key] as { name: string }[]).push(e);
    }
    if (!out.currentContext) out.currentContext = c.currentContext;
  }
  return out;
}

/** The connection of one context (default: the current one); undefined when the context does not exist. */
export function connectionFor(config: KubeConfigData, contextName: string = config.currentContext): ConnectionConfig | { error: string } {
  const context = config.contexts.find((c) => c.name === contextName);
  if (!context) return { error: contextName ? `context ${contextName} not found` : 'no current-context' };
  const cluster = config.clusters.find((c) => c.name === context.cluster);
  if (!cluster) return { error: `context ${contextName} has no cluster with a server URL` };
  // A context without a user (or naming a missing one) connects anonymously, as kubectl does.
  const user = config.users.find((u) => u.name === context.user) ?? { name: context.user };
  return { cluster, user, context };
}

/** True when the user's credentials come from a plugin that only @kubernetes/client-node implements. */
export function needsClientNode(conn: ConnectionConfig): boolean {
  return conn.user.exec !== undefined || conn.user.authProvider !== undefined || conn.cluster.proxyUrl !== undefined;
}

function prune<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}
