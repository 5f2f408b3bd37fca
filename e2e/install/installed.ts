// Runs the controller the way an install describes it: the Deployment's args and env (bind addresses moved to free
// local ports, there being no pod network here), a token of its ServiceAccount from the TokenRequest API (so the
// install's RBAC is what it gets), against a local control plane that has no kubelet to run the Deployment itself.
// Used by install.test.ts (the kustomize and Helm installs, built CLI) and image-smoke.ts (the image's rootfs under
// chroot, with the in-cluster service-account files a pod would have).
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { freePort, kubeconfigYaml, poll, type ControlPlane } from '../harness/index.ts';
import { spawnLogged, stopProcess } from '../harness/process.ts';
import { REPO_ROOT } from '../local/controller-process.ts';

export const NAMESPACE = 'persistent-ips-system';
export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
} & Record<string, unknown>;

export function parseYaml(text: string): KubeObject[] {
  return (loadAllYaml(text) as (KubeObject | null)[]).filter((o): o is KubeObject => o !== null && typeof o === 'object');
}

/** `kubectl kustomize manifests/<overlay>` with the control plane's kubectl: the YAML that install applies. */
export async function kustomize(cp: ControlPlane, overlay: string): Promise<string> {
  return (await cp.kubectl(['kustomize', join(REPO_ROOT, 'manifests', overlay)])).stdout;
}

interface Container {
  image: string;
  ports?: { containerPort: number; protocol?: string }[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
}
interface Deployment {
  metadata: { namespace: string };
  spec: { template: { spec: { serviceAccountName: string; containers: Container[] } } };
}

/** What a launch needs from the install, read back from the API server. */
export interface InstalledSpec {
  image: string;
  args: string[];
  env: Record<string, string>;
  serviceAccount: string;
  namespace: string;
  token: string;
  /** The container ports, e.g. `8443/tcp`. */
  ports: string[];
}

export async function readInstalled(cp: ControlPlane, namespace = NAMESPACE): Promise<InstalledSpec> {
  const dep = JSON.parse((await cp.kubectl(['-n', namespace, 'get', 'deployment', 'persistent-ips-controller', '-o', 'json'])).stdout) as Deployment;
  const pod = dep.spec.template.spec;
  const c = pod.containers[0];
  if (!c) throw new Error('the installed Deployment has no container');
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = dep.metadata.namespace;
    // The downward API's pod name: a name a pod of this Deployment could have.
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.name') env[e.name] = 'persistent-ips-controller-emulated-0';
    else throw new Error(`env ${e.name}: only values and the namespace and name fieldRefs are emulated`);
  }
  const token = (await cp.kubectl(['-n', namespace, 'create', 'token', pod.serviceAccountName, '--duration=1h'])).stdout.trim();
  const ports = (c.ports ?? []).map((p) => `${p.containerPort}/${(p.protocol ?? 'TCP').toLowerCase()}`);
  return { image: c.image, args: c.args ?? [], env, serviceAccount: pod.serviceAccountName, namespace, token, ports };
}

export interface Launched {
  proc: ChildProcess;
  healthPort: number;
  logFile: string;
  exitReason(): string | undefined;
  stop(): Promise<void>;
}

/**
 * Starts `command` (argv[0] + the image entrypoint's arguments) with the installed args and env. `moveCertDir` maps
 * the webhook certificate directory (the pod's /tmp emptyDir) somewhere writable; `extraEnv` adds what the caller's
 * way of reaching the API server needs.
 */
export async function launch(
  command: string[],
  spec: InstalledSpec,
  opts: { logFile: string; certDir?: string; extraArgs?: string[]; extraEnv?: Record<string, string> },
): Promise<Launched> {
  const healthPort = await freePort();
  const metricsPort = await freePort();
  const webhookPort = await freePort();
  const args = spec.args.map((a) => {
    if (a.startsWith('--health-probe-bind-address=')) return `--health-probe-bind-address=127.0.0.1:${healthPort}`;
    if (a.startsWith('--metrics-bind-address=')) return `--metrics-bind-address=127.0.0.1:${metricsPort}`;
    if (a.startsWith('--webhook-bind-address=')) return `--webhook-bind-address=127.0.0.1:${webhookPort}`;
    if (a.startsWith('--webhook-cert-dir=') && opts.certDir) return `--webhook-cert-dir=${opts.certDir}`;
    return a;
  });
  args.push(...(opts.extraArgs ?? []));
  const [name, ...pre] = command;
  if (!name) throw new Error('empty command');
  // Resolved on this process's PATH: the child's env (the Deployment's and the image's) is not the host's.
  const bin = name.includes('/')
    ? name
    : (process.env['PATH'] ?? '')
        .split(':')
        .map((d) => join(d, name))
        .find((p) => existsSync(p));
  if (!bin) throw new Error(`${name} is not on PATH`);
  // A process group of its own, in the harness's reaper: nothing outlives the test file.
  const p = spawnLogged('persistent-ips', bin, [...pre, ...args], opts.logFile, { PATH: '/usr/local/bin:/usr/bin:/bin', ...spec.env, ...opts.extraEnv });
  let reason: string | undefined;
  void p.exited.then((how) => (reason = `exited (${how}); log: ${opts.logFile}`));
  return { proc: p.child, healthPort, logFile: opts.logFile, exitReason: () => reason, stop: () => stopProcess(p, 15_000) };
}

/** The controller on the host: Node 24 of the repository, the built CLI, a kubeconfig with the ServiceAccount token. */
export async function launchBuiltCli(cp: ControlPlane, spec: InstalledSpec, dir: string, name: string): Promise<Launched> {
  mkdirSync(join(dir, name, 'certs'), { recursive: true });
  const kubeconfig = join(dir, name, 'kubeconfig');
  writeFileSync(kubeconfig, kubeconfigYaml(cp.server, cp.caFile, spec.token, spec.namespace), { mode: 0o600 });
  return launch([join(REPO_ROOT, 'node_modules', '.bin', 'node'), join(REPO_ROOT, 'dist', 'cli', 'main.js')], spec, {
    logFile: join(dir, name, 'controller.log'),
    certDir: join(dir, name, 'certs'),
    extraArgs: [`--kubeconfig=${kubeconfig}`],
  });
}

/**
 * The controller from an unpacked image: the image's entrypoint under chroot as uid/gid 65532, with the
 * service-account files and KUBERNETES_SERVICE_HOST/PORT a pod gets (the in-cluster configuration path).
 */
export async function launchChroot(
  cp: ControlPlane,
  spec: InstalledSpec,
  rootfs: string,
  entrypoint: string[],
  user: string,
  logFile: string,
): Promise<Launched> {
  const sa = join(rootfs, 'var/run/secrets/kubernetes.io/serviceaccount');
  mkdirSync(sa, { recursive: true });
  writeFileSync(join(sa, 'token'), spec.token, { mode: 0o644 });
  writeFileSync(join(sa, 'ca.crt'), readFileSync(cp.caFile), { mode: 0o644 });
  writeFileSync(join(sa, 'namespace'), spec.namespace, { mode: 0o644 });
  const url = new URL(cp.server);
  return launch(['chroot', `--userspec=${user}`, rootfs, ...entrypoint], spec, {
    logFile,
    extraEnv: { KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port, NODE_ENV: 'production' },
  });
}

/** Waits for /readyz on the launched controller's probe port. */
export async function waitReady(l: Launched, timeoutMs = 60_000): Promise<void> {
  await poll(
    `controller ready (/readyz on ${l.healthPort})`,
    timeoutMs,
    async () => ((await fetch(`http://127.0.0.1:${l.healthPort}/readyz`)).status === 200 ? true : undefined),
    { abort: l.exitReason, intervalMs: 250 },
  );
}

/** KubeVirt CR with the PersistentIPs gate, a persistent NAD and a VM on it (as manifests/examples). */
export function demoObjects(vm: string, ns = 'vm-demo'): string {
  return `
apiVersion: v1
kind: Namespace
metadata: { name: kubevirt }
---
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: { name: kubevirt, namespace: kubevirt }
spec: { configuration: { developerConfiguration: { featureGates: [PersistentIPs] } } }
---
apiVersion: v1
kind: Namespace
metadata: { name: ${ns} }
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: { name: tenantblue, namespace: ${ns} }
spec:
  config: '{"cniVersion":"0.4.0","name":"tenantblue","type":"ovn-k8s-cni-overlay","topology":"layer2","subnets":"10.100.200.0/24","netAttachDefName":"${ns}/tenantblue","allowPersistentIPs":true}'
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: { name: ${vm}, namespace: ${ns} }
spec:
  runStrategy: Halted
  template:
    spec:
      domain: { devices: { interfaces: [{ name: default, masquerade: {} }, { name: tenantblue, bridge: {} }] } }
      networks: [{ name: default, pod: {} }, { name: tenantblue, multus: { networkName: tenantblue } }]
`;
}

interface Claim {
  metadata: { name: string; ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[]; finalizers?: string[] };
  spec: { network: string; interface: string };
}

/** Creates a VM on a persistent network and waits for its claim; returns the claim. */
export async function expectClaimFor(cp: ControlPlane, vm: string, l: Launched, ns = 'vm-demo'): Promise<{ claim: Claim; vmUid: string }> {
  await cp.kubectl(['apply', '--server-side', '--field-manager=e2e-install', '-f', '-'], { input: demoObjects(vm, ns) });
  const vmUid = (await cp.kubectl(['-n', ns, 'get', 'vm', vm, '-o', 'jsonpath={.metadata.uid}'])).stdout.trim();
  const claim = await poll(
    `IPAMClaim ${ns}/${vm}.tenantblue`,
    60_000,
    async () => {
      const r = await cp.kubectl(['-n', ns, 'get', 'ipamclaims', `${vm}.tenantblue`, '-o', 'json'], { check: false });
      return r.code === 0 ? (JSON.parse(r.stdout) as Claim) : undefined;
    },
    { abort: l.exitReason, intervalMs: 250 },
  );
  return { claim, vmUid };
}
