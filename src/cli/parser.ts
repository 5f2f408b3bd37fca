// The command line, parsed strictly: an unknown flag, a stray argument, a repeated single-valued flag or a value out
// of range is a usage error (exit 2, one line and the command's usage), never something to warn about and run anyway.
// Parsing does no I/O and runs nothing, so every rule here is unit-tested; main.ts runs what it returns.

import yargs, { type Argv } from 'yargs';
import { parseFeatureGatesFlag } from '../controller/feature-gate.ts';
import { splitSuites, tlsProfile } from '../webhook/tls-profile.ts';
import { defaultBindAddress, parseBindAddress } from './addresses.ts';
import { CliError, EXIT } from './exit-codes.ts';
import type { RunOptions } from './run.ts';
import type { StatusOptions } from './status.ts';

export const EPILOG = `Exit codes: 0 ok, 1 failure, 2 bad flags, 3 no kubeconfig found, 4 cluster unreachable, 5 credentials rejected.

The PersistentIPs feature gate: --feature-gates wins when it names the gate; otherwise the KubeVirt CR's
spec.configuration.developerConfiguration.featureGates decides, live; with neither, the gate is off.`;

export type ParsedCommand =
  | { command: 'run'; options: RunOptions }
  | { command: 'status'; options: StatusOptions }
  /** --help or --version: already printed. */
  | { command: 'none' };

/** Bad flags: the one-line reason, and the usage of the command they were given to. */
export class UsageError extends CliError {
  readonly usage: string;
  constructor(message: string, usage: string) {
    super(message, EXIT.usage);
    this.usage = usage;
  }
}

/** A flag's value is wrong: thrown from .check(), reported as a usage error. */
class BadValue extends Error {}

/** "namespace/name" of a NAD (--default-network-nad) → its parts; undefined when it is not that. */
export function parseNadReference(value: string): { namespace: string; name: string } | undefined {
  const match = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(value);
  return match ? { namespace: match[1]!, name: match[3]! } : undefined;
}

function bad(condition: boolean, message: string): void {
  if (condition) throw new BadValue(message);
}

/** Options that take exactly one value: given twice, yargs makes an array of them. */
function rejectRepeats(argv: Record<string, unknown>, singles: readonly string[]): void {
  for (const name of singles) bad(Array.isArray(argv[name]), `--${name} given more than once`);
}

const positive = (n: number) => Number.isFinite(n) && n > 0;

function runBuilder(y: Argv, env: NodeJS.ProcessEnv) {
  return y
    .option('kubeconfig', { type: 'string', requiresArg: true, describe: 'Kubeconfig file. Default: in-cluster service account, then $KUBECONFIG, then ~/.kube/config' })
    .option('context', { type: 'string', requiresArg: true, describe: 'Kubeconfig context to use instead of the current one' })
    .option('namespace', { type: 'string', requiresArg: true, describe: 'Watch VMs, VMIs, NADs and claims in this namespace only. Default: all namespaces' })
    .option('concurrency', { type: 'number', requiresArg: true, default: 16, describe: 'VMs reconciled in parallel (one VM is never reconciled twice at once)' })
    .option('feature-gates', { type: 'string', requiresArg: true, describe: 'Override KubeVirt feature gates, e.g. PersistentIPs=true (for clusters where the KubeVirt CR cannot be read)' })
    .option('log-level', { type: 'string', requiresArg: true, default: 'info', choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], describe: 'Least severe level written to the JSON log on stdout' })
    .option('leader-elect', { type: 'boolean', default: false, describe: 'Compete for a Lease so that only one replica reconciles (use with more than one replica)' })
    .option('controller-namespace', { type: 'string', requiresArg: true, describe: 'Namespace of the Lease and the webhook certificate Secret. Default: $POD_NAMESPACE, then persistent-ips-system (never the kubeconfig context namespace)' })
    .option('metrics-bind-address', { type: 'string', requiresArg: true, default: defaultBindAddress(8443, env), defaultDescription: '127.0.0.1:8443; :8443 in a pod', describe: 'Address of /metrics; 0 disables it' })
    .option('metrics-secure', { type: 'boolean', default: true, describe: 'Serve /metrics over HTTPS and let only callers the cluster authorises (TokenReview + SubjectAccessReview on get /metrics) read it; --metrics-secure=false serves plain HTTP to anyone' })
    .option('metrics-cert-dir', { type: 'string', requiresArg: true, describe: 'tls.crt and tls.key of the secure metrics server (kept current). Default: a self-signed certificate made at start' })
    .option('health-probe-bind-address', { type: 'string', requiresArg: true, default: defaultBindAddress(8081, env), defaultDescription: '127.0.0.1:8081; :8081 in a pod', describe: 'Address of /healthz and /readyz; 0 disables them' })
    .option('qps', { type: 'number', requiresArg: true, default: 200, describe: 'Client-side limit of API requests per second (like client-go QPS)' })
    .option('burst', { type: 'number', requiresArg: true, default: 400, describe: 'Client-side burst of API requests above --qps' })
    .option('resync-period', { type: 'number', requiresArg: true, default: 600, describe: 'Seconds between full passes over every VM (repairs anything missed; costs no writes in a steady state)' })
    .option('graceful-shutdown-timeout', { type: 'number', requiresArg: true, default: 30, describe: 'Seconds to let in-flight reconciles finish on shutdown' })
    .option('webhook-bind-address', { type: 'string', requiresArg: true, default: defaultBindAddress(9443, env), defaultDescription: '127.0.0.1:9443; :9443 in a pod', describe: 'Address of the launcher-pod admission webhook (HTTPS); 0 disables it' })
    .option('webhook-cert-provisioning', { type: 'string', requiresArg: true, default: 'self', choices: ['self', 'external'], describe: 'self: keep a CA and serving certificate in a Secret and the webhook caBundle; external: read --webhook-cert-dir (e.g. cert-manager)' })
    .option('webhook-cert-dir', { type: 'string', requiresArg: true, default: '/tmp/k8s-webhook-server/serving-certs', describe: 'tls.crt and tls.key, with --webhook-cert-provisioning=external' })
    .option('webhook-service-name', { type: 'string', requiresArg: true, default: 'persistent-ips-webhook', describe: 'Service in front of the webhook (names in the self-made certificate)' })
    .option('webhook-configuration-name', { type: 'string', requiresArg: true, default: 'persistent-ips-launcher-pods', describe: 'MutatingWebhookConfiguration whose caBundle the controller keeps' })
    .option('webhook-cert-host', { type: 'string', array: true, requiresArg: true, default: [] as string[], describe: 'Extra DNS name or IP in the self-made certificate (repeatable)' })
    .option('webhook-cert-validity', { type: 'number', requiresArg: true, describe: 'Seconds a self-made serving certificate is valid (default one year); rotated at 2/3' })
    .option('webhook-ca-validity', { type: 'number', requiresArg: true, describe: 'Seconds the self-made CA is valid (default five years)' })
    .option('tls-min-version', { type: 'string', requiresArg: true, default: 'VersionTLS12', describe: 'Minimum TLS version of the webhook (and secure metrics) server: VersionTLS12 or VersionTLS13' })
    .option('tls-cipher-suites', {
      type: 'string',
      array: true,
      requiresArg: true,
      default: [] as string[],
      defaultDescription: 'TLS 1.3 suites, and for TLS 1.2 ECDHE with AES-GCM or ChaCha20-Poly1305 only',
      describe: 'Comma-separated IANA cipher suite names, as for Kubernetes components (e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); TLS 1.3 suites stay on unless some are named',
    })
    .option('default-network-nad', { type: 'string', requiresArg: true, default: 'ovn-kubernetes/default', describe: 'NAMESPACE/NAME of the cluster default network NAD, named in the v1.multus-cni.io/default-network element written for primary user-defined networks (OpenShift: openshift-ovn-kubernetes/default)' })
    .option('allocator', { type: 'boolean', default: true, describe: 'Allocate addresses for networks whose NAD sets persistent-ips.kubevirt.io/allocator: "true" (docs/allocator.md); --no-allocator turns it off' })
    .check((a) => {
      rejectRepeats(a, [
        'kubeconfig', 'context', 'namespace', 'concurrency', 'feature-gates', 'log-level', 'leader-elect', 'controller-namespace', 'metrics-bind-address',
        'health-probe-bind-address', 'qps', 'burst', 'resync-period', 'graceful-shutdown-timeout', 'webhook-bind-address', 'webhook-cert-provisioning',
        'webhook-cert-dir', 'webhook-service-name', 'webhook-configuration-name', 'webhook-cert-validity', 'webhook-ca-validity', 'allocator',
        'tls-min-version', 'metrics-secure', 'metrics-cert-dir', 'default-network-nad',
      ]);
      bad(!parseNadReference(a['default-network-nad']), `--default-network-nad must be NAMESPACE/NAME (got "${a['default-network-nad']}")`);
      bad(a['metrics-cert-dir'] !== undefined && !a['metrics-secure'], '--metrics-cert-dir goes with --metrics-secure (the default), not --metrics-secure=false');
      try {
        tlsProfile(a['tls-min-version'], splitSuites(a['tls-cipher-suites'].map(String)));
      } catch (err) {
        throw new BadValue((err as Error).message);
      }
      for (const name of ['kubeconfig', 'context', 'namespace', 'controller-namespace', 'webhook-cert-dir', 'webhook-service-name', 'webhook-configuration-name', 'metrics-cert-dir'] as const) {
        bad(a[name] === '', `--${name} must not be empty`);
      }
      bad(!(Number.isInteger(a.concurrency) && a.concurrency >= 1), `--concurrency must be a whole number of at least 1 (got ${a.concurrency})`);
      bad(!positive(a.qps), `--qps must be a positive number (got ${a.qps})`);
      bad(!(Number.isInteger(a.burst) && a.burst >= 1), `--burst must be a whole number of at least 1 (got ${a.burst})`);
      bad(!positive(a['resync-period']), `--resync-period must be a positive number of seconds (got ${a['resync-period']})`);
      bad(!(Number.isFinite(a['graceful-shutdown-timeout']) && a['graceful-shutdown-timeout'] >= 0), `--graceful-shutdown-timeout must be 0 or more seconds (got ${a['graceful-shutdown-timeout']})`);
      for (const name of ['webhook-cert-validity', 'webhook-ca-validity'] as const) {
        if (a[name] !== undefined) bad(!positive(a[name]), `--${name} must be a positive number of seconds (got ${a[name]})`);
      }
      for (const name of ['metrics-bind-address', 'health-probe-bind-address', 'webhook-bind-address'] as const) {
        try {
          parseBindAddress(a[name]);
        } catch (err) {
          throw new BadValue(`--${name}: ${(err as Error).message}`);
        }
      }
      try {
        parseFeatureGatesFlag(a['feature-gates']);
      } catch (err) {
        throw new BadValue((err as Error).message);
      }
      for (const host of a['webhook-cert-host']) bad(String(host).trim() === '', '--webhook-cert-host must not be empty');
      return true;
    });
}

function statusBuilder(y: Argv) {
  return y
    .positional('vm', { type: 'string', describe: 'Only this VM (or standalone VMI)' })
    .option('kubeconfig', { type: 'string', requiresArg: true, describe: 'Kubeconfig file. Default: in-cluster, then $KUBECONFIG, then ~/.kube/config' })
    .option('context', { type: 'string', requiresArg: true, describe: 'Kubeconfig context to use instead of the current one' })
    .option('namespace', { alias: 'n', type: 'string', requiresArg: true, describe: "Namespace to show. Default: the context's namespace, then default" })
    .option('all-namespaces', { alias: 'A', type: 'boolean', default: false, describe: 'Show every namespace' })
    .option('output', { alias: 'o', type: 'string', requiresArg: true, default: 'table', choices: ['table', 'json'], describe: 'table for people, json for scripts' })
    .check((a) => {
      rejectRepeats(a, ['kubeconfig', 'context', 'namespace', 'all-namespaces', 'output', 'vm']);
      for (const name of ['kubeconfig', 'context', 'namespace'] as const) bad(a[name] === '', `--${name} must not be empty`);
      bad(a.namespace !== undefined && a['all-namespaces'], '--namespace and --all-namespaces exclude each other');
      return true;
    });
}

/**
 * Parses `argv` (without node and the script). Help and version go to `print`; anything wrong throws UsageError.
 * `env` decides the default bind addresses (in a pod or not).
 */
export async function parseCommandLine(argv: readonly string[], options: { env?: NodeJS.ProcessEnv; print?: (text: string) => void; width?: number } = {}): Promise<ParsedCommand> {
  const env = options.env ?? process.env;
  const print = options.print ?? ((text: string) => process.stdout.write(`${text}\n`));
  let chosen: ParsedCommand = { command: 'none' };
  let failure: UsageError | undefined;
  const parser = yargs()
    .scriptName('persistent-ips')
    .usage('$0 <command> [options]\n\nStable IP addresses for KubeVirt VMs: keeps an IPAMClaim per VM network whose NetworkAttachmentDefinition allows persistent IPs.')
    // One spelling per flag: unknown-flag messages name what was typed, and --leaderElect is not a second name.
    .parserConfiguration({ 'camel-case-expansion': false })
    .command('run', 'Run the controller against a cluster (until SIGINT/SIGTERM)', (y) => runBuilder(y, env), (a) => {
      chosen = {
        command: 'run',
        options: {
          ...(a.kubeconfig !== undefined ? { kubeconfig: a.kubeconfig } : {}),
          ...(a.context !== undefined ? { context: a.context } : {}),
          ...(a.namespace !== undefined ? { namespace: a.namespace } : {}),
          ...(a['feature-gates'] ? { featureGates: a['feature-gates'] } : {}),
          ...(a['controller-namespace'] !== undefined ? { controllerNamespace: a['controller-namespace'] } : {}),
          concurrency: a.concurrency,
          logLevel: a['log-level'],
          leaderElect: a['leader-elect'],
          metricsBindAddress: a['metrics-bind-address'],
          healthProbeBindAddress: a['health-probe-bind-address'],
          qps: a.qps,
          burst: a.burst,
          resyncPeriod: a['resync-period'],
          gracefulShutdownTimeout: a['graceful-shutdown-timeout'],
          webhookBindAddress: a['webhook-bind-address'],
          webhookCertProvisioning: a['webhook-cert-provisioning'] as RunOptions['webhookCertProvisioning'],
          webhookCertDir: a['webhook-cert-dir'],
          webhookServiceName: a['webhook-service-name'],
          webhookConfigurationName: a['webhook-configuration-name'],
          webhookCertHosts: a['webhook-cert-host'].map(String),
          ...(a['webhook-cert-validity'] !== undefined ? { webhookCertValidity: a['webhook-cert-validity'] } : {}),
          ...(a['webhook-ca-validity'] !== undefined ? { webhookCaValidity: a['webhook-ca-validity'] } : {}),
          allocator: a.allocator,
          defaultNetworkNad: parseNadReference(a['default-network-nad'])!,
          metricsSecure: a['metrics-secure'],
          ...(a['metrics-cert-dir'] !== undefined ? { metricsCertDir: a['metrics-cert-dir'] } : {}),
          tlsMinVersion: a['tls-min-version'],
          tlsCipherSuites: splitSuites(a['tls-cipher-suites'].map(String)),
        },
      };
    })
    .command('status [vm]', "Show each VM's networks with their IPAMClaim, addresses, IPsAllocated condition and owner (docs/status.md)", statusBuilder, (a) => {
      chosen = {
        command: 'status',
        options: {
          ...(a.kubeconfig !== undefined ? { kubeconfig: a.kubeconfig } : {}),
          ...(a.context !== undefined ? { context: a.context } : {}),
          ...(a.namespace !== undefined ? { namespace: a.namespace } : {}),
          ...(a.vm !== undefined ? { vm: a.vm } : {}),
          allNamespaces: a['all-namespaces'],
          output: a.output as 'table' | 'json',
        },
      };
    })
    .demandCommand(1, 'name a command: run or status')
    .strict()
    .epilog(EPILOG)
    .wrap(options.width ?? 120)
    .exitProcess(false)
    .help()
    .version()
    .fail((message, err, y) => {
      // Rethrowing ends parsing at once: nothing runs with flags that were not understood.
      let usage = '';
      y.showHelp((text: string) => (usage = text));
      failure = new UsageError(oneLine(err instanceof BadValue || !message ? (err?.message ?? 'invalid arguments') : message), usage);
      throw failure;
    });
  // With a parse callback, yargs hands over the help or version text instead of printing it.
  let output = '';
  try {
    await parser.parseAsync([...argv], {}, (_err: unknown, _argv: unknown, text: string) => {
      output = text;
    });
  } catch (err) {
    if (failure) throw failure;
    throw err;
  }
  if (output !== '') print(output);
  return chosen;
}

function oneLine(message: string): string {
  const text = message.replace(/\s*\n\s*/g, ' ').trim();
  return text.charAt(0).toLowerCase() + text.slice(1);
}
