// The lifecycle rows of spec §5 with REAL KubeVirt: virt-controller v1.9.0 (built from source by
// e2e/kubevirt/build.sh) turns VMs into VMIs and launcher pods, stops, starts, deletes, migrates and hot-plugs; the
// node stand-in (node-standin.ts, test infrastructure) does only the kubelet's, Multus's, the IPAM plugin's and
// virt-handler's part. The controller under test is the built CLI with its launcher-pod webhook registered by URL.
// Assertions are on the claims and on the annotations of the launcher pods virt-controller itself created.
//
//   npm run test:prepare          # builds the control plane and virt-controller (cached)
//   npm run build && node_modules/.bin/node --test --test-concurrency=1 e2e/kubevirt/lifecycle.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { MULTUS_DEFAULT_NETWORK_ANNOTATION, MULTUS_NETWORKS_ANNOTATION } from '../../src/claims/constants.ts';
import { assertClaim, CLAIM_FINALIZER, deletedRv, expectedPodInterface, finalizerReleaseRv, nadConfig } from '../suite/fixtures.ts';
import { kubeConfigFrom, paths, WatchLog, type IPAMClaim, type KubeObject } from '../suite/kube.ts';
import { EVENTUALLY_MS, waitFor, World } from './world.ts';

const world = new World();
const CASE_TIMEOUT_MS = 240_000;

interface Meta {
  name: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  deletionTimestamp?: string;
  ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[];
}
interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: Meta;
}
interface Network {
  name: string;
  pod?: object;
  multus?: { networkName: string; default?: boolean };
}
interface Iface {
  name: string;
  bridge?: object;
  masquerade?: object;
  binding?: { name: string };
  state?: string;
}
interface Vmi extends Obj {
  spec: { networks?: Network[]; domain: { devices: { interfaces?: Iface[] } } };
  status?: { phase?: string; nodeName?: string; activePods?: Record<string, string>; interfaces?: { name?: string; infoSource?: string; podInterfaceName?: string }[]; migrationState?: { completed?: boolean; targetPod?: string } };
}
interface Vm extends Obj {
  spec: { runStrategy?: string; template: { spec: Vmi['spec'] } };
}
interface Pod extends Obj {
  spec: { nodeName?: string };
  status?: { phase?: string };
}
interface Element {
  name: string;
  namespace?: string;
  interface?: string;
  'ipam-claim-reference'?: string;
}

// -- objects ------------------------------------------------------------------------------------------------------

async function persistentNad(ns: string, name: string, network: string, extra: { role?: string; topology?: string } = {}): Promise<void> {
  await world.api.create(paths.nads(ns), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace: ns },
    spec: { config: nadConfig(ns, name, { network, ...extra }) },
  });
}

interface VmOptions {
  /** Secondary networks: logical name → NAD name. */
  secondary?: Record<string, string>;
  /** The pod network, with this interface (default: none). */
  pod?: Iface;
  /** No networks and no interfaces at all (KubeVirt's default network applies). */
  bare?: boolean;
  running?: boolean;
}

function vmSpec(o: VmOptions): Vmi['spec'] & Record<string, unknown> {
  const secondary = Object.entries(o.secondary ?? {});
  const networks: Network[] = [...(o.pod ? [{ name: o.pod.name, pod: {} }] : []), ...secondary.map(([name, nad]) => ({ name, multus: { networkName: nad } }))];
  const interfaces: Iface[] = [...(o.pod ? [o.pod] : []), ...secondary.map(([name]) => ({ name, bridge: {} }))];
  return {
    domain: { devices: o.bare ? {} : { interfaces }, resources: { requests: { memory: '128Mi' } } },
    ...(o.bare ? {} : { networks }),
    terminationGracePeriodSeconds: 0,
  } as Vmi['spec'] & Record<string, unknown>;
}

async function createVM(ns: string, name: string, o: VmOptions): Promise<Vm> {
  return world.api.create<Vm>(paths.vms(ns), {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: ns },
    spec: { runStrategy: o.running === false ? 'Halted' : 'Always', template: { metadata: { labels: { app: name } }, spec: vmSpec(o) } },
  });
}

async function setRunStrategy(ns: string, name: string, runStrategy: 'Always' | 'Halted'): Promise<void> {
  await world.api.mergePatch(paths.vms(ns, name), { spec: { runStrategy } });
}

// -- reads and waits ----------------------------------------------------------------------------------------------

const controlledBy = (o: Obj, uid: string | undefined) => o.metadata.ownerReferences?.some((r) => r.controller && r.uid === uid) ?? false;

async function launcherPods(ns: string, vmi: Vmi): Promise<Pod[]> {
  const pods = (await world.api.list<Pod>(`${paths.pods(ns)}?labelSelector=kubevirt.io%3Dvirt-launcher`)).items;
  return pods.filter((p) => controlledBy(p, vmi.metadata.uid));
}

/** The VMI once virt-controller and the node stand-in have it Running, with its current (running) launcher pod. */
async function waitRunning(ns: string, name: string, pred: (vmi: Vmi, pod: Pod) => boolean = () => true): Promise<{ vmi: Vmi; pod: Pod }> {
  return waitFor(
    `VMI ${ns}/${name} Running in a launcher pod`,
    async () => {
      const vmi = await world.api.get<Vmi>(paths.vmis(ns, name));
      if (!vmi || vmi.status?.phase !== 'Running' || vmi.metadata.deletionTimestamp) return undefined;
      const pod = (await launcherPods(ns, vmi)).find((p) => p.spec.nodeName === vmi.status?.nodeName && p.status?.phase === 'Running' && !p.metadata.deletionTimestamp);
      return pod && pred(vmi, pod) ? { vmi, pod } : undefined;
    },
    { timeoutMs: EVENTUALLY_MS, intervalMs: 200 },
  );
}

async function waitGone(what: string, path: string): Promise<void> {
  await waitFor(`${what} to be gone`, async () => (await world.api.get(path)) === undefined, { timeoutMs: EVENTUALLY_MS, intervalMs: 200 });
}

async function waitClaims(ns: string, names: string[], timeoutMs = EVENTUALLY_MS): Promise<Map<string, IPAMClaim>> {
  return waitFor(
    `IPAMClaims ${names.join(', ')} in ${ns}`,
    async () => {
      const claims = new Map((await world.api.claims(ns)).map((c) => [c.metadata.name, c]));
      return names.every((n) => claims.get(n) && !claims.get(n)!.metadata.deletionTimestamp) ? claims : undefined;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

function elements(pod: Pod, annotation = MULTUS_NETWORKS_ANNOTATION): Element[] {
  const text = pod.metadata.annotations?.[annotation];
  return text ? (JSON.parse(text) as Element[]) : [];
}

/** Each logical network's element in the pod's networks annotation (found by KubeVirt's pod interface name) names `claim`. */
function assertReferences(pod: Pod, expected: Record<string, string | undefined>): void {
  const els = elements(pod);
  for (const [network, claim] of Object.entries(expected)) {
    const el = els.find((e) => e.interface === expectedPodInterface(network));
    assert.ok(el, `launcher pod ${pod.metadata.name} has an element for network ${network}: ${pod.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION]}`);
    assert.equal(el['ipam-claim-reference'], claim, `launcher pod ${pod.metadata.name}, network ${network}: ipam-claim-reference`);
  }
}

/** Records every change of a collection from now on (stopped when the case ends). */
async function record<T extends KubeObject>(t: TestContext, path: string): Promise<WatchLog<T>> {
  const log = await WatchLog.start<T>(kubeConfigFrom(world.cp.kubeconfigPath), world.api, path);
  t.after(() => log.stop());
  return log;
}

/** The launcher pod names the primary network's claim to OVN-Kubernetes (spec §8: the default-network element). */
function assertPrimaryReference(pod: Pod, claim: string): void {
  const els = elements(pod, MULTUS_DEFAULT_NETWORK_ANNOTATION);
  assert.equal(els.length, 1, `launcher pod ${pod.metadata.name}: one element in ${MULTUS_DEFAULT_NETWORK_ANNOTATION}: ${pod.metadata.annotations?.[MULTUS_DEFAULT_NETWORK_ANNOTATION]}`);
  assert.equal(els[0]!['ipam-claim-reference'], claim, `launcher pod ${pod.metadata.name}: the default-network element refers to ${claim}`);
}

const owner = (o: Obj, kind: 'VirtualMachine' | 'VirtualMachineInstance') => ({ kind, name: o.metadata.name, uid: o.metadata.uid! });

/** A case: fresh namespace, the namespace's state attached on failure. */
function kvCase(name: string, fn: (ns: string, t: TestContext) => Promise<void>, slug: string, opts: { todo?: string } = {}): void {
  it(name, { timeout: CASE_TIMEOUT_MS, ...opts }, async (t) => {
    const ns = await world.namespace(slug);
    const t0 = Date.now();
    try {
      await fn(ns, t);
    } catch (err) {
      if (!opts.todo) world.failed = true;
      t.diagnostic(await world.describe(ns).catch((e: unknown) => `cannot describe ${ns}: ${String(e)}`));
      throw err;
    } finally {
      t.diagnostic(`${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  });
}

// -- the rows -----------------------------------------------------------------------------------------------------

describe('real KubeVirt (virt-controller v1.9.0)', { timeout: 1_500_000 }, () => {
  before(async () => {
    try {
      await world.setUp();
    } catch (err) {
      world.failed = true;
      throw err;
    }
  }, { timeout: 240_000 });
  after(() => world.tearDown(), { timeout: 60_000 });

  kvCase('create VM (running): claims for the persistent networks; the launcher pod virt-controller creates refers to them', async (ns, t) => {
    await persistentNad(ns, 'nad-red', 'red');
    await persistentNad(ns, 'nad-blue', 'tenant-blue', { topology: 'localnet' });
    await world.api.create(paths.nads(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'nad-plain', namespace: ns },
      spec: { config: nadConfig(ns, 'nad-plain', { network: 'plain', allowPersistentIPs: false }) },
    });
    const vm = await createVM(ns, 'vm1', { secondary: { red: 'nad-red', blue: 'nad-blue', plain: 'nad-plain' } });
    const claims = await waitClaims(ns, ['vm1.red', 'vm1.blue']);
    const { vmi, pod } = await waitRunning(ns, 'vm1');
    assert.deepEqual([...(await world.api.claims(ns)).map((c) => c.metadata.name)].sort(), ['vm1.blue', 'vm1.red']);
    assertClaim(claims.get('vm1.red'), owner(vm, 'VirtualMachine'), 'red', 'red');
    assertClaim(claims.get('vm1.blue'), owner(vm, 'VirtualMachine'), 'blue', 'tenant-blue');
    // the VMI and pod are virt-controller's: owner chain VM → VMI → pod
    assert.ok(controlledBy(vmi, vm.metadata.uid), 'the VMI is controlled by the VM');
    assert.equal(pod.metadata.labels?.['kubevirt.io'], 'virt-launcher');
    assertReferences(pod, { red: 'vm1.red', blue: 'vm1.blue', plain: undefined });
    // KubeVirt rewrites the networks annotation of the RUNNING pod from the VMI spec (GenerateFromActivePod, while
    // status.interfaces does not list the interfaces yet), without the references: the webhook's UPDATE rule is what
    // keeps them (see README.md, "Where KubeVirt differed")
    const update = await world.controller.waitForLog('an UPDATE admission of the running launcher pod', (l) => l['operation'] === 'UPDATE' && l['pod'] === pod.metadata.name && l['namespace'] === ns, { timeoutMs: EVENTUALLY_MS });
    t.diagnostic(`webhook on virt-controller's rewrite: ${JSON.stringify(update)}`);
    assertReferences((await world.api.get<Pod>(paths.pods(ns, pod.metadata.name)))!, { red: 'vm1.red', blue: 'vm1.blue', plain: undefined });
    t.diagnostic(`launcher pod ${pod.metadata.name}: ${pod.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION]}`);
  }, 'create');

  kvCase('VM stopped, then started again: VMI and pod go, the claims stay (finalizer, addresses); the new launcher pod refers to the same claims', async (ns) => {
    await persistentNad(ns, 'nad-red', 'red');
    await createVM(ns, 'vm1', { secondary: { red: 'nad-red' } });
    const { vmi: first, pod: firstPod } = await waitRunning(ns, 'vm1');
    const before = (await waitClaims(ns, ['vm1.red'])).get('vm1.red')!;
    // the node stand-in's IPAM plugin recorded the address in the claim when the pod started
    const ips = await waitFor('status.ips of vm1.red', async () => (await world.api.claim(ns, 'vm1.red'))?.status?.ips, { timeoutMs: EVENTUALLY_MS });

    await setRunStrategy(ns, 'vm1', 'Halted');
    await waitGone('the VMI', paths.vmis(ns, 'vm1'));
    await waitGone('the first launcher pod', paths.pods(ns, firstPod.metadata.name));
    const stopped = await world.api.claim(ns, 'vm1.red');
    assert.ok(stopped && !stopped.metadata.deletionTimestamp, 'the claim stays while the VM is stopped');
    assert.deepEqual(stopped.metadata.finalizers, [CLAIM_FINALIZER]);
    assert.deepEqual(stopped.status?.ips, ips, 'the address stays in status.ips');

    await setRunStrategy(ns, 'vm1', 'Always');
    const { vmi, pod } = await waitRunning(ns, 'vm1', (v) => v.metadata.uid !== first.metadata.uid);
    assertReferences(pod, { red: 'vm1.red' });
    const after = await world.api.claim(ns, 'vm1.red');
    assert.equal(after?.metadata.uid, before.metadata.uid, 'the same claim object');
    assert.deepEqual(after?.status?.ips, ips, 'the same address');
    assert.notEqual(vmi.metadata.uid, first.metadata.uid, 'a new VMI');
  }, 'stop-start');

  for (const propagationPolicy of ['Background', 'Foreground'] as const) {
    kvCase(`VM deleted (${propagationPolicy.toLowerCase()}): the claims keep their finalizer while the VMI exists; then they go, and so does the VM`, async (ns, t) => {
      await persistentNad(ns, 'nad-red', 'red');
      await createVM(ns, 'vm1', { secondary: { red: 'nad-red' } });
      await waitRunning(ns, 'vm1');
      await waitClaims(ns, ['vm1.red']);
      const claims = await record<IPAMClaim>(t, paths.claims(ns));
      const vmis = await record(t, paths.vmis(ns));
      await world.api.delete(paths.vms(ns, 'vm1'), { propagationPolicy });
      await waitGone('the VM', paths.vms(ns, 'vm1'));
      await waitGone('the claim', paths.claims(ns, 'vm1.red'));
      claims.check();
      vmis.check();
      const vmiGone = deletedRv(vmis, 'vm1');
      const released = finalizerReleaseRv(claims, 'vm1.red');
      assert.ok(vmiGone !== undefined && released !== undefined, `recorded the VMI's deletion (${vmiGone}) and the finalizer's release (${released})`);
      assert.ok(released > vmiGone, `the finalizer went (rv ${released}) only after the VMI was gone (rv ${vmiGone})`);
      if (propagationPolicy === 'Foreground') {
        const marked = claims.of('vm1.red').find((e) => e.obj.metadata.deletionTimestamp && e.obj.metadata.finalizers?.includes(CLAIM_FINALIZER));
        assert.ok(marked, 'the garbage collector marked the claim for deletion while our finalizer held it');
        assert.ok(marked.rv < vmiGone, 'the claim was marked while the VMI still existed');
      }
    }, `delete-${propagationPolicy.toLowerCase()}`);
  }

  kvCase('standalone VMI: the claim is owned by the VMI; it is released once the VMI is terminating with no launcher pod', async (ns, t) => {
    await persistentNad(ns, 'nad-red', 'red');
    const created = await world.api.create<Vmi>(paths.vmis(ns), {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'solo', namespace: ns },
      spec: vmSpec({ secondary: { red: 'nad-red' } }),
    });
    const claims = await waitClaims(ns, ['solo.red']);
    assertClaim(claims.get('solo.red'), owner(created, 'VirtualMachineInstance'), 'red', 'red');
    const { pod } = await waitRunning(ns, 'solo');
    assertReferences(pod, { red: 'solo.red' });
    const claimLog = await record<IPAMClaim>(t, paths.claims(ns));
    const podLog = await record(t, paths.pods(ns));
    await world.api.delete(paths.vmis(ns, 'solo'));
    await waitGone('the VMI', paths.vmis(ns, 'solo'));
    await waitGone('the claim', paths.claims(ns, 'solo.red'));
    claimLog.check();
    podLog.check();
    const podGone = deletedRv(podLog, pod.metadata.name);
    const released = finalizerReleaseRv(claimLog, 'solo.red');
    assert.ok(podGone !== undefined && released !== undefined && released > podGone, `the finalizer went (rv ${released}) after the launcher pod was gone (rv ${podGone})`);
  }, 'standalone');

  kvCase('live migration (VirtualMachineInstanceMigration): the target launcher pod virt-controller creates refers to the same claims; the claims are not touched', async (ns) => {
    await persistentNad(ns, 'nad-red', 'red');
    await createVM(ns, 'vm1', { secondary: { red: 'nad-red' } });
    const { vmi, pod: source } = await waitRunning(ns, 'vm1');
    const claim = (await waitClaims(ns, ['vm1.red'])).get('vm1.red')!;
    const settled = await waitFor('the IPAM plugin to record the address', async () => {
      const c = await world.api.claim(ns, 'vm1.red');
      return c?.status?.ips?.length ? c : undefined;
    }, { timeoutMs: EVENTUALLY_MS });
    const migration = await world.api.create<Obj>(`/apis/kubevirt.io/v1/namespaces/${ns}/virtualmachineinstancemigrations`, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstanceMigration',
      metadata: { name: 'mig1', namespace: ns },
      spec: { vmiName: 'vm1' },
    });
    const target = await waitFor('the migration target pod', async () =>
      (await launcherPods(ns, vmi)).find((p) => p.metadata.labels?.['kubevirt.io/migrationJobUID'] === migration.metadata.uid), { timeoutMs: EVENTUALLY_MS });
    assertReferences(target, { red: 'vm1.red' });
    const done = await waitFor('the migration to succeed', async () => {
      const m = await world.api.get<Obj & { status?: { phase?: string } }>(`/apis/kubevirt.io/v1/namespaces/${ns}/virtualmachineinstancemigrations/mig1`);
      return m?.status?.phase === 'Succeeded' ? m : m?.status?.phase === 'Failed' ? false : undefined;
    }, { timeoutMs: EVENTUALLY_MS });
    assert.ok(done);
    const { pod: now } = await waitRunning(ns, 'vm1', (v) => v.status?.nodeName !== source.spec.nodeName);
    assert.equal(now.metadata.name, target.metadata.name, 'the VMI now runs in the target pod');
    // KubeVirt keeps the finished source pod (Completed) until the VMI goes, and lists it in activePods
    const sourceAfter = await world.api.get<Pod>(paths.pods(ns, source.metadata.name));
    assert.equal(sourceAfter?.status?.phase, 'Succeeded', 'the source launcher pod stays, completed');
    const vmiAfter = await world.api.get<Vmi>(paths.vmis(ns, 'vm1'));
    assert.deepEqual(Object.keys(vmiAfter?.status?.activePods ?? {}).sort(), [source.metadata.uid!, target.metadata.uid!].sort(), 'activePods lists both pods');
    const after = await world.api.claim(ns, 'vm1.red');
    assert.equal(after?.metadata.uid, claim.metadata.uid);
    assert.equal(after?.metadata.resourceVersion, settled.metadata.resourceVersion, 'the claim was not written during the migration');
  }, 'migration');

  kvCase('hotplug an interface, then hot-unplug another (LiveUpdate): a claim appears for the new one; the unplugged one\'s claim goes once it left the VMI', async (ns, t) => {
    await persistentNad(ns, 'nad-red', 'red');
    await persistentNad(ns, 'nad-blue', 'blue');
    await createVM(ns, 'vm1', { secondary: { red: 'nad-red' } });
    const { vmi } = await waitRunning(ns, 'vm1');
    const red = (await waitClaims(ns, ['vm1.red'])).get('vm1.red')!;

    // hotplug: add blue to the VM template; virt-controller copies it to the running VMI (LiveUpdate)
    const vm = (await world.api.get<Vm>(paths.vms(ns, 'vm1')))!;
    const spec = vm.spec.template.spec;
    await world.api.mergePatch(paths.vms(ns, 'vm1'), {
      spec: { template: { spec: { networks: [...(spec.networks ?? []), { name: 'blue', multus: { networkName: 'nad-blue' } }], domain: { devices: { interfaces: [...(spec.domain.devices.interfaces ?? []), { name: 'blue', bridge: {} }] } } } } },
    });
    const blue = (await waitClaims(ns, ['vm1.blue'])).get('vm1.blue')!;
    assertClaim(blue, owner(vm, 'VirtualMachine'), 'blue', 'blue');
    // without Multus's dynamic networks controller, the interface reaches the guest through a migration to a pod
    // that has it (virt-controller marks the VMI MigrationRequired after 15 s; the workload updater migrates)
    const { pod: withBlue } = await waitRunning(ns, 'vm1', (_v, p) => elements(p).some((e) => e.interface === expectedPodInterface('blue')) && p.metadata.labels?.['kubevirt.io/migrationJobUID'] !== undefined);
    assertReferences(withBlue, { red: 'vm1.red', blue: 'vm1.blue' });
    assert.equal((await world.api.claim(ns, 'vm1.red'))?.metadata.uid, red.metadata.uid, 'the existing claim is kept');
    t.diagnostic(`after hotplug: VMI ${vmi.metadata.name} in ${withBlue.metadata.name}: ${withBlue.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION]}`);

    // hot-unplug red: state absent on the VM template
    const vm2 = (await world.api.get<Vm>(paths.vms(ns, 'vm1')))!;
    const ifaces = (vm2.spec.template.spec.domain.devices.interfaces ?? []).map((i) => (i.name === 'red' ? { ...i, state: 'absent' } : i));
    await world.api.mergePatch(paths.vms(ns, 'vm1'), { spec: { template: { spec: { domain: { devices: { interfaces: ifaces } } } } } });
    await waitFor('red to leave the VMI spec', async () => {
      const v = await world.api.get<Vmi>(paths.vmis(ns, 'vm1'));
      return v && !(v.spec.networks ?? []).some((n) => n.name === 'red') ? v : undefined;
    }, { timeoutMs: 2 * EVENTUALLY_MS });
    await waitGone('the claim of the unplugged interface', paths.claims(ns, 'vm1.red'));
    const left = await world.api.claim(ns, 'vm1.blue');
    assert.equal(left?.metadata.uid, blue.metadata.uid, 'the other claim stays');
  }, 'hotplug');

  kvCase('primary user-defined network, template with networks (pod network, l2bridge binding): a claim for the pod network; the launcher pod refers to it', async (ns, t) => {
    await persistentNad(ns, 'primary', 'tenant-primary', { role: 'primary' });
    const vm = await createVM(ns, 'vm1', { pod: { name: 'default', binding: { name: 'l2bridge' } } });
    const claim = (await waitClaims(ns, ['vm1.default'])).get('vm1.default')!;
    assert.equal(claim.spec.network, 'tenant-primary');
    assert.deepEqual(claim.metadata.ownerReferences?.map((r) => r.uid), [vm.metadata.uid]);
    const { pod } = await waitRunning(ns, 'vm1');
    assertPrimaryReference(pod, 'vm1.default');
    t.diagnostic(`launcher pod annotations: ${JSON.stringify(pod.metadata.annotations)}`);
  }, 'udn-template');

  // TODO until issue 11 lands: the controller decides from the VM template, which has no networks here, while
  // virt-controller gives the VMI (and so the launcher pod, which the webhook reads) the pod network `default`: no
  // claim is ever made. Runs as a todo, so it reports the state without failing the file.
  kvCase('primary user-defined network, template with no networks and no interfaces: KubeVirt gives the VMI the pod network `default`; a claim for it; the launcher pod refers to it', async (ns, t) => {
    await persistentNad(ns, 'primary', 'tenant-primary', { role: 'primary' });
    await createVM(ns, 'vm1', { bare: true });
    const vmi = await waitFor('the VMI', () => world.api.get<Vmi>(paths.vmis(ns, 'vm1')), { timeoutMs: EVENTUALLY_MS });
    // what virt-controller put on the VMI (no virt-api here: this is the VM controller's own defaulting)
    t.diagnostic(`VMI networks: ${JSON.stringify(vmi.spec.networks)}; interfaces: ${JSON.stringify(vmi.spec.domain.devices.interfaces)}`);
    assert.deepEqual(vmi.spec.networks, [{ name: 'default', pod: {} }]);
    // shorter than EVENTUALLY_MS while this is a todo (every other claim appears within a second here)
    const claim = (await waitClaims(ns, ['vm1.default'], 15_000)).get('vm1.default')!;
    assert.equal(claim.spec.network, 'tenant-primary');
    const { pod } = await waitRunning(ns, 'vm1');
    assertPrimaryReference(pod, 'vm1.default');
  }, 'udn-bare', { todo: 'issue 11: the controller does not apply KubeVirt\'s default pod network to a template without networks (no claim vm1.default)' });
});
