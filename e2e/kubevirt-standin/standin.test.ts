// End-to-end test of the KubeVirt stand-in (test infrastructure) against a real API server: the cluster given by
// PERSISTENT_IPS_E2E_KUBECONFIG (or PERSISTENT_IPS_EXISTING_KUBECONFIG), with the CRDs of e2e/crds installed;
// without either, on a local control plane of its own started by the e2e harness.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import { pino } from 'pino';
import { MULTUS_NETWORKS_ANNOTATION } from '../../src/claims/constants.ts';
import { resourcePath, resources } from '../../src/kube/resources.ts';
import {
  KubeVirtStandInClient,
  MIGRATION_JOB_LABEL,
  VMI_FINALIZER,
  VM_CONTROLLER_FINALIZER,
  buildVM,
  podInterfaceName,
  podNetworkInterfaces,
  startKubeVirtStandIn,
  type KubeVirtStandIn,
  type Vmi,
} from './index.ts';
import { apiError } from './kube.ts';
import { startOrConnect, type Cluster } from '../harness/index.ts';
import { track } from '../harness/reaper.ts';

const GIVEN_KUBECONFIG = process.env['PERSISTENT_IPS_E2E_KUBECONFIG'];
let KUBECONFIG: string | undefined = GIVEN_KUBECONFIG;
const WAIT = { timeoutMs: 30_000 };
const quietLog = () =>
  pino({ level: process.env['KUBEVIRT_STANDIN_LOG_LEVEL'] ?? 'warn', base: { component: 'kubevirt-standin' } }, pino.destination(2));

/**
 * Records the watch events of one kind in a namespace, in arrival order, for assertions on ordering. Reconnects
 * from the last resourceVersion seen when the watch ends (client-node closes an idle watch after 30 s).
 */
class EventLog {
  readonly events: { type: string; name: string; obj: Record<string, any> }[] = [];
  #ctrl: AbortController | undefined;
  #stopped = false;
  #rv: string | undefined;

  static async start(kc: KubeConfig, path: string): Promise<EventLog> {
    const log = new EventLog();
    await log.#connect(new Watch(kc), path);
    return log;
  }

  async #connect(watch: Watch, path: string): Promise<void> {
    if (this.#stopped) return;
    this.#ctrl = await watch.watch(
      path,
      this.#rv ? { resourceVersion: this.#rv } : {},
      (type, obj) => {
        if (type === 'ERROR') {
          this.#rv = undefined; // expired: start again from now (the gap is acceptable for these tests)
          return;
        }
        if (type === 'BOOKMARK') return;
        this.#rv = obj?.metadata?.resourceVersion ?? this.#rv;
        this.events.push({ type, name: obj?.metadata?.name, obj });
      },
      () => void setTimeout(() => void this.#connect(watch, path).catch(() => undefined), 50),
    );
  }

  stop(): void {
    this.#stopped = true;
    this.#ctrl?.abort();
  }

  of(name: string) {
    return this.events.filter((e) => e.name === name);
  }
}

async function createNamespace(core: CoreV1Api, name: string): Promise<void> {
  await core.createNamespace({ body: { metadata: { name, labels: { 'persistent-ips-test': 'kubevirt-standin' } } } });
  // Launcher pods run as the namespace's default service account; with only the garbage-collector and namespace
  // controllers, nothing makes it, and the ServiceAccount admission plugin (when enabled) insists on it.
  try {
    await core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } });
  } catch (err) {
    if (apiError(err).code !== 409) throw err;
  }
}

describe('KubeVirt stand-in on a real API server', { timeout: 300_000 }, () => {
  const suffix = randomBytes(3).toString('hex');
  const ns = `standin-${suffix}`;
  const ns2 = `standin-cli-${suffix}`;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let standIn: KubeVirtStandIn;
  let vmiEvents: EventLog;
  let vmEvents: EventLog;
  let cluster: Cluster | undefined;

  before(async () => {
    if (!GIVEN_KUBECONFIG) {
      cluster = await startOrConnect();
      KUBECONFIG = cluster.kubeconfigPath;
    }
    kc = new KubeConfig();
    kc.loadFromFile(KUBECONFIG!);
    core = kc.makeApiClient(CoreV1Api);
    await createNamespace(core, ns);
    standIn = await startKubeVirtStandIn({
      kubeconfigPath: KUBECONFIG!,
      namespace: ns,
      log: quietLog(),
    });
    vmiEvents = await EventLog.start(kc, resourcePath(resources.virtualMachineInstances, ns));
    vmEvents = await EventLog.start(kc, resourcePath(resources.virtualMachines, ns));
  });

  after(async () => {
    vmiEvents?.stop();
    vmEvents?.stop();
    // VMs hold finalizers that only the stand-in removes: delete them while it still runs
    if (standIn) {
      for (const vm of await standIn.api.vms.list(ns).catch(() => [])) {
        await standIn.deleteVM(ns, vm.metadata.name).catch(() => undefined);
      }
      for (const vm of await standIn.api.vms.list(ns).catch(() => [])) {
        await standIn.waitForVMGone(ns, vm.metadata.name, WAIT).catch(() => undefined);
      }
      await standIn.stop();
    }
    for (const n of [ns, ns2]) await core?.deleteNamespace({ name: n }).catch(() => undefined);
    await cluster?.stop();
  });

  it('a running VM gets a VMI and a launcher pod with KubeVirt names, owners, finalizers and networks', async () => {
    const vm = await standIn.createVM(
      buildVM({
        namespace: ns,
        name: 'vm1',
        running: true,
        networks: [
          { name: 'red', nadName: 'nad-red' },
          { name: 'blue', nadName: 'elsewhere/nad-blue' },
        ],
      }),
    );
    const { vmi, pod } = await standIn.waitForVMIRunning(ns, 'vm1', WAIT);

    const vmNow = await standIn.waitForVM(ns, 'vm1', (v) => v.status?.printableStatus === 'Running', WAIT);
    assert.ok(vmNow.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER), 'the VM carries KubeVirt’s finalizer');
    assert.equal(vmNow.status?.ready, true);

    assert.deepEqual(vmi.metadata.ownerReferences, [
      { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm1', uid: vm.metadata.uid, controller: true, blockOwnerDeletion: true },
    ]);
    assert.ok(vmi.metadata.finalizers?.includes(VMI_FINALIZER));
    assert.deepEqual(vmi.spec?.networks, vm.spec?.template?.spec?.networks);

    assert.match(pod.metadata!.name!, /^virt-launcher-vm1-[a-z0-9]{5}$/);
    assert.equal(pod.metadata?.labels?.['kubevirt.io'], 'virt-launcher');
    assert.equal(pod.metadata?.labels?.['kubevirt.io/created-by'], vmi.metadata.uid);
    assert.equal(pod.metadata?.labels?.['vm.kubevirt.io/name'], 'vm1');
    assert.equal(pod.metadata?.annotations?.['kubevirt.io/domain'], 'vm1');
    assert.equal(pod.spec?.nodeName, undefined);
    assert.deepEqual(
      pod.metadata?.ownerReferences?.map((r) => ({ kind: r.kind, name: r.name, uid: r.uid, controller: r.controller, blockOwnerDeletion: r.blockOwnerDeletion })),
      [{ kind: 'VirtualMachineInstance', name: 'vm1', uid: vmi.metadata.uid, controller: true, blockOwnerDeletion: true }],
    );
    const elements = JSON.parse(pod.metadata!.annotations![MULTUS_NETWORKS_ANNOTATION]!) as Record<string, unknown>[];
    assert.deepEqual(
      elements.map((e) => ({ name: e['name'], namespace: e['namespace'], interface: e['interface'] })),
      [
        { name: 'nad-red', namespace: ns, interface: podInterfaceName('red') },
        { name: 'nad-blue', namespace: 'elsewhere', interface: podInterfaceName('blue') },
      ],
    );
    assert.deepEqual(vmi.status?.activePods, { [pod.metadata!.uid!]: 'standin-node-1' });
    assert.deepEqual(vmi.status?.interfaces?.map((i) => i.name), ['default', 'red', 'blue']);
    assert.ok(vmiEvents.of('vm1').some((e) => e.obj['status']?.phase === 'Scheduling'), 'the VMI went through Scheduling');
  });

  it('stop deletes the VMI and its pod, the VM keeps its finalizer; start makes a new VMI and pod', async () => {
    const before = await standIn.waitForVMIRunning(ns, 'vm1', WAIT);
    await standIn.stopVM(ns, 'vm1', WAIT);
    await standIn.waitForPodGone(ns, before.pod.metadata!.name!, WAIT);
    const stopped = await standIn.waitForVM(ns, 'vm1', (v) => v.status?.printableStatus === 'Stopped', WAIT);
    assert.equal(stopped.spec?.running, false);
    assert.ok(stopped.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER));
    assert.equal(stopped.metadata.deletionTimestamp, undefined);

    // the VMI waited for its pod: while terminating, it listed the pod in activePods; at the end, none
    const seen = vmiEvents.of('vm1').filter((e) => e.obj['metadata']?.uid === before.vmi.metadata.uid);
    const terminating = seen.filter((e) => e.obj['metadata']?.deletionTimestamp);
    assert.ok(terminating.some((e) => Object.keys(e.obj['status']?.activePods ?? {}).includes(before.pod.metadata!.uid!)));
    const last = seen.at(-1)!;
    assert.equal(last.type, 'DELETED');
    assert.deepEqual(last.obj['status']?.activePods, {});
    assert.equal(last.obj['status']?.phase, 'Succeeded');

    const vmi = await standIn.startVM(ns, 'vm1', WAIT);
    assert.ok(vmi);
    assert.notEqual(vmi.metadata.uid, before.vmi.metadata.uid);
    const pods = await standIn.waitForLauncherPods(ns, 'vm1', (p) => p.length === 1, WAIT);
    assert.notEqual(pods[0]!.metadata!.name, before.pod.metadata!.name);
  });

  it('migrate makes a target pod, lists both pods during the migration, and ends with the target only', async () => {
    const { vmi: before, pod: source } = await standIn.waitForVMIRunning(ns, 'vm1', WAIT);
    const result = await standIn.migrate(ns, 'vm1', WAIT);
    assert.equal(result.sourcePod, source.metadata!.name);
    assert.ok(result.targetPod && result.targetPod !== result.sourcePod);
    await standIn.waitForPodGone(ns, source.metadata!.name!, WAIT);
    const pods = await standIn.listLauncherPods(ns, 'vm1');
    assert.deepEqual(pods.map((p) => p.metadata!.name), [result.targetPod]);
    const target = pods[0]!;
    assert.equal(target.metadata?.labels?.[MIGRATION_JOB_LABEL], result.migrationUid);
    assert.deepEqual(podNetworkInterfaces(target), podNetworkInterfaces(source));

    const vmi = (await standIn.getVMI(ns, 'vm1'))!;
    assert.equal(vmi.metadata.uid, before.metadata.uid);
    assert.deepEqual(vmi.status?.activePods, { [target.metadata!.uid!]: 'standin-node-2' });
    const during = vmiEvents.of('vm1').filter((e) => e.obj['status']?.migrationState?.migrationUid === result.migrationUid);
    assert.ok(
      during.some((e) => {
        const ap = e.obj['status']?.activePods ?? {};
        return ap[source.metadata!.uid!] !== undefined && ap[target.metadata!.uid!] !== undefined;
      }),
      'both pods were in activePods during the migration',
    );
  });

  it('hotplug adds the network to the VMI and a new launcher pod carries it; hot-unplug removes it from VMI then VM', async () => {
    const { pod: before } = await standIn.waitForVMIRunning(ns, 'vm1', WAIT);
    const vmi = await standIn.hotplugInterface(ns, 'vm1', { networkName: 'green', nadName: 'nad-green' }, WAIT);
    assert.ok(vmi?.spec?.networks?.some((n) => n.name === 'green'));
    const { pod } = await standIn.waitForVMIRunning(ns, 'vm1', WAIT);
    assert.notEqual(pod.metadata!.name, before.metadata!.name, 'the new network came with a new pod');
    assert.deepEqual(podNetworkInterfaces(pod), [podInterfaceName('red'), podInterfaceName('blue'), podInterfaceName('green')]);

    const unplugged = await standIn.hotUnplugInterface(ns, 'vm1', 'red', WAIT);
    assert.ok(unplugged && !unplugged.spec?.domain?.devices?.interfaces?.some((i) => i.name === 'red'));
    const vm = (await standIn.getVM(ns, 'vm1'))!;
    assert.deepEqual(vm.spec?.template?.spec?.networks?.map((n) => n.name), ['default', 'blue', 'green']);
    const { pod: after } = await standIn.waitForVMIRunning(ns, 'vm1', WAIT);
    assert.deepEqual(podNetworkInterfaces(after), [podInterfaceName('blue'), podInterfaceName('green')]);
    // KubeVirt's order: the VMI first carried `state: absent`, and lost the interface only after the pod change
    const redStates = vmiEvents
      .of('vm1')
      .map((e) => (e.obj['spec']?.domain?.devices?.interfaces as { name: string; state?: string }[] | undefined)?.find((i) => i.name === 'red'));
    const firstAbsent = redStates.findIndex((i) => i?.state === 'absent');
    assert.ok(firstAbsent >= 0, 'the VMI interface was marked absent');
    assert.ok(redStates.slice(firstAbsent).some((i) => i === undefined), 'then removed');
  });

  it('a VM deleted in foreground mode waits for its VMI, which waits for its pod', async () => {
    const { vmi, pod } = await standIn.waitForVMIRunning(ns, 'vm1', WAIT);
    await standIn.deleteVM(ns, 'vm1', { propagationPolicy: 'Foreground' });
    await standIn.waitForVMGone(ns, 'vm1', WAIT);
    await standIn.waitForVMIGone(ns, 'vm1', WAIT);
    await standIn.waitForPodGone(ns, pod.metadata!.name!, WAIT);

    const vmDeleted = vmEvents.events.findIndex((e) => e.name === 'vm1' && e.type === 'DELETED');
    const lastVm = vmEvents.events[vmDeleted]!.obj;
    assert.ok(lastVm['metadata']?.deletionTimestamp);
    const vmiDeletedEv = vmiEvents.events.find((e) => e.type === 'DELETED' && e.obj['metadata']?.uid === vmi.metadata.uid);
    assert.ok(vmiDeletedEv, 'the VMI was deleted');
    // while the VM was terminating it still had KubeVirt's finalizer and the VMI existed
    const terminatingVm = vmEvents.events.filter((e) => e.name === 'vm1' && e.obj['metadata']?.deletionTimestamp && e.type !== 'DELETED');
    assert.ok(terminatingVm.some((e) => (e.obj['metadata']?.finalizers as string[]).includes(VM_CONTROLLER_FINALIZER)));
    assert.ok(terminatingVm.some((e) => (e.obj['metadata']?.finalizers as string[]).includes('foregroundDeletion')));
  });

  it('a VM deleted in background mode goes only after its VMI; a standalone VMI waits for its pod', async () => {
    await standIn.createVM(buildVM({ namespace: ns, name: 'vm2', running: true, networks: [{ name: 'red', nadName: 'nad-red' }] }));
    const { vmi } = await standIn.waitForVMIRunning(ns, 'vm2', WAIT);
    await standIn.deleteVM(ns, 'vm2', { propagationPolicy: 'Background' });
    await standIn.waitForVMGone(ns, 'vm2', WAIT);
    assert.equal(await standIn.getVMI(ns, 'vm2'), undefined, 'the VMI was gone before the VM');
    assert.ok(vmiEvents.events.some((e) => e.type === 'DELETED' && e.obj['metadata']?.uid === vmi.metadata.uid));

    const standalone: Vmi = {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'lonely', namespace: ns },
      spec: { networks: [{ name: 'red', multus: { networkName: 'nad-red' } }], domain: { devices: { interfaces: [{ name: 'red', bridge: {} }] } } },
    };
    await standIn.api.vmis.create(ns, standalone);
    const { pod } = await standIn.waitForVMIRunning(ns, 'lonely', WAIT);
    const withFinalizer = await standIn.getVMI(ns, 'lonely');
    assert.ok(withFinalizer?.metadata.finalizers?.includes(VMI_FINALIZER));
    await standIn.api.vmis.delete(ns, 'lonely');
    await standIn.waitForVMIGone(ns, 'lonely', WAIT);
    await standIn.waitForPodGone(ns, pod.metadata!.name!, WAIT);
    const lonely = vmiEvents.of('lonely');
    const podUid = pod.metadata!.uid!;
    const firstTerminating = lonely.findIndex((e) => e.obj['metadata']?.deletionTimestamp);
    assert.ok(firstTerminating >= 0);
    assert.ok(Object.keys(lonely[firstTerminating]!.obj['status']?.activePods ?? {}).includes(podUid), 'terminating VMI still lists its pod');
    assert.deepEqual(lonely.at(-1)!.obj['status']?.activePods, {});
  });

  it('picks up where it was after a restart: a VM made while it was down, a migration requested while it was down', async () => {
    await standIn.stop();
    await standIn.createVM(buildVM({ namespace: ns, name: 'vm3', running: true, networks: [{ name: 'red', nadName: 'nad-red' }] }));
    standIn = await startKubeVirtStandIn({ kubeconfigPath: KUBECONFIG!, namespace: ns, log: quietLog() });
    const { pod: source } = await standIn.waitForVMIRunning(ns, 'vm3', WAIT);

    await standIn.stop();
    const requested = await standIn.migrate(ns, 'vm3', { wait: false });
    standIn = await startKubeVirtStandIn({ kubeconfigPath: KUBECONFIG!, namespace: ns, log: quietLog() });
    const vmi = await standIn.waitForVMI(ns, 'vm3', (v) => v.status?.migrationState?.migrationUid === requested.migrationUid && v.status.migrationState.completed === true, WAIT);
    assert.equal(vmi.status?.migrationState?.sourcePod, source.metadata!.name);
    const pods = await standIn.waitForLauncherPods(ns, 'vm3', (p) => p.length === 1, WAIT);
    assert.equal(pods[0]!.metadata!.name, vmi.status?.migrationState?.targetPod);
  });

  it('a launcher pod deleted behind KubeVirt’s back fails the VMI, and a running VM gets a new one', async () => {
    const { vmi, pod } = await standIn.waitForVMIRunning(ns, 'vm3', WAIT);
    await standIn.api.deletePod(ns, pod.metadata!.name!, pod.metadata!.uid!);
    const fresh = await standIn.waitForVMI(ns, 'vm3', (v) => v.metadata.uid !== vmi.metadata.uid, WAIT);
    assert.ok(vmiEvents.events.some((e) => e.obj['metadata']?.uid === vmi.metadata.uid && e.obj['status']?.phase === 'Failed'));
    await standIn.waitForVMIRunning(ns, 'vm3', WAIT);
    assert.ok(fresh);
  });

  it('runs as a separate process (main.ts) and makes a running VMI for a running VM', async () => {
    await createNamespace(core, ns2);
    const main = fileURLToPath(new URL('./main.ts', import.meta.url));
    const child: ChildProcess = spawn(process.execPath, [main, '--kubeconfig', KUBECONFIG!, '--namespace', ns2, '--log-level', 'warn'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    if (child.pid !== undefined) track(child.pid);
    try {
      const lines = createInterface({ input: child.stdout! });
      const ready = new Promise<void>((resolve, reject) => {
        lines.on('line', (l) => l.includes('"ready":true') && resolve());
        child.once('exit', (code) => reject(new Error(`stand-in exited with ${code} before it was ready`)));
      });
      await ready;
      const client = KubeVirtStandInClient.fromKubeconfig(KUBECONFIG!);
      await client.createVM(buildVM({ namespace: ns2, name: 'cli-vm', running: true, networks: [{ name: 'red', nadName: 'nad-red' }] }));
      const { pod } = await client.waitForVMIRunning(ns2, 'cli-vm', WAIT);
      assert.deepEqual(podNetworkInterfaces(pod), [podInterfaceName('red')]);
      await client.deleteVM(ns2, 'cli-vm');
      await client.waitForVMGone(ns2, 'cli-vm', WAIT);
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
    }
  });
});
