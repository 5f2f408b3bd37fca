// The flags of `run`: the table yargs reads for help, errors and parsing (parser.ts), the rules every set of them
// must keep, and what `run` gets from them.

import type { InferredOptionTypes, Options } from 'yargs';
import { isDns1123Label, isDns1123Subdomain, parseNadReference } from '../claims/index.ts';
import { parseFeatureGatesFlag } from '../controller/feature-gate.ts';
import { splitSuites, tlsProfile } from '../telemetry/tls-profile.ts';
import { defaultBindAddress, parseBindAddress } from './addresses.ts';

/** A flag's value is wrong: thrown by the checks, reported as a usage error. */
export class BadValue extends Error {}

/**
 * "namespace/name" of a NAD (--default-network-nad) → its parts; undefined when it is not that, or when either part is
 * not a valid object name (a namespace is a DNS label, a NAD name a DNS subdomain).
 */
export function defaultNetworkNad(value: string): { namespace: string; name: string } | undefined {
  const ref = parseNadReference(value);
  return ref && isDns1123Label(ref.namespace) && isDns1123Subdomain(ref.name) ? ref : undefined;
}

export function bad(condition: boolean, message: string): void {
  if (condition) throw new BadValue(message);
}

/** Options that take exactly one value: given twice, yargs makes an array of them. */
export function rejectRepeats(argv: Record<string, unknown>, singles: readonly string[]): void {
  for (const name of singles) bad(Array.isArray(argv[name]), `--${name} given more than once`);
}

/** What `parse` throws, as a BadValue whose message starts with `prefix`. */
function asBadValue(parse: () => unknown, prefix = ''): void {
  try {
    parse();
  } catch (err) {
    throw new BadValue(prefix + (err as Error).message);
  }
}

const positive = (n: number) => Number.isFinite(n) && n > 0;

/** The flags of `run`, in the order of `--help`; `env` decides the default bind addresses (in a pod or not). */
export function runFlags(env: NodeJS.ProcessEnv) {
  return {
    ...processFlags(),
    ...telemetryFlags(env),
    ...pacingFlags(),
    ...webhookFlags(env),
    ...tlsFlags(),
    'default-network-nad': {
      type: 'string',
      requiresArg: true,
      default: 'ovn-kubernetes/default',
      describe:
        'NAMESPACE/NAME of the cluster default network NAD, named in the v1.multus-cni.io/default-network element written for primary user-defined networks (OpenShift: openshift-ovn-kubernetes/default)',
    },
    'allocator': {
      type: 'boolean',
      default: true,
      describe: 'Allocate addresses for networks whose NAD sets persistent-ips.kubevirt.io/allocator: "true" (docs/allocator.md); --no-allocator turns it off',
    },
  } satisfies Record<string, Options>;
}

/** Which cluster, which namespace, how many workers, what the log says, whether replicas take turns. */
function processFlags() {
  return {
    'kubeconfig': {
      type: 'string',
      requiresArg: true,
      describe: 'Kubeconfig file. Default: in-cluster service account, then $KUBECONFIG, then ~/.kube/config',
    },
    'context': { type: 'string', requiresArg: true, describe: 'Kubeconfig context to use instead of the current one' },
    'namespace': { type: 'string', requiresArg: true, describe: 'Watch VMs, VMIs, NADs and claims in this namespace only. Default: all namespaces' },
    'concurrency': { type: 'number', requiresArg: true, default: 16, describe: 'VMs reconciled in parallel (one VM is never reconciled twice at once)' },
    'feature-gates': {
      type: 'string',
      requiresArg: true,
      describe: 'Override KubeVirt feature gates, e.g. PersistentIPs=true (for clusters where the KubeVirt CR cannot be read)',
    },
    'log-level': {
      type: 'string',
      requiresArg: true,
      default: 'info',
      choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
      describe: 'Least severe level written to the JSON log on stdout',
    },
    'leader-elect': { type: 'boolean', default: false, describe: 'Compete for a Lease so that only one replica reconciles (use with more than one replica)' },
    'controller-namespace': {
      type: 'string',
      requiresArg: true,
      describe:
        'Namespace of the Lease and the webhook certificate Secret. Default: $POD_NAMESPACE, then persistent-ips-system (never the kubeconfig context namespace)',
    },
  } satisfies Record<string, Options>;
}

/** The metrics and health-probe servers. */
function telemetryFlags(env: NodeJS.ProcessEnv) {
  return {
    'metrics-bind-address': {
      type: 'string',
      requiresArg: true,
      default: defaultBindAddress(8443, env),
      defaultDescription: '127.0.0.1:8443; :8443 in a pod',
      describe: 'Address of /metrics; 0 disables it',
    },
    'metrics-secure': {
      type: 'boolean',
      default: true,
      describe:
        'Serve /metrics over HTTPS and let only callers the cluster authorises (TokenReview + SubjectAccessReview on get /metrics) read it; --metrics-secure=false serves plain HTTP to anyone',
    },
    'metrics-cert-dir': {
      type: 'string',
      requiresArg: true,
      describe: 'tls.crt and tls.key of the secure metrics server (kept current). Default: a self-signed certificate made at start',
    },
    'health-probe-bind-address': {
      type: 'string',
      requiresArg: true,
      default: defaultBindAddress(8081, env),
      defaultDescription: '127.0.0.1:8081; :8081 in a pod',
      describe: 'Address of /healthz and /readyz; 0 disables them',
    },
  } satisfies Record<string, Options>;
}

/** How fast it may call the API server, how often it repasses everything, how long it drains. */
function pacingFlags() {
  return {
    'qps': { type: 'number', requiresArg: true, default: 200, describe: 'Client-side limit of API requests per second (like client-go QPS)' },
    'burst': { type: 'number', requiresArg: true, default: 400, describe: 'Client-side burst of API requests above --qps' },
    'resync-period': {
      type: 'number',
      requiresArg: true,
      default: 600,
      describe: 'Seconds between full passes over every VM (repairs anything missed; costs no writes in a steady state)',
    },
    'graceful-shutdown-timeout': { type: 'number', requiresArg: true, default: 30, describe: 'Seconds to let in-flight reconciles finish on shutdown' },
  } satisfies Record<string, Options>;
}

/** The launcher-pod webhook and its certificate. */
function webhookFlags(env: NodeJS.ProcessEnv) {
  return {
    'webhook-bind-address': {
      type: 'string',
      requiresArg: true,
      default: defaultBindAddress(9443, env),
      defaultDescription: '127.0.0.1:9443; :9443 in a pod',
      describe: 'Address of the launcher-pod admission webhook (HTTPS); 0 disables it',
    },
    'webhook-cert-provisioning': {
      type: 'string',
      requiresArg: true,
      default: 'self',
      choices: ['self', 'external'],
      describe: 'self: keep a CA and serving certificate in a Secret and the webhook caBundle; external: read --webhook-cert-dir (e.g. cert-manager)',
    },
    'webhook-cert-dir': {
      type: 'string',
      requiresArg: true,
      default: '/tmp/k8s-webhook-server/serving-certs',
      describe: 'tls.crt and tls.key, with --webhook-cert-provisioning=external',
    },
    'webhook-service-name': {
      type: 'string',
      requiresArg: true,
      default: 'persistent-ips-webhook',
      describe: 'Service in front of the webhook (names in the self-made certificate)',
    },
    'webhook-configuration-name': {
      type: 'string',
      requiresArg: true,
      default: 'persistent-ips-launcher-pods',
      describe: 'MutatingWebhookConfiguration whose caBundle the controller keeps',
    },
    'webhook-cert-host': {
      type: 'string',
      array: true,
      requiresArg: true,
      default: [] as string[],
      describe: 'Extra DNS name or IP in the self-made certificate (repeatable)',
    },
    'webhook-cert-validity': {
      type: 'number',
      requiresArg: true,
      describe: 'Seconds a self-made serving certificate is valid (default one year); rotated at 2/3',
    },
    'webhook-ca-validity': { type: 'number', requiresArg: true, describe: 'Seconds the self-made CA is valid (default five years)' },
  } satisfies Record<string, Options>;
}

/** The TLS of the webhook and of the secure metrics server. */
function tlsFlags() {
  return {
    'tls-min-version': {
      type: 'string',
      requiresArg: true,
      default: 'VersionTLS12',
      describe: 'Minimum TLS version of the webhook (and secure metrics) server: VersionTLS12 or VersionTLS13',
    },
    'tls-cipher-suites': {
      type: 'string',
      array: true,
      requiresArg: true,
      default: [] as string[],
      defaultDescription: 'TLS 1.3 suites, and for TLS 1.2 ECDHE with AES-GCM or ChaCha20-Poly1305 only',
      describe:
        'Comma-separated IANA cipher suite names, as for Kubernetes components (e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); TLS 1.3 suites stay on unless some are named',
    },
  } satisfies Record<string, Options>;
}

/** The parsed flags of `run`, by flag name: what yargs infers from the table. */
export type RunArgs = InferredOptionTypes<ReturnType<typeof runFlags>>;

/** Every rule a set of `run` flags must keep; throws BadValue with the one-line reason. */
export function checkRunArgs(a: RunArgs): void {
  // Every flag but the repeatable ones (`array`) takes exactly one value.
  const singles = Object.entries(runFlags({})).flatMap(([name, flag]) => ('array' in flag ? [] : [name]));
  rejectRepeats(a as unknown as Record<string, unknown>, singles);
  bad(!defaultNetworkNad(a['default-network-nad']), `--default-network-nad must be NAMESPACE/NAME (got "${a['default-network-nad']}")`);
  bad(a['metrics-cert-dir'] !== undefined && !a['metrics-secure'], '--metrics-cert-dir goes with --metrics-secure (the default), not --metrics-secure=false');
  asBadValue(() => tlsProfile(a['tls-min-version'], splitSuites(a['tls-cipher-suites'].map(String))));
  for (const name of [
    'kubeconfig',
    'context',
    'namespace',
    'controller-namespace',
    'webhook-cert-dir',
    'webhook-service-name',
    'webhook-configuration-name',
    'metrics-cert-dir',
  ] as const) {
    bad(a[name] === '', `--${name} must not be empty`);
  }
  bad(!(Number.isInteger(a.concurrency) && a.concurrency >= 1), `--concurrency must be a whole number of at least 1 (got ${a.concurrency})`);
  bad(!positive(a.qps), `--qps must be a positive number (got ${a.qps})`);
  bad(!(Number.isInteger(a.burst) && a.burst >= 1), `--burst must be a whole number of at least 1 (got ${a.burst})`);
  bad(!positive(a['resync-period']), `--resync-period must be a positive number of seconds (got ${a['resync-period']})`);
  bad(
    !(Number.isFinite(a['graceful-shutdown-timeout']) && a['graceful-shutdown-timeout'] >= 0),
    `--graceful-shutdown-timeout must be 0 or more seconds (got ${a['graceful-shutdown-timeout']})`,
  );
  for (const name of ['webhook-cert-validity', 'webhook-ca-validity'] as const) {
    if (a[name] !== undefined) bad(!positive(a[name]), `--${name} must be a positive number of seconds (got ${a[name]})`);
  }
  for (const name of ['metrics-bind-address', 'health-probe-bind-address', 'webhook-bind-address'] as const) {
    asBadValue(() => parseBindAddress(a[name]), `--${name}: `);
  }
  asBadValue(() => parseFeatureGatesFlag(a['feature-gates']));
  for (const host of a['webhook-cert-host']) bad(String(host).trim() === '', '--webhook-cert-host must not be empty');
}

/** `webhook-cert-dir` → `webhookCertDir`. */
type Camel<S extends string> = S extends `${infer H}-${infer T}` ? `${H}${Capitalize<Camel<T>>}` : S;

/** The flags `names` of parsed `argv`, named in camelCase; a flag without a value is left out. */
export function camelOptions<A, N extends keyof A & string>(argv: A, names: readonly N[]): { [K in N as Camel<K>]: A[K] } {
  const given = names.filter((name) => argv[name] !== undefined);
  return Object.fromEntries(given.map((name) => [name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase()), argv[name]])) as never;
}

/** The options `run` gets from checked flags: every flag in camelCase, and the values it parses. */
export function toRunOptions(a: RunArgs) {
  const { featureGates, webhookCertHost, ...options } = camelOptions(a, Object.keys(runFlags({})) as (keyof RunArgs & string)[]);
  return {
    ...options,
    ...(featureGates ? { featureGates } : {}),
    /** `self`: the controller keeps its own CA and serving certificate in a Secret; `external`: files (cert-manager). */
    webhookCertProvisioning: a['webhook-cert-provisioning'] as 'self' | 'external',
    webhookCertHosts: webhookCertHost.map(String),
    defaultNetworkNad: defaultNetworkNad(a['default-network-nad'])!,
    tlsCipherSuites: splitSuites(a['tls-cipher-suites'].map(String)),
  };
}

/** What `run` is told; run.ts and run-servers.ts share it without importing each other. */
export type RunOptions = ReturnType<typeof toRunOptions>;
