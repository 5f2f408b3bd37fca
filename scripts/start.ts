// `npm start`: the main job. By default it brings up everything needed to watch the controller work on this machine:
// a real local control plane (etcd, kube-apiserver, kube-controller-manager), the KubeVirt stand-in (test
// infrastructure: KubeVirt itself cannot run without nodes), the examples from manifests/examples, and the
// controller. Only with `--kubeconfig PATH` does it run the controller against a cluster, confined to one namespace
// unless told otherwise (start-plan.ts). Ctrl-C stops everything.

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { freePort, kubectlPath, startControlPlane } from '../e2e/harness/index.ts';
import { controllerNamespace, localWebhookConfiguration, localWebhookFlags } from '../e2e/local/webhook-config.ts';
import { startKubeVirtStandIn } from '../e2e/kubevirt-standin/index.ts';
import { localNextSteps, planStart, START_USAGE, StartUsageError, type StartPlan } from './start-plan.ts';

const root = resolve(import.meta.dirname, '..');
const cli = join(root, 'dist', 'cli', 'main.js');
const say = (line: string) => process.stdout.write(`${line}\n`);
// Whatever the environment names, the processes npm start spawns only ever see the kubeconfig passed as a flag.
const childEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env };
  delete env.KUBECONFIG;
  return env;
};

function runController(extra: string[], logFile?: string): ChildProcess {
  const child = spawn(process.execPath, [cli, 'run', ...extra], { env: childEnv(), stdio: logFile ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
  if (logFile) {
    const out = createWriteStream(logFile, { flags: 'a' });
    child.stdout?.pipe(out);
    child.stderr?.pipe(out);
  }
  return child;
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

async function local(dirFlag: string | undefined): Promise<void> {
  const dir = resolve(dirFlag ?? join(root, '.cluster', 'local'));
  mkdirSync(dir, { recursive: true });
  say('persistent-ips: starting a local control plane (the first run builds it from Go modules, which takes several minutes).');
  if (process.env.KUBECONFIG) say(`  (KUBECONFIG is set and ignored: to run against that cluster, npm start -- --kubeconfig PATH)`);
  const t0 = Date.now();
  const cp = await startControlPlane({ dir, onLog: (line) => say(`  ${line}`), handleSignals: false });
  const cleanups: (() => Promise<void>)[] = [() => cp.stop()];
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    say('\nstopping…');
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err) => say(`  cleanup failed: ${err}`));
    say('stopped.');
    process.exit(code);
  };
  process.on('SIGINT', () => void stopAll(0));
  process.on('SIGTERM', () => void stopAll(0));

  try {
    say(`control plane ready: Kubernetes ${cp.version} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    const examples = join(root, 'manifests', 'examples');
    const apply = async (argv: string[]) => {
      const r = await cp.kubectl(argv);
      if (r.code !== 0) throw new Error(`kubectl ${argv.join(' ')} failed: ${r.stderr}`);
    };
    await apply(['apply', '-f', join(examples, 'namespace.yaml'), '-f', join(examples, 'nad-persistent.yaml')]);
    await apply(['create', 'namespace', 'kubevirt']);
    await apply(['apply', '-f', join(examples, 'kubevirt-featuregate.yaml')]);
    // The launcher-pod webhook, called by the API server by URL (no Service here), with the manifest's rules.
    const webhookPort = await freePort();
    const webhookConfig = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [controllerNamespace, { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', ...localWebhookConfiguration(webhookPort) }] });
    const applied = await cp.kubectl(['apply', '-f', '-'], { input: webhookConfig });
    if (applied.code !== 0) throw new Error(`installing the webhook configuration failed: ${applied.stderr}`);

    const standInLog = pino({ level: 'info' }, pino.destination({ dest: join(dir, 'logs', 'kubevirt-standin.log'), sync: false }));
    const standIn = await startKubeVirtStandIn({ kubeconfigPath: cp.kubeconfigPath, log: standInLog });
    cleanups.push(() => standIn.stop());

    const controllerLog = join(dir, 'logs', 'persistent-ips.log');
    // A port chosen here rather than by the controller (:0), so that its URL can be printed.
    const metricsPort = await freePort();
    const controller = runController(
      ['--kubeconfig', cp.kubeconfigPath, '--metrics-bind-address', `127.0.0.1:${metricsPort}`, '--metrics-secure=false', '--health-probe-bind-address', '127.0.0.1:0', ...localWebhookFlags(webhookPort)],
      controllerLog,
    );
    cleanups.push(
      () =>
        new Promise<void>((done) => {
          if (controller.exitCode !== null) return done();
          controller.once('exit', () => done());
          controller.kill('SIGTERM');
        }),
    );
    controller.on('exit', (code) => {
      if (!stopping) {
        say(`the controller exited (code ${code}); see ${controllerLog}`);
        void stopAll(1);
      }
    });

    // Launcher pods are admitted only once the webhook has its certificate (failurePolicy Fail): wait for /readyz.
    await waitForLine(controllerLog, /serving the launcher-pod webhook/, 30_000);
    await apply(['apply', '-f', join(examples, 'vm.yaml')]);
    const ready = Date.now();
    let claims = '';
    while (Date.now() - ready < 60_000) {
      const r = await cp.kubectl(['get', 'ipamclaims', '-n', 'vm-demo', '-o', 'name']);
      claims = r.stdout.trim();
      if (claims !== '') break;
      await new Promise((r2) => setTimeout(r2, 250));
    }
    if (claims === '') throw new Error(`no IPAMClaim appeared within 60 s; see ${controllerLog}`);
    const shown = await cp.kubectl(['get', 'vm,vmi,ipamclaims', '-n', 'vm-demo', '-o', 'wide']);
    say(`\nThe example VM's claim exists ${((Date.now() - ready) / 1000).toFixed(1)} s after the VM was created:\n`);
    say(shown.stdout);
    for (const line of localNextSteps({
      kubectl: kubectlPath(cp.binDir),
      kubeconfig: cp.kubeconfigPath,
      node: process.execPath,
      cli,
      metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
      logDir: join(dir, 'logs'),
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

async function waitForLine(file: string, pattern: RegExp, timeoutMs: number): Promise<void> {
  const { readFile } = await import('node:fs/promises');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const text = await readFile(file, 'utf8').catch(() => '');
    if (pattern.test(text)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the controller did not log ${pattern} within ${timeoutMs / 1000} s; see ${file}`);
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
