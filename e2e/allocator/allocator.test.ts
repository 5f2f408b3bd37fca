// End to end: the built-in allocator (issue 5, docs/allocator.md) against a real kube-apiserver with the real garbage
// collector, KubeVirt's real virt-controller (the world of e2e/kubevirt: its launcher pods go through the real webhook,
// which the API server calls by URL; the node stand-in starts them with the addresses their elements ask for, as
// static IPAM does), and the controller as a separate process (the built CLI).
//
// ONE world for this file; one namespace and one network (pool) per case, so cases do not depend on each
// other. Run after `npm run build`:
//   node_modules/.bin/node --test --test-reporter=spec e2e/allocator/allocator.test.ts
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import { freePort } from '../harness/index.ts';
import { buildVM, podInterfaceName, type Vm } from '../kubevirt/launcher-fixture.ts';
import { allocatorAnnotations, bridgeNad, ipsAllocated, podElements, statusOutput, waitForClaim, waitForEvents } from '../kubevirt/flows.ts';
import { waitFor } from '../kubevirt/virtctl.ts';
import { World, worldCase } from '../kubevirt/world.ts';
import type { ControllerProcess } from '../local/controller-process.ts';
import { nadConfig } from '../suite/fixtures.ts';
import { type CoreEvent, type IPAMClaim as Claim, paths } from '../suite/kube.ts';

// Written out here, not imported from src/: the test checks the controller against the documented names.
const ALLOCATOR = 'persistent-ips.kubevirt.io/allocator';
const ADDRESSES = 'network.kubevirt.io/addresses';
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const EVENTUALLY_MS = 30_000;
/** How long a case watches for something that must not happen (a write, an admitted pod): many reaction times. */
const QUIET_MS = 3_000;

const world = new World({
  ovnKubernetes: false,
  nodeIpam: 'element',
  controller: false,
  resyncPeriodS: 30,
  onLog: (l) => console.log(`[e2e allocator] ${l}`),
});
let startedAt = Date.now();
let restarts = 0;

// The 200-VM burst is about correctness, not client throttling.
const startAllocatorController = (o: { webhookPort?: number; leaderElect?: boolean } = {}): Promise<ControllerProcess> =>
  world.startController({ name: `allocator-${++restarts}${o.leaderElect ? '-elected' : ''}`, extraArgs: ['--qps', '200', '--burst', '400'], ...o });

/** A bridge + static IPAM NAD that opts into the allocator. */
const allocatorNad = (ns: string, name: string, network: string, subnets: string, exclude?: string): Promise<void> =>
  bridgeNad(world.api, ns, name, network, allocatorAnnotations(subnets, exclude));

/** A VM with one secondary network `data` on `nad`, optionally asking for addresses. */
function createVM(ns: string, name: string, nad: string, o: { addresses?: string[]; running?: boolean } = {}): Promise<Vm> {
  const annotations = o.addresses ? { [ADDRESSES]: JSON.stringify({ data: o.addresses }) } : undefined;
  return world.kv.createVM(buildVM({ namespace: ns, name, running: o.running ?? true, networks: [{ name: 'data', nadName: nad }], annotations }));
}

/** How many claims in `ns` have addresses. */
const withIps = async (ns: string): Promise<number> => (await world.api.claims(ns)).filter((c) => (c.status?.ips?.length ?? 0) > 0).length;

const isAllocated = (c: Claim | undefined, status = 'True'): boolean => ipsAllocated(c)?.status === status;

/** Waits until claim `name` exists and `pred` holds for it (`what`, for the message), and returns it. */
const claimWhen = (ns: string, name: string, what: string, pred: (c: Claim) => boolean = () => true): Promise<Claim> =>
  waitForClaim(world.api, ns, name, what, pred, EVENTUALLY_MS);

/** Waits until the claim's IPsAllocated condition has `status` (and returns the claim). */
const waitForCondition = (ns: string, name: string, status: 'True' | 'False'): Promise<Claim> =>
  claimWhen(ns, name, `with IPsAllocated=${status}`, (c) => isAllocated(c, status));

/** Waits until at least a third of the `n` VMs' claims have addresses; returns how many have. */
const aThirdAllocated = (ns: string, n: number, timeoutMs: number): Promise<number> =>
  waitFor(
    'a third of the burst allocated',
    async () => {
      const k = await withIps(ns);
      return k >= n / 3 && k;
    },
    { timeoutMs, intervalMs: 20 },
  );

/** Waits until `ns` holds exactly `n` claims, every one allocated, and returns them. */
function waitForAllAllocated(ns: string, n: number, how: string, timeoutMs: number): Promise<Claim[]> {
  const probe = async () => {
    const all = await world.api.claims(ns);
    return all.length === n && all.every((c) => isAllocated(c)) ? all : undefined;
  };
  return waitFor(`${n} claims allocated ${how}`, probe, { timeoutMs, intervalMs: 250 });
}

async function eventsOf(ns: string, reason: string, involved: string): Promise<CoreEvent[]> {
  return (await world.api.list<CoreEvent>(paths.events(ns))).items.filter((e) => e.reason === reason && e.involvedObject.name === involved);
}

/** Waits until at least `min` Events `reason` are on `involved`, and returns them. */
const eventsOn = (ns: string, reason: string, involved: string, min = 1): Promise<CoreEvent[]> =>
  waitForEvents(world.api, ns, `${min} ${reason} Event(s) on ${involved}`, (e) => e.reason === reason && e.involvedObject.name === involved, {
    min,
    timeoutMs: EVENTUALLY_MS,
  });

/** Creates `n` stopped VMs on `nad`, ten at a time, named `vm-<i>` padded to `digits`; `created` counts them. */
async function burstOfVMs(ns: string, nad: string, n: number, digits: number, created = { count: 0 }): Promise<void> {
  for (let i = 0; i < n; i += 10) {
    await Promise.all(
      Array.from({ length: Math.min(10, n - i) }, async (_, k) => {
        await createVM(ns, `vm-${String(i + k).padStart(digits, '0')}`, nad, { running: false });
        created.count++;
      }),
    );
  }
}

/**
 * The addresses static IPAM gave the `data` interface when the pod started: the `ips` of its element as admitted
 * (the node stand-in reports them in network-status, as Multus does). Read there, not from the element as stored
 * now: virt-controller rewrites a running pod's networks annotation without `ips` (e2e/kubevirt/README.md, 1).
 */
function startedWith(pod: V1Pod): unknown {
  dataElement(pod); // the element exists, with its reference
  const statuses = JSON.parse(pod.metadata?.annotations?.['k8s.v1.cni.cncf.io/network-status'] ?? '[]') as { interface?: string; ips?: string[] }[];
  const ifaceStatus = statuses.find((s) => s.interface === podInterfaceName('data'));
  assert.ok(ifaceStatus, `launcher pod ${pod.metadata?.name} started with interface ${podInterfaceName('data')}`);
  return ifaceStatus.ips;
}

/** The launcher pod's element for the `data` network. */
function dataElement(pod: V1Pod): Record<string, unknown> {
  const element = podElements(pod).find((e) => e.interface === podInterfaceName('data'));
  assert.ok(element, `launcher pod ${pod.metadata?.name} has an element for network data: ${pod.metadata?.annotations?.[NETWORKS]}`);
  return element as Record<string, unknown>;
}

describe('built-in allocator end to end (issue 5)', { timeout: 20 * 60_000 }, () => {
  before(
    async () => {
      startedAt = Date.now();
      await world.setUp();
      world.controller = await startAllocatorController();
    },
    { timeout: 300_000 },
  );
  after(() => world.tearDown(), { timeout: 120_000 });

  worldCase(
    world,
    'a VM on an allocator network gets an address in its claim status and in its launcher pod element; status shows it',
    async ({ t, namespace }) => {
      const ns = await namespace('basic');
      await allocatorNad(ns, 'br-static', 'e2e-basic', '10.61.0.0/24', '10.61.0.1');
      await createVM(ns, 'vm1', 'br-static');
      const claim = await waitForCondition(ns, 'vm1.data', 'True');
      assert.deepEqual(claim.status?.ips, ['10.61.0.2/24'], 'lowest free address after the excluded gateway, pool prefix length');
      assert.equal(ipsAllocated(claim)?.reason, 'SuccessfulAllocation');
      const { pod } = await world.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      assert.deepEqual(startedWith(pod), ['10.61.0.2/24'], 'the launcher pod asked static IPAM for the claim address');
      assert.equal(dataElement(pod)['ipam-claim-reference'], 'vm1.data');

      const table = await statusOutput(world.cp.kubeconfigPath, ns);
      t.diagnostic(`persistent-ips status -n ${ns}:\n${table}`);
      assert.match(table, /^VM\s+STATUS\s+NETWORK\s+NAD\s+CLAIM\s+ADDRESSES\s+CONDITION\s+OWNER/m);
      assert.match(table, /vm1\s+\S+\s+data\s+br-static \(allocator\)\s+vm1\.data\s+10\.61\.0\.2\/24\s+Allocated\s+VirtualMachine vm1/);
      const doc = JSON.parse(await statusOutput(world.cp.kubeconfigPath, ns, '-o', 'json', 'vm1')) as {
        items: { vm: string; claim: string; ips: string[]; condition: { reason: string } }[];
      };
      assert.deepEqual(
        doc.items.map((i) => [i.vm, i.claim, i.ips, i.condition.reason]),
        [['vm1', 'vm1.data', ['10.61.0.2/24'], 'SuccessfulAllocation']],
      );
    },
    { timeoutMs: 120_000 },
  );

  worldCase(
    world,
    'a VM running before its NAD opts in: its claim takes the address its pod has, and even before that claim exists no other VM gets that address',
    async ({ namespace }) => {
      const ns = await namespace('running');
      // Not persistent and no allocator yet: the VM starts without a claim, its pod got 10.69.0.2 from some IPAM.
      await bridgeNad(world.api, ns, 'br-static', 'e2e-running');
      await createVM(ns, 'vm1', 'br-static');
      const { pod } = await world.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      const networkStatus = [
        { name: 'ovn-kubernetes', interface: 'eth0', ips: ['10.244.0.9'], default: true },
        { name: `${ns}/br-static`, interface: podInterfaceName('data'), ips: ['10.69.0.2'], mac: '02:00:00:00:00:01' },
      ];
      await world.api.mergePatch(paths.pods(ns, pod.metadata!.name!), {
        metadata: { annotations: { 'k8s.v1.cni.cncf.io/network-status': JSON.stringify(networkStatus) } },
      });
      assert.equal(await world.api.claim(ns, 'vm1.data'), undefined, 'no claim while the NAD is not persistent');
      // vm1's claim cannot be made for now: a hand-made object holds its name (on another network, so the allocator
      // leaves it alone; its label brings vm1 back to the controller when it goes). A stopped VM on the same NAD gets
      // its claim at once.
      await world.api.create(paths.claims(ns), {
        apiVersion: 'k8s.cni.cncf.io/v1alpha1',
        kind: 'IPAMClaim',
        metadata: { name: 'vm1.data', namespace: ns, labels: { 'kubevirt.io/vm': 'vm1' } },
        spec: { network: 'e2e-unrelated', interface: 'net1' },
      });
      await createVM(ns, 'vm2', 'br-static', { running: false });
      // Now the NAD opts in: persistence and the allocator; the lowest free address is the one vm1 has.
      await world.api.mergePatch(paths.nads(ns, 'br-static'), { metadata: { annotations: allocatorAnnotations('10.69.0.0/24', '10.69.0.1') } });
      const vm2 = await waitForCondition(ns, 'vm2.data', 'True');
      assert.deepEqual(vm2.status?.ips, ['10.69.0.3/24'], 'vm2 is not given 10.69.0.2, the address vm1 runs with although no claim records it');

      await world.api.delete(paths.claims(ns, 'vm1.data'));
      const claim = await claimWhen(ns, 'vm1.data', 'of vm1 with its address', (c) => c.spec.network === 'e2e-running' && isAllocated(c));
      assert.deepEqual(claim.status?.ips, ['10.69.0.2/24'], 'the address the running VM has, with the pool prefix');
      assert.match(ipsAllocated(claim)!.message!, /the address the VM has/);
    },
    { timeoutMs: 180_000 },
  );

  worldCase(
    world,
    'stop/start and live migration keep the address: same claim, unwritten, same ips in every new launcher pod',
    async ({ t, namespace }) => {
      const ns = await namespace('keep');
      await allocatorNad(ns, 'br-static', 'e2e-keep', '10.62.0.0/24,fd00:62::/64', '10.62.0.1');
      await createVM(ns, 'vm1', 'br-static');
      const claim = await waitForCondition(ns, 'vm1.data', 'True');
      assert.deepEqual(claim.status?.ips, ['10.62.0.2/24', 'fd00:62::1/64'], 'dual stack: one address per family');
      const first = await world.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      assert.deepEqual(startedWith(first.pod), claim.status?.ips);

      await world.kv.stopVM(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      await world.kv.startVM(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      const restarted = await world.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      assert.notEqual(restarted.pod.metadata?.uid, first.pod.metadata?.uid, 'a new launcher pod');
      assert.deepEqual(startedWith(restarted.pod), claim.status?.ips, 'the restarted VM keeps its addresses');

      const migration = await world.kv.migrate(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      const migrated = await world.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      assert.equal(migrated.pod.metadata?.name, migration.targetPod);
      assert.deepEqual(startedWith(migrated.pod), claim.status?.ips, 'the migration target keeps the addresses');

      const after = await world.api.claim(ns, 'vm1.data');
      assert.equal(after?.metadata.uid, claim.metadata.uid, 'the same claim object');
      assert.equal(after?.metadata.resourceVersion, claim.metadata.resourceVersion, 'never written since the allocation');
      t.diagnostic(`addresses ${claim.status?.ips?.join(', ')} kept through stop/start and migration`);
    },
    { timeoutMs: 120_000 },
  );

  worldCase(
    world,
    'deleting a VM frees its address for another VM',
    async ({ t, namespace }) => {
      const ns = await namespace('free');
      await allocatorNad(ns, 'br-static', 'e2e-free', '10.63.0.0/24', '10.63.0.1');
      await createVM(ns, 'first', 'br-static', { running: false });
      assert.deepEqual((await waitForCondition(ns, 'first.data', 'True')).status?.ips, ['10.63.0.2/24']);
      await createVM(ns, 'second', 'br-static', { running: false });
      assert.deepEqual((await waitForCondition(ns, 'second.data', 'True')).status?.ips, ['10.63.0.3/24']);

      await world.kv.deleteVM(ns, 'first');
      await waitFor(`IPAMClaim ${ns}/first.data to be gone`, async () => (await world.api.claim(ns, 'first.data')) === undefined, { timeoutMs: EVENTUALLY_MS });
      await createVM(ns, 'third', 'br-static');
      const third = await waitForCondition(ns, 'third.data', 'True');
      assert.deepEqual(third.status?.ips, ['10.63.0.2/24'], 'the freed address is the lowest free one again');
      const { pod } = await world.kv.waitForVMIRunning(ns, 'third', { timeoutMs: EVENTUALLY_MS });
      assert.deepEqual(startedWith(pod), ['10.63.0.2/24']);
      t.diagnostic('10.63.0.2 went from VM first (deleted) to VM third');
    },
    { timeoutMs: 120_000 },
  );

  worldCase(
    world,
    'two VMs asking for the same static address: one gets it, the other is refused with the reason until it is free',
    async ({ t, namespace }) => {
      const ns = await namespace('static');
      await allocatorNad(ns, 'br-static', 'e2e-static', '10.64.0.0/24');
      await createVM(ns, 'vm-a', 'br-static', { addresses: ['10.64.0.50'] });
      const a = await waitForCondition(ns, 'vm-a.data', 'True');
      assert.deepEqual(a.status?.ips, ['10.64.0.50/24'], 'a static request inside the pool is honoured');
      const podA = (await world.kv.waitForVMIRunning(ns, 'vm-a', { timeoutMs: EVENTUALLY_MS })).pod;
      assert.deepEqual(startedWith(podA), ['10.64.0.50/24']);

      const vmB = await createVM(ns, 'vm-b', 'br-static', { addresses: ['10.64.0.50/24'] });
      const b = await waitForCondition(ns, 'vm-b.data', 'False');
      const cond = ipsAllocated(b)!;
      assert.equal(cond.reason, 'IPAddressConflict');
      assert.match(cond.message!, new RegExp(`requested 10\\.64\\.0\\.50 is already held by ${ns}/vm-a\\.data`));
      assert.deepEqual(b.status?.ips ?? [], [], 'no other address handed out instead');
      const events = await eventsOn(ns, 'AddressInUse', 'vm-b');
      assert.equal(events[0]!.involvedObject.uid, vmB.metadata.uid);
      t.diagnostic(`vm-b refused: ${cond.reason}: ${cond.message}`);
      // The webhook keeps vm-b's launcher pod out (KubeVirt retries) rather than start it without its address.
      await sleep(QUIET_MS);
      assert.deepEqual(await world.kv.listLauncherPods(ns, 'vm-b'), [], 'no launcher pod admitted for vm-b');

      await world.kv.deleteVM(ns, 'vm-a');
      const granted = await waitForCondition(ns, 'vm-b.data', 'True');
      assert.deepEqual(granted.status?.ips, ['10.64.0.50/24'], 'once vm-a is gone, vm-b gets the address it asked for');
      const podB = (await world.kv.waitForVMIRunning(ns, 'vm-b', { timeoutMs: EVENTUALLY_MS })).pod;
      assert.deepEqual(startedWith(podB), ['10.64.0.50/24'], "and its launcher pod is admitted on KubeVirt's retry");
    },
    { timeoutMs: 120_000 },
  );

  worldCase(
    world,
    'an invalid pool is reported on the NAD; nothing is allocated, nothing crashes',
    async ({ namespace }) => {
      const ns = await namespace('invalid');
      await allocatorNad(ns, 'br-bad', 'e2e-invalid', '10.65.0.0/33');
      await createVM(ns, 'vm1', 'br-bad', { running: false });
      const events = await eventsOn(ns, 'InvalidAllocatorPool', 'br-bad');
      assert.match(events[0]!.message, /10\.65\.0\.0\/33" has an invalid prefix length/);
      await claimWhen(ns, 'vm1.data', 'to exist');
      await sleep(QUIET_MS);
      assert.equal((await world.api.claim(ns, 'vm1.data'))?.status, undefined, 'no status written');
      assert.equal((await fetch(`http://127.0.0.1:${world.controller.probePort}/healthz`)).status, 200, 'the controller is healthy');
    },
    { timeoutMs: 120_000 },
  );

  worldCase(
    world,
    'an OVN-Kubernetes NAD with the switch is refused: one AllocatorRefused Event per NAD generation, its claim never written by us, no ips on its pod',
    async ({ t, namespace }) => {
      const ns = await namespace('ovn');
      const config = (subnets: string) => nadConfig(ns, 'ovn-l2', { network: 'e2e-ovn', subnets });
      const created = await world.api.create<{ metadata: { uid: string } }>(paths.nads(ns), {
        apiVersion: 'k8s.cni.cncf.io/v1',
        kind: 'NetworkAttachmentDefinition',
        metadata: { name: 'ovn-l2', namespace: ns, annotations: { [ALLOCATOR]: 'true' } },
        spec: { config: config('10.68.0.0/24') },
      });
      const nadUid = created.metadata.uid;
      await createVM(ns, 'vm1', 'ovn-l2');
      const refusedEvents = () => eventsOf(ns, 'AllocatorRefused', 'ovn-l2');
      const [first] = await eventsOn(ns, 'AllocatorRefused', 'ovn-l2');
      assert.equal(first!.involvedObject.kind, 'NetworkAttachmentDefinition');
      assert.equal(first!.involvedObject.uid, nadUid);
      assert.match(first!.message, new RegExp(`^NetworkAttachmentDefinition ${ns}/ovn-l2 \\(generation 1\\) has CNI type "ovn-k8s-cni-overlay"`));
      assert.match(first!.message, /Remove the annotation/);
      t.diagnostic(`AllocatorRefused: ${first!.message}`);

      // The webhook's allocator path does not apply: the pod names its claim, and no addresses of ours.
      const { pod } = await world.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      const element = dataElement(pod);
      assert.equal(element['ipam-claim-reference'], 'vm1.data');
      assert.equal(element['ips'], undefined, 'no ips on an OVN-Kubernetes element');
      assert.deepEqual(startedWith(pod), [], 'nor did the pod start with any');
      const claim = await claimWhen(ns, 'vm1.data', 'to exist');
      assert.equal(claim.status, undefined, 'the allocator wrote no status');

      // Playing OVN-Kubernetes: it records the address. Every pass after that (the claim event, then a full resync)
      // must leave it alone and say nothing new.
      const recorded = await world.api.mergePatch<Claim>(`${paths.claims(ns, 'vm1.data')}/status`, { status: { ips: ['10.68.0.5/24'] } });
      const rv = recorded.metadata.resourceVersion;
      const from = world.controller.logs.length;
      await world.controller.waitForLog('a full allocator resync', (l) => l.msg === 'resync' && l['component'] === 'allocator', { from, timeoutMs: 45_000 });
      await sleep(QUIET_MS);
      const after = await world.api.claim(ns, 'vm1.data');
      assert.equal(after?.metadata.resourceVersion, rv, 'not written since OVN-Kubernetes wrote it (no ips, no condition of ours)');
      assert.deepEqual(after?.status, { ips: ['10.68.0.5/24'] });
      assert.equal((await refusedEvents()).length, 1, 'not posted again by later passes or the resync');

      // An edit of the NAD's spec is a new generation: told once more, once.
      await world.api.mergePatch(paths.nads(ns, 'ovn-l2'), { spec: { config: config('10.68.0.0/23') } });
      const both = await eventsOn(ns, 'AllocatorRefused', 'ovn-l2', 2); // the second, for generation 2
      await sleep(QUIET_MS);
      const generations = (await refusedEvents()).map((e) => /\(generation (\d+)\)/.exec(e.message)?.[1]).sort();
      assert.deepEqual(generations, ['1', '2'], `one Event per generation: ${both.map((e) => e.message).join(' | ')}`);
      assert.equal((await world.api.claim(ns, 'vm1.data'))?.metadata.resourceVersion, rv, 'still not written');
    },
  );

  worldCase(
    world,
    'SIGKILL of the controller during a burst of 200 VM creations: after the restart, 200 distinct addresses',
    async ({ t, namespace }) => {
      const ns = await namespace('burst');
      const N = 200;
      await allocatorNad(ns, 'br-burst', 'e2e-burst', '10.66.0.0/24');
      // VMs that do not run: the claims come from the VMs alone, and no launcher pod is needed.
      const created = { count: 0 };
      const burst = burstOfVMs(ns, 'br-burst', N, 3, created);
      const atKill = await aThirdAllocated(ns, N, 120_000);
      await world.controller.kill();
      const killedAt = { created: created.count, allocated: await withIps(ns) };
      t.diagnostic(`SIGKILL with ${killedAt.created}/${N} VMs created and ${atKill}..${killedAt.allocated} claims allocated`);
      await burst;
      world.controller = await startAllocatorController();
      const claims = await waitForAllAllocated(ns, N, 'after the restart', 120_000);
      const ips = claims.map((c) => c.status!.ips!);
      assert.ok(
        ips.every((l) => l.length === 1),
        'one IPv4 address per claim',
      );
      const addresses = ips.map((l) => l[0]!);
      assert.equal(new Set(addresses).size, N, 'all distinct');
      const expected = Array.from({ length: N }, (_, i) => `10.66.0.${i + 1}/24`).sort();
      assert.deepEqual([...addresses].sort(), expected, 'exactly the lowest 200 addresses: none lost to the crash, none twice');
      t.diagnostic(`${N} claims, ${new Set(addresses).size} distinct addresses after SIGKILL and restart`);

      // The commit point is a conditional write: the API server refuses a status write made against an older
      // resourceVersion (what keeps a controller that chose from a stale view from recording its choice).
      const stale = claims[0]!;
      const fresh = await world.api.claim(ns, stale.metadata.name);
      const older = String(Number(fresh!.metadata.resourceVersion) - 1);
      const res = await world.cp.http.request(
        'PATCH',
        `${paths.claims(ns, stale.metadata.name)}/status`,
        { metadata: { resourceVersion: older }, status: { ips: ['10.66.0.250/24'] } },
        'application/merge-patch+json',
      );
      assert.equal(res.status, 409, `a status merge patch with a stale resourceVersion is a conflict: ${res.body.slice(0, 200)}`);
    },
    { timeoutMs: 300_000 },
  );

  worldCase(
    world,
    'leader change during a burst: the new leader allocates the rest, no address twice',
    async ({ t, namespace }) => {
      const ns = await namespace('leader');
      const N = 60;
      await allocatorNad(ns, 'br-leader', 'e2e-leader', '10.67.0.0/24');
      await world.controller.stop();
      const first = await startAllocatorController({ leaderElect: true });
      world.controller = first;
      await first.waitForLog('leadership', (l) => l.msg === 'starting allocator workers');
      const standby = await startAllocatorController({ leaderElect: true, webhookPort: await freePort() });
      const burst = burstOfVMs(ns, 'br-leader', N, 2);
      await aThirdAllocated(ns, N, 60_000);
      await first.kill();
      t.diagnostic(`leader killed with ${await withIps(ns)}/${N} claims allocated`);
      await burst;
      await standby.waitForLog('leadership', (l) => l.msg === 'starting allocator workers', { timeoutMs: 60_000 });
      const barrier = standby.logs.find((l) => l.msg === 'read every claim before allocating');
      t.diagnostic(`new leader: ${JSON.stringify({ claims: barrier?.['claims'], newerThanCache: barrier?.['newerThanCache'] })}`);
      const claims = await waitForAllAllocated(ns, N, 'by the new leader', 90_000);
      const addresses = claims.map((c) => c.status!.ips![0]!);
      assert.equal(new Set(addresses).size, N, 'all distinct');
      assert.deepEqual([...addresses].sort(), Array.from({ length: N }, (_, i) => `10.67.0.${i + 1}/24`).sort());
      await standby.stop();
      world.controller = await startAllocatorController();
    },
    { timeoutMs: 180_000 },
  );
});

// The acceptance line: how many end-to-end cases ran, against which Kubernetes version.
after((t) => {
  const { ran, passed, failed } = world.tally;
  const wall = ((Date.now() - startedAt) / 1000).toFixed(0);
  const line = `e2e allocator: ${ran} cases against Kubernetes ${world.cp?.version ?? '(no cluster)'} (${passed} passed, ${failed} failed) in ${wall} s`;
  t.diagnostic(line);
  console.log(line);
});
