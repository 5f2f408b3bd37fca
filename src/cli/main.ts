#!/usr/bin/env node
// The only place that talks to a person: parses flags, runs a command, turns failures into a message and an exit
// code.

import './require-node.ts'; // first: see why there
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { EXIT } from './exit-codes.ts';
import { CliError, run, type RunOptions } from './run.ts';
import { status } from './status.ts';

const EPILOG = `Exit codes: 0 ok, 1 failure, 2 bad flags, 3 no kubeconfig found, 4 cluster unreachable, 5 credentials rejected.

The PersistentIPs feature gate: --feature-gates wins when it names the gate; otherwise the KubeVirt CR's
spec.configuration.developerConfiguration.featureGates decides, live; with neither, the gate is off.`;

async function main(argv: string[]): Promise<number> {
  let code: number = EXIT.ok;
  await yargs(argv)
    .scriptName('persistent-ips')
    .usage('$0 <command> [options]\n\nStable IP addresses for KubeVirt VMs: keeps an IPAMClaim per VM network whose NetworkAttachmentDefinition allows persistent IPs.')
    .command(
      'run',
      'Run the controller against a cluster (until SIGINT/SIGTERM)',
      (y) =>
        y
          .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file. Default: in-cluster service account, then $KUBECONFIG, then ~/.kube/config' })
          .option('context', { type: 'string', describe: 'Kubeconfig context to use instead of the current one' })
          .option('namespace', { type: 'string', describe: 'Watch VMs, VMIs, NADs and claims in this namespace only. Default: all namespaces' })
          .option('concurrency', { type: 'number', default: 4, describe: 'VMs reconciled in parallel (one VM is never reconciled twice at once)' })
          .option('feature-gates', { type: 'string', describe: 'Override KubeVirt feature gates, e.g. PersistentIPs=true (for clusters where the KubeVirt CR cannot be read)' })
          .option('log-level', { type: 'string', default: 'info', choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] })
          .option('leader-elect', { type: 'boolean', default: false, describe: 'Compete for a Lease so that only one replica reconciles (use with more than one replica)' })
          .option('controller-namespace', { type: 'string', describe: 'Namespace of the Lease and the webhook certificate Secret. Default: $POD_NAMESPACE, then the kubeconfig context namespace, then persistent-ips-system' })
          .option('metrics-bind-address', { type: 'string', default: ':8080', describe: 'Address of /metrics; 0 disables it' })
          .option('health-probe-bind-address', { type: 'string', default: ':8081', describe: 'Address of /healthz and /readyz; 0 disables them' })
          .option('qps', { type: 'number', default: 50, describe: 'Client-side limit of API requests per second (like client-go QPS)' })
          .option('burst', { type: 'number', default: 100, describe: 'Client-side burst of API requests above --qps' })
          .option('resync-period', { type: 'number', default: 600, describe: 'Seconds between full passes over every VM (repairs anything missed; costs no writes in a steady state)' })
          .option('graceful-shutdown-timeout', { type: 'number', default: 30, describe: 'Seconds to let in-flight reconciles finish on shutdown' })
          .option('webhook-bind-address', { type: 'string', default: ':9443', describe: 'Address of the launcher-pod admission webhook (HTTPS); 0 disables it' })
          .option('webhook-cert-provisioning', { type: 'string', default: 'self', choices: ['self', 'external'], describe: 'self: keep a CA and serving certificate in a Secret and the webhook caBundle; external: read --webhook-cert-dir (e.g. cert-manager)' })
          .option('webhook-cert-dir', { type: 'string', default: '/tmp/k8s-webhook-server/serving-certs', describe: 'tls.crt and tls.key, with --webhook-cert-provisioning=external' })
          .option('webhook-service-name', { type: 'string', default: 'persistent-ips-webhook', describe: 'Service in front of the webhook (names in the self-made certificate)' })
          .option('webhook-configuration-name', { type: 'string', default: 'persistent-ips-launcher-pods', describe: 'MutatingWebhookConfiguration whose caBundle the controller keeps' })
          .option('webhook-cert-host', { type: 'string', array: true, default: [] as string[], describe: 'Extra DNS name or IP in the self-made certificate (repeatable)' })
          .option('webhook-cert-validity', { type: 'number', describe: 'Seconds a self-made serving certificate is valid (default one year); rotated at 2/3' })
          .option('webhook-ca-validity', { type: 'number', describe: 'Seconds the self-made CA is valid (default five years)' })
          .option('allocator', { type: 'boolean', default: true, describe: 'Allocate addresses for networks whose NAD sets persistent-ips.kubevirt.io/allocator: "true" (docs/allocator.md); --no-allocator turns it off' })
          .check((a) => {
            if (!(Number.isInteger(a.concurrency) && a.concurrency >= 1)) throw new Error('--concurrency must be a whole number of at least 1');
            if (!(a.qps > 0 && a.burst >= 1)) throw new Error('--qps must be positive and --burst at least 1');
            if (!(a['resync-period'] > 0)) throw new Error('--resync-period must be positive');
            return true;
          }),
      async (a) => {
        const options: RunOptions = {
          ...(a.kubeconfig ? { kubeconfig: a.kubeconfig } : {}),
          ...(a.context ? { context: a.context } : {}),
          ...(a.namespace ? { namespace: a.namespace } : {}),
          ...(a['feature-gates'] ? { featureGates: a['feature-gates'] } : {}),
          ...(a['controller-namespace'] ? { controllerNamespace: a['controller-namespace'] } : {}),
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
          ...(a['webhook-cert-validity'] ? { webhookCertValidity: a['webhook-cert-validity'] } : {}),
          ...(a['webhook-ca-validity'] ? { webhookCaValidity: a['webhook-ca-validity'] } : {}),
          allocator: a.allocator,
        };
        code = await run(options);
      },
    )
    .command(
      'status [vm]',
      "Show each VM's networks with their IPAMClaim, addresses, IPsAllocated condition and owner (docs/status.md)",
      (y) =>
        y
          .positional('vm', { type: 'string', describe: 'Only this VM (or standalone VMI)' })
          .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file. Default: in-cluster, then $KUBECONFIG, then ~/.kube/config' })
          .option('context', { type: 'string', describe: 'Kubeconfig context to use instead of the current one' })
          .option('namespace', { alias: 'n', type: 'string', describe: "Namespace to show. Default: the context's namespace, then default" })
          .option('all-namespaces', { alias: 'A', type: 'boolean', default: false, describe: 'Show every namespace' })
          .option('output', { alias: 'o', type: 'string', default: 'table', choices: ['table', 'json'], describe: 'table for people, json for scripts' }),
      async (a) => {
        code = await status(
          {
            ...(a.kubeconfig ? { kubeconfig: a.kubeconfig } : {}),
            ...(a.context ? { context: a.context } : {}),
            ...(a.namespace ? { namespace: a.namespace } : {}),
            ...(a.vm ? { vm: a.vm } : {}),
            allNamespaces: a['all-namespaces'],
            output: a.output as 'table' | 'json',
          },
          process.stdout,
        );
      },
    )
    .demandCommand(1, 'Name a command: run, status')
    .strict()
    .epilog(EPILOG)
    .wrap(Math.min(120, process.stdout.columns || 120))
    .fail((message, err) => {
      if (err) throw err;
      process.stderr.write(`${message}\n\nRun persistent-ips --help for usage.\n`);
      code = EXIT.usage;
    })
    .help()
    .version()
    .parseAsync();
  return code;
}

main(hideBin(process.argv)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof CliError) {
      process.stderr.write(`persistent-ips: ${err.message}\n`);
      process.exit(err.exitCode);
    }
    process.stderr.write(`persistent-ips: unexpected failure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(EXIT.failure);
  },
);
