// `npm start`: the main job. By default it brings up everything needed to watch the controller work on this machine:
// the world of the real-KubeVirt e2e (e2e/kubevirt/world.ts): a real local control plane (etcd, kube-apiserver,
// kube-controller-manager), KubeVirt's real virt-controller, OVN-Kubernetes' real cluster manager handing out the
// addresses, the node and virt-api stand-ins (test infrastructure: no node runs here), the controller; then the
// examples from manifests/examples, whose VM's claim gets its address from OVN-K. Only with `--kubeconfig PATH` does it run the controller against a cluster, confined to one namespace
// unless told otherwise (start-plan.ts). Ctrl-C stops everything.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { kubectlPath } from '../e2e/harness/index.ts';
import { KUBEVIRT_VERSION } from '../e2e/kubevirt/kubevirt.ts';
import { World } from '../e2e/kubevirt/world.ts';
import { CLI, NODE } from '../e2e/local/controller-process.ts';
import { localNextSteps, planStart, shellWord, START_USAGE, StartUsageError, type StartPlan } from './start-plan.ts';

const root = resolve(import.meta.dirname, '..');
const cli = join(root, 'dist', 'cli', 'main.js');
const say = (line: string) => process.stdout.write(`${line}\n`);
// Whatever the environment names, the processes npm start spawns only ever see the kubeconfig passed as a flag.
const childEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env };
  delete env.KUBECONFIG;
  return env;
};

function runController(extra: string[]): ChildProcess {
  return spawn(process.execPath, [cli, 'run', ...extra], { env: childEnv(), stdio: 'inherit' });
}

async function againstNamedCluster(plan: Extract<StartPlan, { mode: 'cluster' }>): Promise<void> {
  say(`persistent-ips: running the controller against the cluster of ${plan.kubeconfig}.`);
  say(
    plan.allNamespaces
      ? '  VMs in every namespace (--all-namespaces): IPAMClaims are created where the VMs are.'
      : `  VMs in namespace ${plan.namespace} only (--all-namespaces for every namespace).`,
  );
  say(
    plan.webhook
      ? `  Serving the webhook (--webhook): its Secret in ${plan.namespace}, the caBundle of MutatingWebhookConfiguration persistent-ips-launcher-pods.`
      : '  No webhook: the MutatingWebhookConfiguration is not touched (--webhook to serve it).',
  );
  const child = runController(plan.runArgs);
  const forward = (sig: NodeJS.Signals) => child.kill(sig);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  child.on('exit', (code) => process.exit(code ?? 1));
}

/** Calls `read` every 250 ms until it gives a value or `ms` have passed; its last answer. */
async function poll<T>(ms: number, read: () => Promise<T | undefined>): Promise<T | undefined> {
  for (const end = Date.now() + ms; ; await new Promise((r) => setTimeout(r, 250))) {
    const value = await read();
    if (value !== undefined || Date.now() >= end) return value;
  }
}

async function local(dirFlag: string | undefined): Promise<void> {
  const dir = resolve(dirFlag ?? join(root, '.cluster', 'local'));
  say("persistent-ips: starting a local control plane with KubeVirt's virt-controller and OVN-Kubernetes' cluster manager");
  say('  (the first run builds them from source, with progress below: several minutes; later runs start in seconds).');
  if (process.env.KUBECONFIG) say(`  (KUBECONFIG is set and ignored: to run against that cluster, npm start -- --kubeconfig PATH)`);
  // every process of the world gets its kubeconfig as a flag; none may fall back to the environment's
  delete process.env.KUBECONFIG;
  const t0 = Date.now();
  // The world of the real-KubeVirt e2e (e2e/kubevirt/world.ts), in a directory of its own: control plane, real
  // virt-controller, OVN-K's cluster manager as the IPAM, the node and virt-api stand-ins, and the controller.
  const world = new World({
    ovnKubernetes: true,
    dir,
    onLog: (line) => say(`  ${line}`),
    handleSignals: false,
    controllerName: 'start',
    resyncPeriodS: undefined,
  });
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    say('\nstopping…');
    await world.tearDown().catch((err) => say(`  stopping failed: ${err}`));
    say('stopped.');
    process.exit(code);
  };
  process.on('SIGINT', () => void stopAll(0));
  process.on('SIGTERM', () => void stopAll(0));

  try {
    await world.setUp();
    say(
      `ready in ${((Date.now() - t0) / 1000).toFixed(1)} s: Kubernetes ${world.cp.version}, virt-controller ${KUBEVIRT_VERSION}, OVN-Kubernetes' cluster manager, the controller`,
    );
    void world.controller.exited.then(({ code, signal }) => {
      if (stopping) return;
      say(`the controller exited (code ${code}, signal ${signal}); see ${world.controller.logFile}`);
      void stopAll(1);
    });
    const examples = join(root, 'manifests', 'examples');
    const applied = await world.cp.kubectl(['apply', ...['namespace.yaml', 'nad-persistent.yaml', 'vm.yaml'].flatMap((f) => ['-f', join(examples, f)])]);
    if (applied.code !== 0) throw new Error(`kubectl apply of the examples failed: ${applied.stderr}`);
    const created = Date.now();
    // The claim is the controller's; its status.ips is OVN-K's, written once the launcher pod has its address.
    const ips = await poll(90_000, async () => {
      const r = await world.cp.kubectl(['get', 'ipamclaim', '-n', 'vm-demo', 'vm-a.tenantblue', '-o', 'jsonpath={.status.ips}'], { check: false });
      const found = r.code === 0 && r.stdout.trim() !== '' ? (JSON.parse(r.stdout) as string[]) : [];
      return found.length > 0 ? found : undefined;
    });
    if (ips === undefined) throw new Error(`the claim vm-a.tenantblue got no address within 90 s; see the logs in ${dir}`);
    const given = Date.now();
    // the VMI runs once the node stand-in saw OVN-K's address on the launcher pod (and virt-controller moved it on)
    await poll(30_000, async () => {
      const r = await world.cp.kubectl(['get', 'vmi', '-n', 'vm-demo', 'vm-a', '-o', 'jsonpath={.status.phase}'], { check: false });
      return r.stdout.trim() === 'Running' || undefined;
    });
    const shown = await world.cp.kubectl(['get', 'vm,vmi,ipamclaims', '-n', 'vm-demo', '-o', 'wide']);
    say(`\nThe example VM's claim holds ${ips.join(', ')}, given by OVN-Kubernetes ${((given - created) / 1000).toFixed(1)} s after the VM was created:\n`);
    say(shown.stdout);
    const status = spawnSync(NODE, [CLI, 'status', '-n', 'vm-demo', '--kubeconfig', world.cp.kubeconfigPath], { env: childEnv(), encoding: 'utf8' });
    say(`persistent-ips status -n vm-demo:\n${status.stdout}${status.stderr}`);
    for (const line of localNextSteps({
      binDir: shellBin(dir, kubectlPath(world.cp.binDir)),
      kubeconfig: world.cp.kubeconfigPath,
      metricsUrl: `http://127.0.0.1:${world.controller.metricsPort}/metrics`,
      logDir: dir,
      controllerLog: basename(world.controller.logFile),
      namespace: 'vm-demo',
      vm: 'vm-a',
      claim: 'vm-a.tenantblue',
    }))
      say(line);
  } catch (err) {
    say(`persistent-ips: ${err instanceof Error ? err.message : String(err)}`);
    await stopAll(1);
  }
}

/**
 * DIR/bin, for the reader's shell: `kubectl`, the control plane's own build, and `kubectl-persistent_ips`, this
 * checkout's CLI on the Node npm start runs on (the machine's own `node` may be older than the CLI needs), which
 * kubectl runs for `kubectl persistent-ips`, as it would the package's bin once installed.
 */
function shellBin(dir: string, kubectl: string): string {
  const bin = join(dir, 'bin');
  rmSync(bin, { recursive: true, force: true });
  mkdirSync(bin, { recursive: true });
  symlinkSync(kubectl, join(bin, 'kubectl'));
  writeFileSync(join(bin, 'kubectl-persistent_ips'), `#!/bin/sh\nexec ${shellWord(NODE)} ${shellWord(CLI)} "$@"\n`, { mode: 0o755 });
  return bin;
}

let plan: StartPlan;
try {
  plan = planStart(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof StartUsageError)) throw err;
  process.stderr.write(`npm start: ${err.message}\n\n${START_USAGE}\n`);
  process.exit(2);
}
if (plan.mode === 'help') say(START_USAGE);
else if (plan.mode === 'cluster') await againstNamedCluster(plan);
else await local(plan.dir);
