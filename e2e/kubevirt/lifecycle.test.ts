// The lifecycle rows of spec §5 with REAL KubeVirt: virt-controller v1.9.0 (built from source by
// e2e/kubevirt/build.sh) turns VMs into VMIs and launcher pods, stops, starts, deletes, migrates and hot-plugs; REAL
// OVN-Kubernetes (its cluster manager, v1.3.0, e2e/ovn-kubernetes) hands out the addresses of the OVN-K networks and
// fills the claims; the node stand-in (node-standin.ts, test infrastructure) does only the kubelet's, Multus's and
// virt-handler's part. The controller under test is the built CLI with its launcher-pod webhook registered by URL.
// Assertions are on the claims (their addresses as OVN-K wrote them) and on the annotations of the launcher pods
// virt-controller itself created (OVN-K's k8s.ovn.org/pod-networks among them).
//
//   npm run test:prepare          # builds the control plane, virt-controller and ovnkube (cached)
//   npm run build && node_modules/.bin/node --test --test-concurrency=1 e2e/kubevirt/lifecycle.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, type TestContext } from 'node:test';
import type { V1ObjectMeta, V1Pod } from '@kubernetes/client-node';
import {
  ADDRESSES_ANNOTATION,
  MULTUS_DEFAULT_NETWORK_ANNOTATION,
  MULTUS_NETWORKS_ANNOTATION,
  OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION,
} from '../../src/claims/constants.ts';
import { CLAIM_FINALIZER, createPersistentNad, deletedRv, expectedPodInterface, firstRv, nadConfig, waitForClaims } from '../suite/fixtures.ts';
import { paths, WatchLog, type CoreEvent, type IPAMClaim, type KubeObject } from '../suite/kube.ts';
import { OVN_PRIMARY_UDN_NAMESPACE_LABEL, ovnPodNetworks, type OvnPodNetwork } from '../ovn-kubernetes/cluster-manager.ts';
import type { VmInterface } from '../../src/kube/types.ts';
import { setGateInCR } from './kubevirt.ts';
import { buildVM, type Vm, type Vmi } from './launcher-fixture.ts';
import { assertPodReferences, ipsAllocated, podElements, statusOutput, waitForClaim, waitForEvents } from './flows.ts';
import { EVENTUALLY_MS, eventually, World, worldCase } from './world.ts';

const world = new World({ ovnKubernetes: true });
/** How the waits of VirtCtl look here: as `eventually` does. */
const WAIT = { timeoutMs: EVENTUALLY_MS, intervalMs: 200 };

/** A pod read back from the API server: it has a name. */
type Pod = V1Pod & { metadata: V1ObjectMeta & { name: string } };

// -- objects ------------------------------------------------------------------------------------------------------

interface VmOptions {
  /** Secondary networks: logical name → NAD name. */
  secondary?: Record<string, string>;
  /** The pod network, with this interface (default: none). */
  pod?: VmInterface;
  /** No networks and no interfaces at all (KubeVirt's default network applies). */
  bare?: boolean;
  /** Annotations of the VM template (virt-controller copies them to the VMI). */
  annotations?: Record<string, string>;
}

function createVM(ns: string, name: string, o: VmOptions): Promise<Vm> {
  const networks = Object.entries(o.secondary ?? {}).map(([network, nadName]) => ({ name: network, nadName }));
  return world.kv.createVM(
    buildVM({ namespace: ns, name, podNetwork: o.pod ?? false, networks, bare: o.bare, annotations: o.annotations, labels: { app: name } }),
  );
}

/** Starts VM vm1 again and waits until a new VMI (not `first`) runs in its launcher pod. */
async function startVm1(ns: string, first: Vmi): Promise<{ vmi: Vmi; pod: Pod }> {
  await world.kv.startVM(ns, 'vm1', { wait: false });
  return waitRunning(ns, 'vm1', (v) => v.metadata.uid !== first.metadata.uid);
}

/** Stops VM vm1 and waits until its VMI and its launcher pod `pod` are gone. */
async function stopVm1(ns: string, pod: Pod): Promise<void> {
  await world.kv.stopVM(ns, 'vm1', WAIT);
  await waitGone('the launcher pod', paths.pods(ns, pod.metadata.name));
}

// -- reads and waits ----------------------------------------------------------------------------------------------

/** The VMI once virt-controller and the node stand-in have it Running (and settled), with its current launcher pod. */
async function waitRunning(ns: string, name: string, pred: (vmi: Vmi, pod: V1Pod) => boolean = () => true): Promise<{ vmi: Vmi; pod: Pod }> {
  return (await world.kv.waitForVMIRunning(ns, name, { ...WAIT, pred })) as { vmi: Vmi; pod: Pod };
}

async function waitGone(what: string, path: string): Promise<void> {
  await eventually(`${what} to be gone`, async () => (await world.api.get(path)) === undefined);
}

/** Waits for an Event with `reason` (and a message matching `message`) about the object `uid`; returns it. */
async function waitForEvent(ns: string, uid: string | undefined, reason: string, what: string, message = /(?:)/): Promise<CoreEvent> {
  const match = (e: CoreEvent) => e.reason === reason && e.involvedObject?.uid === uid && message.test(e.message ?? '');
  return (await waitForEvents(world.api, ns, what, match, { timeoutMs: EVENTUALLY_MS }))[0]!;
}

/** Records every change of a collection from now on (stopped when the case ends). */
async function record<T extends KubeObject>(t: TestContext, path: string): Promise<WatchLog<T>> {
  const log = await WatchLog.start<T>(world.api, path);
  t.after(() => log.stop());
  return log;
}

/**
 * The launcher pod names the primary network's claim to OVN-Kubernetes (spec §8, docs/webhook-behaviour.md): the
 * annotation k8s.ovn.org/primary-udn-ipamclaim, which every OVN-K release reads; a default-network element only
 * where it is needed (IP/MAC requests, none in these VMs), since Multus requires its NAD to exist.
 */
function assertPrimaryReference(pod: Pod, claim: string): void {
  assert.equal(
    pod.metadata.annotations?.[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION],
    claim,
    `launcher pod ${pod.metadata.name}: ${OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION} names ${claim}`,
  );
  assert.deepEqual(
    podElements(pod, MULTUS_DEFAULT_NETWORK_ANNOTATION),
    [],
    `launcher pod ${pod.metadata.name}: no ${MULTUS_DEFAULT_NETWORK_ANNOTATION} element without IP/MAC requests`,
  );
}

/** Starts a migration of `vmi`; resolves with its name and the target pod virt-controller creates. */
async function startMigration(ns: string, vmi: Vmi): Promise<{ migration: string; target: Pod }> {
  const migration = await world.kv.startMigration(ns, vmi.metadata.name);
  const target = await eventually('the migration target pod', async () => (await world.kv.migrationTarget(vmi, migration.metadata.uid!)) as Pod | undefined);
  return { migration: migration.metadata.name, target };
}

// -- addresses, as OVN-Kubernetes' cluster manager hands them out (world.ts) --------------------------------------

/**
 * A layer2 network of its own on a /30: two usable addresses (OVN-K's allocator keeps the network and broadcast
 * addresses out, and a layer2 secondary network reserves no gateway). A third claimant then finds the range full,
 * which is how a case sees that an address is still held, rather than by waiting for something not to happen. Its
 * own network name gives it a pool no other case draws from (the allocator is per network, across namespaces). On it:
 * VM vm1 (logical network `t`, NAD `nad-t`, and the networks `also`), running, its claim filled by OVN-K.
 */
async function vm1OnTinyNetwork(ns: string, network: string, subnet: string, also: Record<string, string> = {}) {
  await createPersistentNad(world, ns, 'nad-t', { network, subnets: subnet });
  const vm = await createVM(ns, 'vm1', { secondary: { t: 'nad-t', ...also } });
  const { vmi, pod } = await waitRunning(ns, 'vm1');
  const claim = await allocatedClaim(ns, 'vm1.t');
  return { vm, vmi, pod, claim, ips: claim.status.ips };
}

/** The claim once OVN-K filled it: status.ips, with the condition IPsAllocated True / SuccessfulAllocation. */
async function allocatedClaim(ns: string, name: string, timeoutMs = EVENTUALLY_MS): Promise<IPAMClaim & { status: { ips: string[] } }> {
  const filled = (c: IPAMClaim) => !!c.status?.ips?.length && ipsAllocated(c)?.status === 'True';
  const claim = await waitForClaim(world.api, ns, name, 'filled by OVN-K', filled, timeoutMs);
  assert.equal(ipsAllocated(claim)?.reason, 'SuccessfulAllocation', `${name}: IPsAllocated reason`);
  return claim as IPAMClaim & { status: { ips: string[] } };
}

/** The claim once OVN-K found the network's range full for its pod: IPsAllocated False / SubnetExhausted, no address. */
async function exhaustedClaim(ns: string, name: string): Promise<IPAMClaim> {
  const claim = await waitForClaim(world.api, ns, name, 'found full by OVN-K', (c) => ipsAllocated(c)?.reason === 'SubnetExhausted', EVENTUALLY_MS);
  assert.equal(ipsAllocated(claim)?.status, 'False');
  assert.deepEqual(claim.status?.ips ?? [], [], `${name} holds no address`);
  return claim;
}

/**
 * Shows that `ips`, one of the two addresses of a /30 network (NAD `nad`), is held: a new VM `other` on it gets the
 * other address, and a second new VM `third` finds the range full (the only address left would have been `ips`).
 */
async function assertStillHeld(ns: string, nad: string, ips: string[], what: string): Promise<void> {
  await createVM(ns, 'other', { secondary: { t: nad } });
  const other = await allocatedClaim(ns, 'other.t');
  assert.notDeepEqual(other.status.ips, ips, `${what}: a new VM gets the other address`);
  await createVM(ns, 'third', { secondary: { t: nad } });
  await exhaustedClaim(ns, 'third.t');
}

/** The recorded changes (`name@rv`) of claims other than vm1.t that held `ip`, those before resourceVersion `before`. */
const otherHolders = (claims: WatchLog<IPAMClaim>, ip: string, before = Number.POSITIVE_INFINITY): string[] =>
  claims.events.filter((e) => e.obj.metadata.name !== 'vm1.t' && e.rv < before && e.obj.status?.ips?.includes(ip)).map((e) => `${e.obj.metadata.name}@${e.rv}`);

/** OVN-K's `k8s.ovn.org/pod-networks` entry of the pod for NAD `ns/nad` (read again from the API). */
async function podNetwork(ns: string, podName: string, nad: string): Promise<OvnPodNetwork | undefined> {
  const pod = await world.api.get<Pod>(paths.pods(ns, podName));
  return ovnPodNetworks(pod?.metadata.annotations)[`${ns}/${nad}`];
}

/** `persistent-ips status -n ns` (the table) and `-o json` (its rows), as a person would run them. */
async function statusOf(ns: string): Promise<{
  table: string;
  rows: { vm: string; network: string; claim?: string; ips: string[]; condition?: { status: string; reason?: string }; ownerPod?: string }[];
}> {
  const table = await statusOutput(world.cp.kubeconfigPath, ns);
  return {
    table,
    rows: (JSON.parse(await statusOutput(world.cp.kubeconfigPath, ns, '-o', 'json')) as { items: Awaited<ReturnType<typeof statusOf>>['rows'] }).items,
  };
}

/** OVN-K's entry of the pod's primary network (NAD `ns/nad`), once the cluster manager has written it. */
async function primaryPodNetwork(ns: string, podName: string, nad: string): Promise<OvnPodNetwork> {
  return eventually(`OVN-K's primary-network entry of pod ${ns}/${podName}`, async () => {
    const net = await podNetwork(ns, podName, nad);
    return net?.ip_addresses?.length ? net : undefined;
  });
}

/**
 * Turns the gate off (the controller has seen it), hotplugs network `plain` (NAD `nad-plain`) into VM `vm1`, and
 * returns its running launcher pod once virt-controller has rewritten its annotation with the new element
 * (GenerateFromActivePod), without our references: what the webhook's UPDATE must survive. The caller turns the
 * gate back on.
 */
async function hotplugWithGateOff(ns: string, pod: Pod): Promise<Pod> {
  await setGate(false);
  await world.kv.hotplugInterface(ns, 'vm1', { networkName: 'plain', nadName: 'nad-plain' }, { wait: false });
  return eventually('virt-controller to add the hotplugged element to the running pod', async () => {
    const p = await world.api.get<Pod>(paths.pods(ns, pod.metadata.name));
    return p && podElements(p).some((e) => e.interface === expectedPodInterface('plain')) ? p : undefined;
  });
}

/** Sets the gate in the KubeVirt CR and waits until the controller under test has seen it. */
async function setGate(on: boolean): Promise<void> {
  const from = world.controller.logs.length;
  await setGateInCR(world.api, on);
  await world.controller.waitForLog(`the gate turned ${on ? 'on' : 'off'}`, (l) => l['enabled'] === on && l['gate'] === 'PersistentIPs', {
    from,
    timeoutMs: EVENTUALLY_MS,
  });
}

// -- the rows -----------------------------------------------------------------------------------------------------

describe('real KubeVirt (virt-controller v1.9.0)', { timeout: 1_500_000 }, () => {
  before(
    async () => {
      try {
        await world.setUp();
      } catch (err) {
        world.failed = true;
        throw err;
      }
    },
    { timeout: 240_000 },
  );
  after(() => world.tearDown(), { timeout: 60_000 });

  // The controller reads the VM template the way KubeVirt builds the VMI from it (src/claims/effective-spec.ts): a
  // template with no networks and no interfaces runs with the pod network `default`, which gets its claim.
  worldCase(
    world,
    'primary user-defined network, template with no networks and no interfaces: KubeVirt gives the VMI the pod network `default`; a claim for it; the launcher pod refers to it',
    async ({ namespace, t }) => {
      const ns = await namespace('udn-bare');
      await createPersistentNad(world, ns, 'primary', { network: 'tenant-primary', role: 'primary' });
      await createVM(ns, 'vm1', { bare: true });
      const vmi = await eventually('the VMI', () => world.api.get<Vmi>(paths.vmis(ns, 'vm1')));
      // what virt-controller put on the VMI (no virt-api here: this is the VM controller's own defaulting)
      t.diagnostic(`VMI networks: ${JSON.stringify(vmi.spec!.networks)}; interfaces: ${JSON.stringify(vmi.spec!.domain!.devices!.interfaces)}`);
      assert.deepEqual(vmi.spec!.networks, [{ name: 'default', pod: {} }]);
      const claim = (await waitForClaims(world, ns, ['vm1.default'])).get('vm1.default')!;
      assert.equal(claim.spec.network, 'tenant-primary');
      const { pod } = await waitRunning(ns, 'vm1');
      assertPrimaryReference(pod, 'vm1.default');
    },
  );

  // -- issue 26: the edges (spec §8, last bullets) -------------------------------------------------------------

  worldCase(
    world,
    'kubectl delete vm --cascade=orphan: the running VMI owns the claims again (Event) and keeps its address (issue 26: no new VM gets it), its next launcher pod is admitted, and the claims go once the VMI is gone',
    async ({ namespace, t }) => {
      const ns = await namespace('orphan');
      await createPersistentNad(world, ns, 'nad-blue', { network: 'blue' });
      const { vm, vmi, pod, ips } = await vm1OnTinyNetwork(ns, 'tiny-orphan', '10.201.6.0/30', { blue: 'nad-blue' });
      await waitForClaims(world, ns, ['vm1.blue', 'vm1.t']);
      // Someone (a backup tool, say) made vm1.blue depend on an object of theirs too: that owner stays through it all.
      const keeper = await world.api.create<{ metadata: { uid: string } }>(paths.configMaps(ns), {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'keeper', namespace: ns },
      });
      const keeperRef = { apiVersion: 'v1', kind: 'ConfigMap', name: 'keeper', uid: keeper.metadata.uid };
      await world.api.jsonPatch(paths.claims(ns, 'vm1.blue'), [{ op: 'add', path: '/metadata/ownerReferences/-', value: keeperRef }]);
      await world.kv.deleteVM(ns, 'vm1', { propagationPolicy: 'Orphan' });
      await waitGone('the VM', paths.vms(ns, 'vm1'));
      // the garbage collector orphans the claims (drops the VM's ownerReference) and the controller makes the VMI their
      // owner; a claim deleted here would give the running VM's address back to OVN-K's pool
      const ownedByVmi = (name: string) =>
        eventually(`${name} owned by the VMI, no longer by the VM`, async () => {
          const c = await world.api.claim(ns, name);
          const refs = c?.metadata.ownerReferences ?? [];
          return refs.some((r) => r.uid === vmi.metadata.uid && r.kind === 'VirtualMachineInstance') && !refs.some((r) => r.uid === vm.metadata.uid)
            ? c
            : undefined;
        });
      const adopted = await ownedByVmi('vm1.t');
      assert.deepEqual(adopted.metadata.finalizers, [CLAIM_FINALIZER]);
      const shared = await ownedByVmi('vm1.blue');
      assert.deepEqual(
        shared.metadata.ownerReferences?.map((r) => [r.kind, r.uid, r.controller ?? false]),
        [
          ['ConfigMap', keeper.metadata.uid, false],
          ['VirtualMachineInstance', vmi.metadata.uid, true],
        ],
        'the VMI joins the other owner',
      );
      // The Event is written after the claim's patch: wait for it, as a user reading `kubectl get events` would.
      await waitForEvent(ns, vmi.metadata.uid, 'ClaimAdopted', 'a ClaimAdopted Event on the VMI');
      await assertStillHeld(ns, 'nad-t', ips, 'while the orphaned VMI runs');
      const claim = await world.api.claim(ns, 'vm1.t');
      assert.ok(claim && !claim.metadata.deletionTimestamp, 'the claim stays');
      assert.deepEqual(claim.status?.ips, ips);
      assert.deepEqual((await podNetwork(ns, pod.metadata.name, 'nad-t'))?.ip_addresses, ips, 'the running pod keeps its address');
      // a migration (a node drain would do the same): its target pod must be admitted, with the claim
      const { target } = await startMigration(ns, vmi);
      assertPodReferences(target, { t: 'vm1.t', blue: 'vm1.blue' });
      t.diagnostic(`target pod ${target.metadata.name} admitted with vm1.t and vm1.blue`);
      await world.api.delete(paths.vmis(ns, 'vm1'));
      await waitGone('the VMI', paths.vmis(ns, 'vm1'));
      await waitGone('the claim (released, then removed by garbage collection)', paths.claims(ns, 'vm1.t'));
      // vm1.blue is released, not deleted: its other owner still holds it, and garbage collection removes it with it.
      await eventually('vm1.blue released, still owned by the ConfigMap', async () => {
        const c = await world.api.claim(ns, 'vm1.blue');
        return c && !c.metadata.deletionTimestamp && (c.metadata.finalizers ?? []).length === 0 ? c : undefined;
      });
      await world.api.delete(paths.configMaps(ns, 'keeper'));
      await waitGone('vm1.blue, with its other owner', paths.claims(ns, 'vm1.blue'));
    },
  );

  worldCase(
    world,
    "a copied launcher pod (kubectl debug --copy-to: no owner reference, same labels and annotations) is never pointed at the VM's claim",
    async ({ namespace, t }) => {
      const ns = await namespace('copied-pod');
      await createPersistentNad(world, ns, 'nad-red', { network: 'red' });
      await createVM(ns, 'vm1', { secondary: { red: 'nad-red' } });
      await waitForClaims(world, ns, ['vm1.red']);
      const { pod } = await waitRunning(ns, 'vm1');
      const full = (await world.api.get<Pod & { spec: Record<string, unknown> }>(paths.pods(ns, pod.metadata.name)))!;
      const copy = (name: string, annotations: Record<string, string>) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: ns, labels: full.metadata.labels, annotations },
        spec: { ...full.spec, nodeName: undefined },
      });
      // with the VM's reference copied along: refused
      const refused = await world.api.http.request('POST', paths.pods(ns), copy(`${pod.metadata.name}-copy`, full.metadata.annotations ?? {}));
      assert.equal(refused.status, 403, `the copy carrying vm1.red is refused: ${refused.body.slice(0, 300)}`);
      assert.match(refused.body, /no controller owner reference/);
      // without it: admitted, and not pointed at the claim although kubevirt.io/domain names the VM
      const stripped = JSON.stringify(podElements(full).map(({ 'ipam-claim-reference': _ref, ...rest }) => rest));
      const created = await world.api.create<Pod>(
        paths.pods(ns),
        copy(`${pod.metadata.name}-copy2`, { ...full.metadata.annotations, [MULTUS_NETWORKS_ANNOTATION]: stripped }),
      );
      assertPodReferences(created, { red: undefined });
      t.diagnostic(`copy admitted without a reference: ${created.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION]}`);
      await world.api.delete(paths.pods(ns, created.metadata.name));
    },
  );

  worldCase(
    world,
    'NAD swapped on a running VM (LiveUpdateNADRef, GA in v1.9): the new network gets a claim of its own for the migration target; the old claim is released once the source pod has finished',
    async ({ namespace, t }) => {
      const ns = await namespace('nad-swap');
      await createPersistentNad(world, ns, 'nad-a', { network: 'net-a' });
      await createPersistentNad(world, ns, 'nad-b', { network: 'net-b' });
      await createVM(ns, 'vm1', { secondary: { red: 'nad-a' } });
      const old = (await waitForClaims(world, ns, ['vm1.red'])).get('vm1.red')!;
      const { vmi, pod: source } = await waitRunning(ns, 'vm1');
      assertPodReferences(source, { red: 'vm1.red' });
      const vm = (await world.api.get<Vm>(paths.vms(ns, 'vm1')))!;
      await world.api.mergePatch(paths.vms(ns, 'vm1'), {
        spec: {
          template: {
            spec: { networks: vm.spec!.template!.spec!.networks!.map((n) => (n.name === 'red' ? { name: 'red', multus: { networkName: 'nad-b' } } : n)) },
          },
        },
      });
      // virt-controller updates the VMI's NAD reference and migrates the VM to a pod on the new NAD
      const swapped = await eventually('the claim of the new network', async () =>
        (await world.api.claims(ns)).find((c) => c.spec.network === 'net-b' && !c.metadata.deletionTimestamp),
      );
      assert.notEqual(swapped.metadata.name, 'vm1.red');
      assert.deepEqual(
        swapped.metadata.ownerReferences?.map((r) => r.uid),
        [vm.metadata.uid],
      );
      assert.deepEqual(swapped.metadata.finalizers, [CLAIM_FINALIZER]);
      assert.deepEqual(swapped.spec, { network: 'net-b', interface: expectedPodInterface('red') });
      const { pod: target } = await waitRunning(ns, 'vm1', (_v, p) => p.metadata?.name !== source.metadata.name);
      t.diagnostic(`target pod ${target.metadata.name}: ${target.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION]}`);
      const el = podElements(target).find((e) => e.interface === expectedPodInterface('red'));
      assert.equal(el?.name, 'nad-b', 'the target pod is on the new NAD');
      assert.equal(el?.['ipam-claim-reference'], swapped.metadata.name, "and names the new network's claim");
      // the source pod has finished (KubeVirt keeps it, completed): nothing names the old claim any more
      await waitGone('the claim of the old network', paths.claims(ns, 'vm1.red'));
      assert.equal((await world.api.claim(ns, swapped.metadata.name))?.metadata.uid, swapped.metadata.uid, 'the new claim stays');
      t.diagnostic(`old claim ${old.metadata.uid} released; VMI ${vmi.metadata.name} runs on ${swapped.metadata.name}`);
    },
  );

  // -- issue 27: the addresses OVN-Kubernetes' cluster manager gave (a /30 of its own per case, see vm1OnTinyNetwork) -----

  worldCase(
    world,
    'addresses (OVN-K): stop/start keeps the address OVN-K gave; while the VM is stopped the address stays held (the /30 is full for a third VM); IPsAllocated and ownerPod as OVN-K writes them, shown by `persistent-ips status`',
    async ({ namespace, t }) => {
      const ns = await namespace('addr-stop-start');
      const { vmi: firstVmi, pod: first, claim, ips } = await vm1OnTinyNetwork(ns, 'tiny-stop', '10.201.1.0/30');
      assert.equal(ips.length, 1);
      assert.match(ips[0]!, /^10\.201\.1\.[12]\/30$/, 'an address of the /30');
      const firstNet = await podNetwork(ns, first.metadata.name, 'nad-t');
      assert.deepEqual(firstNet?.ip_addresses, ips, "the launcher pod's k8s.ovn.org/pod-networks has the claim's address");
      assert.equal(claim.status.ownerPod?.name, first.metadata.name, 'ownerPod: the pod OVN-K allocated for');

      await stopVm1(ns, first);
      // no pod names vm1.t now: the stopped VM's address is reserved by its claim alone
      await assertStillHeld(ns, 'nad-t', ips, 'while the VM is stopped');
      assert.deepEqual((await world.api.claim(ns, 'vm1.t'))?.status?.ips, ips, "the stopped VM's claim keeps its address");
      // what `persistent-ips status` shows of it: OVN-K's address, condition and ownerPod, and the VM the range is full for
      const shown = await statusOf(ns);
      t.diagnostic(`persistent-ips status -n ${ns}:\n${shown.table}`);
      const [ip] = ips as [string];
      assert.match(
        shown.table,
        new RegExp(`^vm1\\s+Stopped\\s+t\\s+nad-t\\s+vm1\\.t\\s+${ip.replaceAll('.', '\\.')}\\s+Allocated\\s+VirtualMachine vm1$`, 'm'),
      );
      assert.match(shown.table, /^third\s+\S+\s+t\s+nad-t\s+third\.t\s+-\s+NotAllocated: SubnetExhausted \[\d+\]\s+VirtualMachine third$/m);
      const row = shown.rows.find((r) => r.claim === 'vm1.t');
      assert.deepEqual(
        [row?.ips, row?.condition?.status, row?.condition?.reason, row?.ownerPod],
        [ips, 'True', 'SuccessfulAllocation', first.metadata.name],
        '`status -o json`: address, IPsAllocated and ownerPod as OVN-K wrote them',
      );
      assert.equal(shown.rows.find((r) => r.claim === 'third.t')?.condition?.reason, 'SubnetExhausted');

      const { pod } = await startVm1(ns, firstVmi);
      const net = await podNetwork(ns, pod.metadata.name, 'nad-t');
      assert.deepEqual(net?.ip_addresses, ips, 'the new launcher pod gets the same address');
      assert.equal(net?.mac_address, firstNet?.mac_address, 'and the same MAC');
      const after = await world.api.claim(ns, 'vm1.t');
      assert.deepEqual(after?.status?.ips, ips);
      // OVN-K does not rewrite a filled claim for a later pod: ownerPod still names the first one
      assert.equal(after?.status?.ownerPod?.name, first.metadata.name, 'ownerPod is not rewritten for the new pod');
      assert.equal(ipsAllocated(after)?.status, 'True');
    },
  );

  worldCase(
    world,
    "addresses (OVN-K): live migration: the target pod gets the source pod's address and MAC; once the source pod is deleted the address is still held (the /30 is full for a third VM)",
    async ({ namespace }) => {
      const ns = await namespace('addr-migration');
      const { vmi, pod: source, ips } = await vm1OnTinyNetwork(ns, 'tiny-migration', '10.201.2.0/30');
      const sourceNet = await podNetwork(ns, source.metadata.name, 'nad-t');
      assert.deepEqual(sourceNet?.ip_addresses, ips, "the source pod has the claim's address");

      const { migration, target } = await startMigration(ns, vmi);
      assert.equal(await world.kv.migrationEnd(ns, migration, WAIT), 'Succeeded', 'the migration succeeded');
      const { pod: now } = await waitRunning(ns, 'vm1', (v) => v.status?.nodeName !== source.spec?.nodeName);
      assert.equal(now.metadata.name, target.metadata.name, 'the VMI runs in the target pod');
      const targetNet = await podNetwork(ns, target.metadata.name, 'nad-t');
      assert.deepEqual(targetNet?.ip_addresses, ips, 'the target pod gets the same address');
      assert.equal(targetNet?.mac_address, sourceNet?.mac_address, 'and the same MAC');
      const migrated = await world.api.claim(ns, 'vm1.t');
      assert.deepEqual(migrated?.status?.ips, ips);
      assert.equal(migrated?.status?.ownerPod?.name, source.metadata.name, 'ownerPod stays on the source pod');

      // KubeVirt keeps the completed source pod until the VMI goes; deleting it (a person, or a cleanup of finished
      // pods) must not free the address the guest now uses through the target pod
      await world.api.delete(paths.pods(ns, source.metadata.name));
      await waitGone('the source pod', paths.pods(ns, source.metadata.name));
      await assertStillHeld(ns, 'nad-t', ips, 'once the source pod is gone');
      assert.deepEqual((await world.api.claim(ns, 'vm1.t'))?.status?.ips, ips, 'the claim keeps its address');
      assert.deepEqual((await podNetwork(ns, target.metadata.name, 'nad-t'))?.ip_addresses, ips, 'the running target pod keeps it');
    },
  );

  worldCase(
    world,
    'addresses (OVN-K): VM deleted: its address returns to the pool, and a VM that found the range full gets that address only then',
    async ({ namespace, t }) => {
      const ns = await namespace('addr-delete');
      const { ips } = await vm1OnTinyNetwork(ns, 'tiny-delete', '10.201.3.0/30');
      await createVM(ns, 'other', { secondary: { t: 'nad-t' } });
      const otherIps = (await allocatedClaim(ns, 'other.t')).status.ips;
      assert.notDeepEqual(otherIps, ips);
      const claims = await record<IPAMClaim>(t, paths.claims(ns));
      await createVM(ns, 'late', { secondary: { t: 'nad-t' } });
      await exhaustedClaim(ns, 'late.t');

      await world.api.delete(paths.vms(ns, 'vm1'));
      await waitGone('the claim of the deleted VM', paths.claims(ns, 'vm1.t'));
      // OVN-K retries a pod it could not allocate for every ~30 s: the waiting VM gets the freed address then
      const late = await allocatedClaim(ns, 'late.t', 2 * EVENTUALLY_MS);
      assert.deepEqual(late.status.ips, ips, 'the waiting VM gets the address the deleted VM had');
      const { pod } = await waitRunning(ns, 'late');
      assert.deepEqual((await podNetwork(ns, pod.metadata.name, 'nad-t'))?.ip_addresses, ips, 'its launcher pod has it');
      assert.deepEqual((await world.api.claim(ns, 'other.t'))?.status?.ips, otherIps, 'the other VM keeps its own');
      // the order, from the recorded claim events: the address reached another claim only after the deleted VM's
      // claim was gone
      claims.check();
      const released = deletedRv(claims, 'vm1.t');
      const given = firstRv(claims, 'late.t', (e) => e.obj.status?.ips?.includes(ips[0]!) ?? false);
      assert.ok(
        released !== undefined && given !== undefined && given > released,
        `late.t got ${ips[0]} (rv ${given}) after vm1.t was deleted (rv ${released})`,
      );
      assert.deepEqual(otherHolders(claims, ips[0]!, released), [], 'no other claim held the address before');
    },
  );

  // The edges of issue 26 where OVN-K is the one that would free or hand out again an address a running VM holds.

  worldCase(
    world,
    "addresses (OVN-K), issue 26: a hotplug while the gate is off keeps the running pod's reference, so the end of that pod does not free the address its VM holds",
    async ({ namespace, t }) => {
      const ns = await namespace('addr-gate-off');
      await createPersistentNad(world, ns, 'nad-plain', { network: 'plain', allowPersistentIPs: false });
      const { pod, ips } = await vm1OnTinyNetwork(ns, 'tiny-gate-off', '10.201.4.0/30');
      assertPodReferences(pod, { t: 'vm1.t' });
      let gateOn = false;
      t.after(async () => {
        if (!gateOn) await setGateInCR(world.api, true);
      });
      const rebuilt = await hotplugWithGateOff(ns, pod);
      t.diagnostic(`running pod after the rebuild: ${rebuilt.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION]}`);
      assertPodReferences(rebuilt, { t: 'vm1.t', plain: undefined });
      assert.deepEqual((await podNetwork(ns, pod.metadata.name, 'nad-t'))?.ip_addresses, ips, 'the running pod keeps its address');
      // the pod ends (the VM stops): OVN-K frees the address of a pod whose element names no claim, and keeps the one
      // a claim holds, so the reference the webhook carried over is what keeps the address the VM's
      await stopVm1(ns, pod);
      await setGate(true);
      gateOn = true;
      assert.deepEqual((await world.api.claim(ns, 'vm1.t'))?.status?.ips, ips, 'the claim keeps its address');
      await assertStillHeld(ns, 'nad-t', ips, 'after the pod ended');
    },
  );

  worldCase(
    world,
    'addresses (OVN-K), issue 26: a claim made after its pod runs (NAD made persistent): the running launcher pod is pointed at it (Event) and OVN-K fills it with the address that pod has; the migration target names it and gets that address, and it stays held once the source pod is deleted',
    async ({ namespace, t }) => {
      const ns = await namespace('addr-late-claim');
      const nad = { network: 'tiny-late', subnets: '10.201.5.0/30' };
      await createPersistentNad(world, ns, 'nad-t', { ...nad, allowPersistentIPs: false });
      const vm = await createVM(ns, 'vm1', { secondary: { t: 'nad-t' } });
      const { vmi, pod } = await waitRunning(ns, 'vm1');
      assertPodReferences(pod, { t: undefined });
      const running = await podNetwork(ns, pod.metadata.name, 'nad-t');
      const ips = running?.ip_addresses ?? [];
      assert.equal(ips.length, 1, `OVN-K gave the running pod an address: ${JSON.stringify(running)}`);
      await world.api.mergePatch(paths.nads(ns, 'nad-t'), { spec: { config: nadConfig(ns, 'nad-t', nad) } });
      // our controller makes the claim and points the running pod's element at it; OVN-K then records in the claim the
      // address that pod already has (instead of a new one for the next pod)
      const pointed = await eventually('the running pod to name the claim made after it started', async () => {
        const p = await world.api.get<Pod>(paths.pods(ns, pod.metadata.name));
        return p && podElements(p).find((e) => e.interface === expectedPodInterface('t'))?.['ipam-claim-reference'] === 'vm1.t' ? p : undefined;
      });
      assertPodReferences(pointed, { t: 'vm1.t' });
      const event = await waitForEvent(ns, vm.metadata.uid, 'ClaimAwaitingAddresses', 'an Event on the VM while the claim waits for its address');
      t.diagnostic(`event: ${event.message}`);
      const claim = await allocatedClaim(ns, 'vm1.t');
      assert.deepEqual(claim.status.ips, ips, "the claim is filled with the running pod's address");
      assert.equal(claim.status.ownerPod?.name, pod.metadata.name);
      const { migration, target } = await startMigration(ns, vmi);
      assertPodReferences(target, { t: 'vm1.t' });
      assert.equal(await world.kv.migrationEnd(ns, migration, WAIT), 'Succeeded', 'the migration succeeded');
      const targetNet = await podNetwork(ns, target.metadata.name, 'nad-t');
      assert.deepEqual(targetNet?.ip_addresses, ips, 'the migration target gets the same address');
      assert.equal(targetNet?.mac_address, running?.mac_address, 'and the same MAC');
      await world.api.delete(paths.pods(ns, pod.metadata.name));
      await waitGone('the source pod', paths.pods(ns, pod.metadata.name));
      await assertStillHeld(ns, 'nad-t', ips, 'once the source pod is gone');
      assert.deepEqual((await podNetwork(ns, target.metadata.name, 'nad-t'))?.ip_addresses, ips, 'the running target pod keeps it');
    },
  );

  // The controller under test restarts: what it left behind (claims, references) must carry the VM through, and a
  // restart in a steady state writes nothing.

  worldCase(
    world,
    'addresses (OVN-K): our controller restarts while the VM is stopped and started again: the new launcher pod waits for the webhook (failurePolicy Fail), then gets the same address; the claim is not written across the restart; no other VM gets the address',
    async ({ namespace, t }) => {
      const ns = await namespace('addr-restart');
      const { vmi: firstVmi, pod: first, ips } = await vm1OnTinyNetwork(ns, 'tiny-restart', '10.201.7.0/30');
      const firstNet = await podNetwork(ns, first.metadata.name, 'nad-t');
      assert.deepEqual(firstNet?.ip_addresses, ips);
      const claims = await record<IPAMClaim>(t, paths.claims(ns));
      const settled = (await world.api.claim(ns, 'vm1.t'))!;

      let down = false;
      t.after(async () => {
        if (down) world.controller = await world.startController('kubevirt-e2e-restarted');
      });
      down = true;
      const stopped = await world.controller.stop();
      t.diagnostic(`controller stopped: ${JSON.stringify(stopped)}`);
      await stopVm1(ns, first);
      await world.kv.startVM(ns, 'vm1', { wait: false });
      // virt-controller makes the new VMI, but the API server refuses its launcher pod: the webhook does not answer
      // and its failurePolicy is Fail, so no pod can start without the reference that keeps its address
      const vmi = await eventually('the new VMI', async () => {
        const v = await world.api.get<Vmi>(paths.vmis(ns, 'vm1'));
        return v && v.metadata.uid !== firstVmi.metadata.uid ? v : undefined;
      });
      const refusal = await waitForEvent(
        ns,
        vmi.metadata.uid,
        'FailedCreate',
        'virt-controller to report its launcher pod refused by the unreachable webhook',
        /webhook/i,
      );
      t.diagnostic(`while the controller was down: ${refusal.message}`);
      assert.deepEqual(await world.kv.launcherPodsOf(vmi), [], 'no launcher pod while the webhook is down');

      world.controller = await world.startController('kubevirt-e2e-restarted');
      down = false;
      const { pod } = await waitRunning(ns, 'vm1', (v) => v.metadata.uid === vmi.metadata.uid);
      assertPodReferences(pod, { t: 'vm1.t' });
      const net = await podNetwork(ns, pod.metadata.name, 'nad-t');
      assert.deepEqual(net?.ip_addresses, ips, 'the new launcher pod gets the same address');
      assert.equal(net?.mac_address, firstNet?.mac_address, 'and the same MAC');
      // the restarted controller has listed everything and worked off its queue (the new VMI and pod enqueued vm1): nothing
      // queued, nothing in progress, and it has reconciled
      const idle = async () =>
        (await world.controller.metric('workqueue_depth')) === 0 && (await world.controller.metric('controller_runtime_active_workers')) === 0;
      await eventually('the restarted controller to work off its queue', async () =>
        (await idle()) && (await world.controller.metric('controller_runtime_reconcile_total')) > 0 ? true : undefined,
      );
      const after = (await world.api.claim(ns, 'vm1.t'))!;
      assert.equal(
        after.metadata.resourceVersion,
        settled.metadata.resourceVersion,
        'the claim was not written: not by the stop, the restart, nor the new pod',
      );
      assert.deepEqual(after.status?.ips, ips);
      await assertStillHeld(ns, 'nad-t', ips, 'after the restart');
      claims.check();
      assert.deepEqual(
        claims.of('vm1.t').map((e) => `${e.type}@${e.rv}`),
        [],
        'no event on the claim from before the stop to now',
      );
      assert.deepEqual(otherHolders(claims, ips[0]!), [], 'no other claim ever held the address');
    },
  );

  // Primary user-defined networks: the cluster manager allocates for them with network segmentation on and the
  // namespace labelled k8s.ovn.org/primary-user-defined-network (../ovn-kubernetes/cluster-manager.ts). OVN-K v1.3
  // takes the claim from the default-network element's ipam-claim-reference, else from the legacy annotation
  // k8s.ovn.org/primary-udn-ipamclaim (pkg/util/multi_network.go, GetPodNADToNetworkMappingWithActiveNetwork).
  const udnLabels = { [OVN_PRIMARY_UDN_NAMESPACE_LABEL]: '' };

  worldCase(
    world,
    'addresses (OVN-K): primary user-defined network (layer2, role primary), claim named by the legacy annotation k8s.ovn.org/primary-udn-ipamclaim: OVN-K gives the launcher pod its primary address through the claim; stop/start keeps it',
    async ({ namespace }) => {
      const ns = await namespace('addr-udn-legacy', udnLabels);
      await createPersistentNad(world, ns, 'primary', { network: 'udn-legacy', role: 'primary', subnets: '10.202.1.0/24' });
      const vm = await createVM(ns, 'vm1', { pod: { name: 'default', binding: { name: 'l2bridge' } } });
      const { vmi: firstVmi, pod: first } = await waitRunning(ns, 'vm1');
      assertPrimaryReference(first, 'vm1.default');
      const claim = await allocatedClaim(ns, 'vm1.default');
      assert.equal(claim.spec.network, 'udn-legacy');
      assert.deepEqual(
        claim.metadata.ownerReferences?.map((r) => r.uid),
        [vm.metadata.uid],
      );
      const ips = claim.status.ips;
      assert.equal(ips.length, 1);
      assert.match(ips[0]!, /^10\.202\.1\.\d+\/24$/, 'an address of the primary network');
      const firstNet = await primaryPodNetwork(ns, first.metadata.name, 'primary');
      assert.equal(firstNet.role, 'primary');
      assert.deepEqual(firstNet.ip_addresses, ips, "the launcher pod's primary-network entry has the claim's address");
      assert.equal(claim.status.ownerPod?.name, first.metadata.name);
      // An update that drops the running pod's reference (here by hand) goes through the webhook, which puts it back:
      // OVN-K would otherwise free the claim's address at the pod's deletion.
      const dropped = await world.api.jsonPatch<Pod>(paths.pods(ns, first.metadata.name), [
        { op: 'remove', path: `/metadata/annotations/${OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION.replace('/', '~1')}` },
      ]);
      assert.equal(dropped.metadata.annotations?.[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION], 'vm1.default', 'the reference is carried over');

      await stopVm1(ns, first);
      assert.deepEqual((await world.api.claim(ns, 'vm1.default'))?.status?.ips, ips, "the stopped VM's claim keeps its address");
      const { pod } = await startVm1(ns, firstVmi);
      assertPrimaryReference(pod, 'vm1.default');
      const net = await primaryPodNetwork(ns, pod.metadata.name, 'primary');
      assert.deepEqual(net.ip_addresses, ips, 'the new launcher pod gets the same primary address');
      assert.equal(net.mac_address, firstNet.mac_address, 'and the same MAC');
      assert.equal((await world.api.claim(ns, 'vm1.default'))?.status?.ownerPod?.name, first.metadata.name, 'ownerPod is not rewritten');
    },
  );

  worldCase(
    world,
    'addresses (OVN-K): primary user-defined network, address and MAC asked for: the default-network element names the claim with the requests; OVN-K gives exactly those, records them in the claim, and the VM keeps them across stop/start',
    async ({ namespace }) => {
      const ns = await namespace('addr-udn-element', udnLabels);
      await createPersistentNad(world, ns, 'primary', { network: 'udn-element', role: 'primary', subnets: '10.202.2.0/24' });
      const mac = '02:5e:00:0a:ca:fe';
      const asked = ['10.202.2.77/24'];
      await createVM(ns, 'vm1', {
        pod: { name: 'default', binding: { name: 'l2bridge' }, macAddress: mac },
        annotations: { [ADDRESSES_ANNOTATION]: JSON.stringify({ default: ['10.202.2.77'] }) },
      });
      const { vmi: firstVmi, pod: first } = await waitRunning(ns, 'vm1');
      const expectedElement = { name: 'default', namespace: 'ovn-kubernetes', ips: asked, mac, 'ipam-claim-reference': 'vm1.default' };
      assert.deepEqual(
        podElements(first, MULTUS_DEFAULT_NETWORK_ANNOTATION),
        [expectedElement],
        `launcher pod ${first.metadata.name}: the default-network element`,
      );
      assert.equal(first.metadata.annotations?.[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION], 'vm1.default', 'and the legacy annotation, for older OVN-K releases');
      const claim = await allocatedClaim(ns, 'vm1.default');
      assert.deepEqual(claim.status.ips, asked, 'OVN-K gave the address the element asks for, and recorded it in the claim');
      assert.equal(claim.status.ownerPod?.name, first.metadata.name);
      const firstNet = await primaryPodNetwork(ns, first.metadata.name, 'primary');
      assert.deepEqual(firstNet.ip_addresses, asked);
      assert.equal(firstNet.mac_address, mac, 'and the MAC the element asks for');

      await stopVm1(ns, first);
      const { pod } = await startVm1(ns, firstVmi);
      assert.deepEqual(podElements(pod, MULTUS_DEFAULT_NETWORK_ANNOTATION), [expectedElement]);
      const net = await primaryPodNetwork(ns, pod.metadata.name, 'primary');
      assert.deepEqual(net.ip_addresses, asked, 'the new launcher pod gets the same primary address');
      assert.equal(net.mac_address, mac);
      assert.deepEqual((await world.api.claim(ns, 'vm1.default'))?.status?.ips, asked);
    },
  );
});
