import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimName, podInterfaceName } from '../claims/names.ts';
import { trimNetworkAttachmentDefinition, trimVirtualMachine, trimVirtualMachineInstance } from '../sources/trim.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import { FakeWorld, NS, allocatorNad, claim, nad, vm } from '../../test/allocator-world.ts';

const NET = 'blue';

function world(subnets = '10.0.0.0/24', exclude?: string): FakeWorld {
  const w = new FakeWorld();
  w.nads.upsert(allocatorNad('nad-blue', NET, subnets, exclude));
  return w;
}

const BLUE = [{ name: 'blue', nad: 'nad-blue' }];

/** VM `name` on nad-blue and its claim of the network. */
function vmWithClaim(w: FakeWorld, name: string, o: Parameters<typeof claim>[3] = {}, addresses?: Record<string, string[]>): IPAMClaim {
  w.vms.upsert(vm(name, BLUE, addresses));
  return w.addClaim(claim(name, 'blue', NET, o));
}

/** The VMI of the VM `v` (controlled by it), with these annotations. */
function vmiOf(v: VirtualMachine, annotations: Record<string, string>): VirtualMachineInstance {
  const { name } = v.metadata;
  const owner = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name, uid: `uid-vm-${name}`, controller: true };
  return { metadata: { name, namespace: NS, uid: `uid-vmi-${name}`, annotations, ownerReferences: [owner] }, spec: v.spec!.template!.spec! };
}

/** An opted-in NAD whose config, of CNI `type`, names no network. */
const nameless = (type: string): NetworkAttachmentDefinition => ({
  metadata: { name: 'nameless', namespace: NS, uid: 'u-nameless', annotations: { 'persistent-ips.kubevirt.io/allocator': 'true' } },
  spec: { config: JSON.stringify({ type }) },
});

function allHeld(w: FakeWorld): string[] {
  return [...w.held().values()].flat();
}

function assertDistinct(w: FakeWorld): void {
  const all = allHeld(w).map((ip) => ip.split('/')[0]);
  assert.equal(new Set(all).size, all.length, `duplicate address among ${JSON.stringify(Object.fromEntries(w.held()))}`);
}

describe('allocator pass: cache lag never hands an address out twice', () => {
  it('a pass allocates the lowest free addresses, oldest claim first, with the condition', async () => {
    const w = world();
    vmWithClaim(w, 'vm2', { created: '2025-01-01T00:00:02Z' });
    vmWithClaim(w, 'vm1', { created: '2025-01-01T00:00:01Z' });
    const result = await w.pass(NET);
    assert.deepEqual(result, { requeue: false });
    assert.deepEqual(w.held().get(`${NS}/vm1.blue`), ['10.0.0.1/24']);
    assert.deepEqual(w.held().get(`${NS}/vm2.blue`), ['10.0.0.2/24']);
    const cond = w.server.get(`${NS}/vm1.blue`)!.status!.conditions![0]!;
    assert.equal(cond.type, 'IPsAllocated');
    assert.equal(cond.status, 'True');
    assert.equal(cond.reason, 'SuccessfulAllocation');
    assert.match(cond.message!, /allocated 10\.0\.0\.1\/24/);
  });

  it('the crux: a new claim gets a new address although the cache has not seen the previous writes', async () => {
    const w = world();
    const reconcile = w.reconciler();
    vmWithClaim(w, 'vm1');
    await w.pass(NET, reconcile);
    // The cache still shows vm1.blue without addresses (its watch event has not arrived).
    assert.equal(w.claims.getByKey(`${NS}/vm1.blue`)!.status, undefined);
    vmWithClaim(w, 'vm2', { created: '2025-01-01T00:00:05Z' });
    await w.pass(NET, reconcile);
    assert.deepEqual(w.held().get(`${NS}/vm2.blue`), ['10.0.0.2/24']);
    assert.equal(w.writes.length, 2, 'vm1.blue was not written again');
    assertDistinct(w);
  });

  it('the overlay holds while the cache replays older events of the claim, and lets go once it caught up', async () => {
    const w = world();
    const reconcile = w.reconciler();
    const created = vmWithClaim(w, 'vm1');
    await w.pass(NET, reconcile);
    // An older event of the claim arrives late (e.g. a label change made before our write): still no addresses.
    w.claims.upsert({
      ...structuredClone(created),
      metadata: { ...created.metadata, resourceVersion: String(Number(created.metadata.resourceVersion) + 0), labels: { x: 'y' } },
    });
    vmWithClaim(w, 'vm2', { created: '2025-01-01T00:00:05Z' });
    await w.pass(NET, reconcile);
    assertDistinct(w);
    w.deliver();
    assert.equal(w.overlay.view(`${NS}/vm1.blue`, w.claims.getByKey(`${NS}/vm1.blue`))?.status?.ips?.[0], '10.0.0.1/24');
    const before = w.writes.length;
    assert.deepEqual(await w.pass(NET, reconcile), { requeue: false });
    assert.equal(w.writes.length, before, 'a steady state writes nothing');
    assert.equal(w.overlay.size, 0, 'every entry let go once the cache caught up');
  });

  it('a controller killed between choosing and recording: the next one chooses the same, and nothing twice', async () => {
    const w = world();
    for (let i = 1; i <= 5; i++) vmWithClaim(w, `vm${i}`, { created: `2025-01-01T00:00:0${i}Z` });
    // The first controller's writes fail without effect after two succeeded (it "died" there).
    w.faults = ['none', 'none', 'timeout-lost', 'timeout-lost', 'timeout-lost'];
    await w.pass(NET, w.reconciler());
    assert.equal(w.writes.length, 2);
    // A new process: fresh overlay; its cache is a fresh list (everything delivered).
    w.overlay = new (w.overlay.constructor as new () => typeof w.overlay)();
    w.deliver();
    await w.pass(NET, w.reconciler());
    const held = Object.fromEntries([...w.held()].map(([k, v]) => [k.split('/')[1], v]));
    assert.deepEqual(held, {
      'vm1.blue': ['10.0.0.1/24'],
      'vm2.blue': ['10.0.0.2/24'],
      'vm3.blue': ['10.0.0.3/24'],
      'vm4.blue': ['10.0.0.4/24'],
      'vm5.blue': ['10.0.0.5/24'],
    });
  });

  it('a write with an unknown outcome keeps its address reserved until it is settled', async () => {
    for (const fault of ['timeout-applied', 'timeout-lost'] as const) {
      const w = world();
      const reconcile = w.reconciler();
      vmWithClaim(w, 'vm1');
      w.faults = [fault];
      const first = await w.pass(NET, reconcile);
      assert.deepEqual(first, { requeue: true }, `${fault}: the pass asks to run again`);
      vmWithClaim(w, 'vm2', { created: '2025-01-01T00:00:05Z' });
      await w.pass(NET, reconcile);
      assert.deepEqual(w.held().get(`${NS}/vm2.blue`), ['10.0.0.2/24'], `${fault}: vm2 does not get the reserved address`);
      assert.deepEqual(w.held().get(`${NS}/vm1.blue`), ['10.0.0.1/24'], `${fault}: the retried write settled vm1`);
      assertDistinct(w);
      w.deliver();
      await w.pass(NET, reconcile);
      assert.equal(w.overlay.size, 0, `${fault}: settled`);
    }
  });

  it('a seeded claim (read by a new leader, not yet in its cache) counts before anything is chosen', async () => {
    const w = world();
    const c1 = vmWithClaim(w, 'vm1');
    // The previous leader wrote vm1's address; this replica's cache still has the old version.
    const written = { ...structuredClone(c1), status: { ips: ['10.0.0.1/24'] } };
    written.metadata.resourceVersion = String(++w.revision);
    w.server.set(`${NS}/vm1.blue`, written);
    w.overlay.seed(`${NS}/vm1.blue`, NET, c1.metadata.resourceVersion, written);
    vmWithClaim(w, 'vm2', { created: '2025-01-01T00:00:05Z' });
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm2.blue`), ['10.0.0.2/24']);
    assertDistinct(w);
  });

  it('deleting a claim frees its address for the next claim', async () => {
    const w = world('10.0.0.0/30');
    const reconcile = w.reconciler();
    for (const i of [1, 2, 3]) vmWithClaim(w, `vm${i}`, { created: `2025-01-01T00:00:0${i}Z` });
    await w.pass(NET, reconcile);
    const vm3 = w.server.get(`${NS}/vm3.blue`)!;
    assert.deepEqual(vm3.status?.ips, []);
    assert.equal(vm3.status?.conditions?.[0]?.reason, 'SubnetExhausted');
    assert.ok(
      w.events.some((e) => e.reason === 'SubnetExhausted' && e.involvedObject.name === 'vm3'),
      'Event on vm3',
    );
    w.deliver();
    w.deleteClaim(`${NS}/vm1.blue`);
    await w.pass(NET, reconcile);
    assert.deepEqual(w.server.get(`${NS}/vm3.blue`)?.status?.ips, ['10.0.0.1/30']);
    assert.equal(w.server.get(`${NS}/vm3.blue`)?.status?.conditions?.[0]?.reason, 'SuccessfulAllocation');
  });
});

describe('allocator pass: conflicts, static requests, pools', () => {
  it('two claims holding one address: both reported, neither changed', async () => {
    const w = world();
    for (const name of ['vm1', 'vm2']) vmWithClaim(w, name, { ips: ['10.0.0.7/24'] });
    await w.pass(NET);
    for (const name of ['vm1', 'vm2']) {
      const c = w.server.get(`${NS}/${name}.blue`)!;
      assert.deepEqual(c.status?.ips, ['10.0.0.7/24'], `${name} keeps its address`);
      assert.equal(c.status?.conditions?.[0]?.status, 'False');
      assert.equal(c.status?.conditions?.[0]?.reason, 'IPAddressConflict');
      assert.match(c.status!.conditions![0]!.message!, /10\.0\.0\.7 is held by/);
      assert.ok(
        w.events.some((e) => e.reason === 'IPAddressConflict' && e.involvedObject.name === name),
        `Event on ${name}`,
      );
    }
    const writes = w.writes.length;
    w.deliver();
    await w.pass(NET);
    assert.equal(w.writes.length, writes, 'a lasting conflict is not rewritten');
  });

  it('a static request from the VM template is honoured; the same request from a second VM is refused with the reason', async () => {
    const w = world();
    vmWithClaim(w, 'vm1', { created: '2025-01-01T00:00:01Z' }, { blue: ['10.0.0.50'] });
    vmWithClaim(w, 'vm2', { created: '2025-01-01T00:00:02Z' }, { blue: ['10.0.0.50/24'] });
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.blue`), ['10.0.0.50/24']);
    const refused = w.server.get(`${NS}/vm2.blue`)!;
    assert.deepEqual(refused.status?.ips, []);
    assert.equal(refused.status?.conditions?.[0]?.reason, 'IPAddressConflict');
    assert.match(refused.status!.conditions![0]!.message!, /requested 10\.0\.0\.50 is already held by vms\/vm1\.blue/);
    const event = w.events.find((e) => e.involvedObject.name === 'vm2');
    assert.equal(event?.reason, 'AddressInUse');
    // The VMI appears (with the template's annotation): the lasting refusal is neither rewritten nor re-reported.
    const [writes, events] = [w.writes.length, w.events.length];
    w.deliver();
    const vm2 = vm('vm2', BLUE, { blue: ['10.0.0.50/24'] });
    w.vmis.upsert(vmiOf(vm2, vm2.spec!.template!.metadata!.annotations!));
    await w.pass(NET);
    assert.deepEqual([w.writes.length, w.events.length], [writes, events]);
  });

  it('requests outside the pool or unreadable are refused; the VMI annotation wins over the template', async () => {
    const w = world('10.0.0.0/24', '10.0.0.1');
    w.vms.upsert(vm('out', BLUE, { blue: ['192.168.0.5'] }));
    w.vms.upsert(vm('gw', BLUE, { blue: ['10.0.0.1'] }));
    const bad = vm('bad', BLUE);
    bad.spec!.template!.metadata = { annotations: { 'network.kubevirt.io/addresses': '{"blue": "10.0.0.9"}' } };
    w.vms.upsert(bad);
    const running = vm('run', BLUE, { blue: ['10.0.0.20'] });
    w.vms.upsert(running);
    w.vmis.upsert(vmiOf(running, { 'network.kubevirt.io/addresses': JSON.stringify({ blue: ['10.0.0.30'] }) }));
    for (const name of ['out', 'gw', 'bad', 'run']) w.addClaim(claim(name, 'blue', NET));
    await w.pass(NET);
    const cond = (name: string) => w.server.get(`${NS}/${name}.blue`)!.status!.conditions![0]!;
    assert.equal(cond('out').reason, 'InternalError');
    assert.match(cond('out').message!, /192\.168\.0\.5 is outside the pool \(10\.0\.0\.0\/24\)/);
    assert.match(cond('gw').message!, /10\.0\.0\.1 is inside excludeSubnets entry 10\.0\.0\.1\/32/);
    assert.match(cond('bad').message!, /"blue" must map to a list of addresses/);
    assert.deepEqual(w.held().get(`${NS}/run.blue`), ['10.0.0.30/24']);
  });

  it('a claim whose owner is not cached yet waits (no dynamic address that would ignore its request)', async () => {
    const w = world();
    w.addClaim(claim('vm1', 'blue', NET));
    await w.pass(NET);
    assert.equal(w.writes.length, 0);
    w.vms.upsert(vm('vm1', BLUE, { blue: ['10.0.0.99'] }));
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.blue`), ['10.0.0.99/24']);
  });

  it('a claim of an earlier VM of the same name (other uid) gets nothing', async () => {
    const w = world();
    vmWithClaim(w, 'vm1', { ownerUid: 'uid-of-an-older-vm1' });
    await w.pass(NET);
    assert.equal(w.writes.length, 0);
  });

  it('an invalid pool is reported on the NAD and nothing is allocated', async () => {
    const w = world('10.0.0.0/33');
    vmWithClaim(w, 'vm1');
    assert.deepEqual(await w.pass(NET), {});
    assert.equal(w.writes.length, 0);
    const event = w.events.find((e) => e.involvedObject.kind === 'NetworkAttachmentDefinition');
    assert.equal(event?.reason, 'InvalidAllocatorPool');
    assert.match(event!.message, /invalid prefix length/);
    // reported once while it lasts
    await w.pass(NET);
    assert.equal(w.events.filter((e) => e.reason === 'InvalidAllocatorPool').length, 1);
  });

  it('a malformed switch, or an opted-in NAD without a network name, is reported on the NAD itself', async () => {
    const w = new FakeWorld();
    w.nads.upsert(nad('typo', 'x', { 'persistent-ips.kubevirt.io/allocator': 'yes' }));
    w.nads.upsert(nameless('bridge'));
    const reconcile = w.reconciler();
    for (const key of ['vms/typo', 'vms/nameless', 'vms/gone']) await reconcile(key, { signal: new AbortController().signal, retries: 0 });
    assert.deepEqual([...new Set(w.events.map((e) => `${e.involvedObject.name} ${e.reason}`))], ['typo InvalidAllocatorPool', 'nameless InvalidAllocatorPool']);
    assert.match(w.events[0]!.message, /must be "true" or "false", got "yes"/);
    assert.ok(w.events.some((e) => /no network "name"/.test(e.message)));
  });

  it('an OVN-Kubernetes NAD with the switch: no status write for its claims, one AllocatorRefused Event per NAD generation', async () => {
    const w = new FakeWorld();
    const ovn = (generation: number) => {
      const n = nad(
        'ovn-blue',
        NET,
        { 'persistent-ips.kubevirt.io/allocator': 'true' },
        { type: 'ovn-k8s-cni-overlay', topology: 'layer2', allowPersistentIPs: true, subnets: '10.0.0.0/24' },
      );
      n.metadata.generation = generation;
      return n;
    };
    w.nads.upsert(ovn(1));
    w.vms.upsert(vm('vm1', [{ name: 'blue', nad: 'ovn-blue' }]));
    w.vms.upsert(vm('vm2', [{ name: 'blue', nad: 'ovn-blue' }]));
    w.addClaim(claim('vm1', 'blue', NET));
    // As OVN-Kubernetes writes it: addresses and no condition, which a served network would add.
    w.addClaim(claim('vm2', 'blue', NET, { ips: ['10.0.0.7/24'] }));
    const reconcile = w.reconciler();
    for (let pass = 0; pass < 3; pass++) assert.deepEqual(await w.pass(NET, reconcile), {});
    assert.deepEqual(w.writes, [], 'no claim status written');
    const refused = () => w.events.filter((e) => e.reason === 'AllocatorRefused');
    assert.equal(refused().length, 1, 'once, not at every pass');
    const event = refused()[0]!;
    assert.deepEqual(
      [event.type, event.involvedObject.kind, event.involvedObject.name, event.involvedObject.uid],
      ['Warning', 'NetworkAttachmentDefinition', 'ovn-blue', 'uid-nad-vms-ovn-blue'],
    );
    assert.match(event.message, /^NetworkAttachmentDefinition vms\/ovn-blue \(generation 1\) has CNI type "ovn-k8s-cni-overlay"/);
    assert.deepEqual(
      w.events.map((e) => e.reason),
      ['AllocatorRefused'],
      'nothing else said (no pool problem, nothing on the VMs)',
    );

    w.nads.upsert(ovn(2));
    await w.pass(NET, reconcile);
    await w.pass(NET, reconcile);
    assert.deepEqual(
      refused().map((e) => /generation (\d+)/.exec(e.message)?.[1]),
      ['1', '2'],
      'an edited NAD is told again, once',
    );
    assert.deepEqual(w.writes, []);
  });

  it('a served network that gains an OVN-Kubernetes NAD: no more status writes; the NAD with the switch is told once', async () => {
    const w = world('10.0.0.0/30');
    for (const [i, name] of ['vm1', 'vm2', 'vm3'].entries()) vmWithClaim(w, name, { created: `2025-01-01T00:00:0${i}Z` });
    const reconcile = w.reconciler();
    await w.pass(NET, reconcile);
    w.deliver();
    assert.ok(
      w.events.some((e) => e.reason === 'SubnetExhausted'),
      'vm3 refused while the allocator serves the network',
    );
    const writes = w.writes.length;
    w.nads.upsert(nad('ovn-blue', NET, {}, { type: 'ovn-k8s-cni-overlay', topology: 'layer2', subnets: '10.0.0.0/30' }));
    // A new claim, which a served network would at least write a condition on.
    vmWithClaim(w, 'vm4', { created: '2025-01-01T00:00:09Z' });
    await w.pass(NET, reconcile);
    await w.pass(NET, reconcile);
    assert.equal(w.writes.length, writes, "no status write once the network is OVN-Kubernetes'");
    const refused = w.events.filter((e) => e.reason === 'AllocatorRefused');
    assert.deepEqual(
      refused.map((e) => e.involvedObject.name),
      ['nad-blue'],
      'the NAD with the switch is told, once',
    );
    assert.match(refused[0]!.message, /vms\/ovn-blue has CNI type "ovn-k8s-cni-overlay"/);
  });

  it('an OVN-Kubernetes NAD with the switch and no network name is refused on the NAD itself', async () => {
    const w = new FakeWorld();
    w.nads.upsert(nameless('ovn-k8s-cni-overlay'));
    const reconcile = w.reconciler();
    for (let i = 0; i < 2; i++) await reconcile('vms/nameless', { signal: new AbortController().signal, retries: 0 });
    assert.deepEqual(
      w.events.map((e) => `${e.involvedObject.name} ${e.reason}`),
      ['nameless AllocatorRefused'],
    );
  });

  it('NADs of one network in two namespaces share one pool', async () => {
    const w = world();
    w.nads.upsert(allocatorNad('nad-blue', NET, '10.0.0.0/24', undefined, 'other'));
    w.vms.upsert(vm('vm1', BLUE, undefined, 'other'));
    vmWithClaim(w, 'vm1', { created: '2025-01-01T00:00:01Z' });
    w.addClaim(claim('vm1', 'blue', NET, { created: '2025-01-01T00:00:02Z', namespace: 'other' }));
    w.server.get('other/vm1.blue')!.metadata.ownerReferences![0]!.uid = 'uid-vm-vm1';
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.blue`), ['10.0.0.1/24']);
    assert.deepEqual(w.held().get('other/vm1.blue'), ['10.0.0.2/24']);
  });
});

describe('the shared caches keep what the allocator reads', () => {
  it('NAD, VM and VMI trims', () => {
    const n = trimNetworkAttachmentDefinition({
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: {
        name: 'n',
        namespace: NS,
        annotations: { 'persistent-ips.kubevirt.io/allocator': 'true', 'persistent-ips.kubevirt.io/subnets': '10.0.0.0/24', other: 'x' },
        managedFields: [],
      },
      spec: { config: '{}' },
    });
    assert.deepEqual(n.metadata.annotations, { 'persistent-ips.kubevirt.io/allocator': 'true', 'persistent-ips.kubevirt.io/subnets': '10.0.0.0/24' });
    assert.equal(trimNetworkAttachmentDefinition({ metadata: { name: 'n', generation: 4 }, spec: {} }).metadata.generation, 4, 'named in AllocatorRefused');
    const v = trimVirtualMachine({
      metadata: { name: 'vm1', namespace: NS, uid: 'u' },
      spec: {
        running: true,
        template: {
          metadata: { annotations: { 'network.kubevirt.io/addresses': '{}', x: 'y' }, labels: { a: 'b' } },
          spec: { networks: [{ name: 'blue', multus: { networkName: 'nad' } }] },
        },
      },
      status: { ready: true },
    });
    assert.deepEqual(v.spec?.template, {
      metadata: { annotations: { 'network.kubevirt.io/addresses': '{}' } },
      spec: { networks: [{ name: 'blue', multus: { networkName: 'nad' } }] },
    });
    const i = trimVirtualMachineInstance({
      metadata: { name: 'vm1', namespace: NS, annotations: { 'network.kubevirt.io/addresses': '{}', 'kubevirt.io/vm-generation': '1' } },
      spec: {},
    });
    assert.deepEqual(i.metadata.annotations, { 'network.kubevirt.io/addresses': '{}' });
    // names used in fixtures agree with the claims domain
    assert.equal(claimName('vm1', 'blue'), 'vm1.blue');
    assert.match(podInterfaceName('blue'), /^pod[0-9a-f]{11}$/);
  });
});
