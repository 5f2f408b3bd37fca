// What `npm start` does, decided from its arguments alone, and what it tells the user once the demo runs. The
// environment (KUBECONFIG, ~/.kube/config) is never consulted: a cluster is used only when the user names it with
// --kubeconfig, and even then the controller stays inside one namespace and leaves cluster-scoped objects (the
// webhook configuration's caBundle) alone unless told otherwise. Pure, so that the rules and the text are unit-tested.

import { parseArgs } from 'node:util';

export const START_USAGE = `Usage:
  npm start [-- --dir DIR]                 local control plane, KubeVirt's virt-controller, OVN-Kubernetes' cluster
                                           manager as the IPAM, examples and the controller
  npm start -- --kubeconfig PATH [--context NAME] [--namespace NS] [--all-namespaces] [--webhook] [-- RUN-FLAGS]
                                           the controller against the cluster you name, and only that

Against a named cluster, by default the controller reconciles VMs in NS only (default persistent-ips-system),
keeps anything it writes there, and serves no webhook (so it never touches the cluster's
MutatingWebhookConfiguration):
  --all-namespaces   reconcile VMs (and create IPAMClaims) in every namespace
  --webhook          serve the launcher-pod webhook and keep its certificate Secret in NS and the caBundle of the
                     MutatingWebhookConfiguration persistent-ips-launcher-pods
  -- RUN-FLAGS       passed on to \`persistent-ips run\` (see persistent-ips run --help)
$KUBECONFIG and ~/.kube/config are never used implicitly.`;

export const DEFAULT_NAMESPACE = 'persistent-ips-system';

export type StartPlan =
  | { mode: 'help' }
  | { mode: 'local'; dir: string | undefined }
  | { mode: 'cluster'; kubeconfig: string; runArgs: string[]; namespace: string; allNamespaces: boolean; webhook: boolean };

export class StartUsageError extends Error {}

export function planStart(argv: readonly string[]): StartPlan {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: true,
      tokens: true,
      options: {
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        namespace: { type: 'string' },
        'all-namespaces': { type: 'boolean', default: false },
        webhook: { type: 'boolean', default: false },
        dir: { type: 'string' },
        local: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    throw new StartUsageError((err as Error).message.split('\n')[0]!);
  }
  const { values, tokens } = parsed;
  // Positionals are accepted only after `--`: they are flags for `persistent-ips run`.
  const separator = tokens.findIndex((t) => t.kind === 'option-terminator');
  const passThrough: string[] = [];
  for (const [i, t] of tokens.entries()) {
    if (t.kind !== 'positional') continue;
    if (separator < 0 || i < separator) throw new StartUsageError(`unexpected argument "${t.value}" (flags for persistent-ips run go after --)`);
    passThrough.push(t.value);
  }
  if (values.help) return { mode: 'help' };

  const kubeconfig = values.kubeconfig;
  if (kubeconfig === undefined) {
    const clusterOnly = (['context', 'namespace', 'all-namespaces', 'webhook'] as const).filter((k) => values[k] !== undefined && values[k] !== false);
    if (clusterOnly.length > 0) throw new StartUsageError(`--${clusterOnly[0]} needs --kubeconfig PATH (without it, npm start runs a local control plane)`);
    if (passThrough.length > 0) throw new StartUsageError('flags after -- are for a named cluster: add --kubeconfig PATH');
    return { mode: 'local', dir: values.dir };
  }
  if (kubeconfig === '') throw new StartUsageError('--kubeconfig needs a path');
  if (values.local) throw new StartUsageError('--local and --kubeconfig exclude each other');
  if (values.dir !== undefined) throw new StartUsageError('--dir is for the local control plane; it does not go with --kubeconfig');
  if (values['all-namespaces'] && values.namespace !== undefined) throw new StartUsageError('--namespace and --all-namespaces exclude each other');
  const namespace = values.namespace ?? DEFAULT_NAMESPACE;
  const runArgs = [
    '--kubeconfig',
    kubeconfig,
    ...(values.context !== undefined ? ['--context', values.context] : []),
    '--controller-namespace',
    namespace,
    ...(values['all-namespaces'] ? [] : ['--namespace', namespace]),
    ...(values.webhook ? [] : ['--webhook-bind-address', '0']),
    ...passThrough,
  ];
  return { mode: 'cluster', kubeconfig, runArgs, namespace, allNamespaces: values['all-namespaces'], webhook: values.webhook };
}

/** A word as a POSIX shell reads it: bare when it has nothing the shell would interpret, else single-quoted. */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

export interface LocalDemo {
  /** A folder with `kubectl` (the control plane's own build) and `kubectl-persistent_ips` (this checkout's CLI). */
  binDir: string;
  /** The kubeconfig of the local control plane. */
  kubeconfig: string;
  /** Where the controller serves /metrics (plain HTTP on 127.0.0.1). */
  metricsUrl: string;
  /** The world's directory (e2e/kubevirt/world.ts layout) and the controller's log file name in it. */
  logDir: string;
  controllerLog: string;
  /** The demo VM and its claim (manifests/examples). */
  namespace: string;
  vm: string;
  claim: string;
}

/**
 * What `npm start` prints once the demo VM has its claim: first the one line that points a shell at the local
 * cluster (its kubeconfig, and a PATH where `kubectl` is the control plane's own build and `kubectl persistent-ips`
 * this checkout's CLI), then short commands to paste into that shell, then how to stop.
 */
export function localNextSteps(d: LocalDemo): string[] {
  const ns = shellWord(d.namespace);
  const vm = shellWord(d.vm);
  return [
    'In another terminal, set up the shell for the local cluster once:',
    `  export KUBECONFIG=${shellWord(d.kubeconfig)} PATH=${shellWord(d.binDir)}:"$PATH"`,
    'Then look:',
    `  the claims:   kubectl get ipamclaims -n ${ns} -o wide`,
    `  one claim:    kubectl get ipamclaim -n ${ns} ${shellWord(d.claim)} -o yaml`,
    `  status:       kubectl persistent-ips status -n ${ns}`,
    `  networks:     kubectl persistent-ips status -n ${ns} --networks   # each network's capacity, held, free, pending and refused claims`,
    `  the webhook:  kubectl get pods -n ${ns} -o jsonpath='{.items[*].metadata.annotations.k8s\\.v1\\.cni\\.cncf\\.io/networks}'   # ipam-claim-reference, added by the webhook`,
    `  metrics:      ${d.metricsUrl}   (curl -s ${d.metricsUrl} | grep '^persistent_ips_')`,
    `  logs:         ${d.logDir} (${d.controllerLog}, kubevirt/virt-controller.log, ovn-kubernetes/ovnkube.log, node-standin.log, controlplane/logs/)`,
    'Try:',
    `  kubectl patch vm -n ${ns} ${vm} --type merge -p '{"spec":{"runStrategy":"Halted"}}'   # stop the VM: the claim and its address stay`,
    `  kubectl patch vm -n ${ns} ${vm} --type merge -p '{"spec":{"runStrategy":"Always"}}'   # start it again: the new launcher pod gets the same address`,
    `  kubectl delete vm -n ${ns} ${vm}   # delete it: the claim goes, and OVN-K frees the address`,
    'To stop: Ctrl-C here; it stops the controller, virt-controller, the OVN-K cluster manager, the stand-ins and the control plane.',
  ];
}
