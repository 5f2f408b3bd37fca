import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { podInterfaceName } from '../claims/names.ts';
import type { IPAMClaim, Pod } from '../kube/types.ts';
import { planNetwork, type PlanClaim } from './plan.ts';
import { parsePool } from '../ip/pool.ts';
import { interfacesOfNetwork } from '../claims/index.ts';
import { parseNetworkStatus, runningAddresses, type RunningAddresses } from './running-address.ts';
import { FakeWorld, NS, allocatorNad, claim, launcherPod, runningVmi, vm } from '../../test/allocator-world.ts';

const NET = 'blue';
const VMI_UID = 'uid-vmi-vm1';
const IFACE = podInterfaceName('data');
const NETS = [
  { name: 'other', nad: 'nad-other' },
  { name: 'data', nad: 'nad-blue' },
];

describe('network-status parsing', () => {
  const table: [string, string | undefined, { name: string; interface?: string; ips: string[] }[]][] = [
    ['absent', undefined, []],
    ['empty', '', []],
    ['not JSON', '{', []],
    ['not an array', '{"name":"a"}', []],
    [
      'entries, bad ones dropped',
      '[1,{"interface":"x"},{"name":"ns/a","interface":"net1","ips":["10.0.0.5",3]},{"name":"ns/b"}]',
      [
        { name: 'ns/a', interface: 'net1', ips: ['10.0.0.5'] },
        { name: 'ns/b', ips: [] },
      ],
    ],
  ];
  for (const [name, text, want] of table) it(name, () => assert.deepEqual(parseNetworkStatus(text), want));
});

describe('what the running launcher pods have on a network', () => {
  const iface = interfacesOfNetwork(runningVmi('vm1', NETS), 'data', NS)!;
  it('interface names: the hashed one and the ordinal of secondary networks', () => {
    assert.equal(iface.nad, `${NS}/nad-blue`);
    assert.deepEqual([...iface.names].sort(), [IFACE, 'net2'].sort());
  });
  const entry = (ips: string[], o: { iface?: string; nad?: string } = {}) => ({ name: o.nad ?? `${NS}/nad-blue`, interface: o.iface ?? IFACE, ips });
  const table: [string, Pod[], RunningAddresses][] = [
    ['no pod', [], { kind: 'none' }],
    ['hashed interface name', [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])])], { kind: 'addresses', ips: ['10.0.0.5'], pods: ['p1'] }],
    [
      'ordinal interface name (older pods)',
      [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'], { iface: 'net2' })])],
      { kind: 'addresses', ips: ['10.0.0.5'], pods: ['p1'] },
    ],
    [
      'bare NAD name is the pod namespace; CIDR form is stripped',
      [launcherPod('p1', VMI_UID, [entry(['10.0.0.5/24', 'fd00::5'], { nad: 'nad-blue' })])],
      { kind: 'addresses', ips: ['10.0.0.5', 'fd00::5'], pods: ['p1'] },
    ],
    ['another NAD on that interface', [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'], { nad: `${NS}/nad-red` })])], { kind: 'none' }],
    ['another interface', [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'], { iface: 'net1' })])], { kind: 'none' }],
    ['no address listed', [launcherPod('p1', VMI_UID, [entry([])])], { kind: 'none' }],
    ['finished pod', [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])], { phase: 'Succeeded' })], { kind: 'none' }],
    ['failed pod', [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])], { phase: 'Failed' })], { kind: 'none' }],
    // Its guest keeps the address through the grace period: the VM's claim keeps it too, so no one else gets it.
    ['terminating pod', [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])], { deleting: true })], { kind: 'addresses', ips: ['10.0.0.5'], pods: ['p1'] }],
    ['pod of another VMI (a copy)', [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])], { ownerUid: 'uid-other' })], { kind: 'none' }],
    [
      'migration: both pods agree',
      [launcherPod('p2', VMI_UID, [entry(['10.0.0.5'])]), launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])])],
      { kind: 'addresses', ips: ['10.0.0.5'], pods: ['p1', 'p2'] },
    ],
    [
      'migration target not wired yet',
      [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])]), launcherPod('p2', VMI_UID, [])],
      { kind: 'addresses', ips: ['10.0.0.5'], pods: ['p1'] },
    ],
    [
      'pods that disagree',
      [launcherPod('p1', VMI_UID, [entry(['10.0.0.5'])]), launcherPod('p2', VMI_UID, [entry(['10.0.0.6'])])],
      { kind: 'invalid', message: `the running launcher pods disagree on the address of ${NS}/nad-blue: p1 has 10.0.0.5, p2 has 10.0.0.6` },
    ],
  ];
  for (const [name, pods, want] of table) it(name, () => assert.deepEqual(runningAddresses(pods, VMI_UID, iface, NS), want));
});

describe('the choice: an empty claim of a running VM takes the address the VM has', () => {
  const pool = (subnets: string, exclude?: string) => {
    const r = parsePool({ subnets, ...(exclude ? { excludeSubnets: exclude } : {}) });
    assert.ok(r.ok);
    return r.pool;
  };
  const owner = (name: string) => ({ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', namespace: NS, name, uid: `uid-vm-${name}` });
  const pc = (c: IPAMClaim, running?: RunningAddresses, request: PlanClaim['request'] = { kind: 'none' }): PlanClaim => ({
    key: `${NS}/${c.metadata.name}`,
    claim: c,
    request,
    owner: owner(c.metadata.name.split('.')[0]!),
    ...(running ? { running } : {}),
  });
  const at = (ips: string[], pods = ['virt-launcher-vm1-x']): RunningAddresses => ({ kind: 'addresses', ips, pods });
  const vm1 = claim('vm1', 'data', NET, { created: '2025-01-01T00:00:02Z' });
  const vm0 = claim('vm0', 'data', NET, { created: '2025-01-01T00:00:01Z' });
  const held = claim('vm9', 'data', NET, { ips: ['10.0.0.5/24'] });

  type Row = {
    name: string;
    subnets?: string;
    exclude?: string;
    claims: PlanClaim[];
    ips: Record<string, string[]>;
    events?: string[];
    skipped?: string[];
    /** No new address on the network in this pass (a VM's address not read yet). */
    withheld?: boolean;
  };
  const table: Row[] = [
    { name: 'inside the pool: that address, with the pool prefix', claims: [pc(vm1, at(['10.0.0.5']))], ips: { 'vm1.data': ['10.0.0.5/24'] } },
    { name: 'no running address: the lowest free one, as before', claims: [pc(vm1, { kind: 'none' })], ips: { 'vm1.data': ['10.0.0.1/24'] } },
    {
      name: 'served before an older claim that takes any address',
      claims: [pc(vm0), pc(vm1, at(['10.0.0.1']))],
      ips: { 'vm0.data': ['10.0.0.2/24'], 'vm1.data': ['10.0.0.1/24'] },
    },
    {
      name: 'dual-stack pool, the pod has IPv4 only: IPv4 kept, IPv6 allocated',
      subnets: '10.0.0.0/24,fd00::/64',
      claims: [pc(vm1, at(['10.0.0.7']))],
      ips: { 'vm1.data': ['10.0.0.7/24', 'fd00::1/64'] },
    },
    {
      name: 'held by another claim: refused, reported',
      claims: [pc(held), pc(vm1, at(['10.0.0.5']))],
      ips: { 'vm9.data': ['10.0.0.5/24'], 'vm1.data': [] },
      events: ['AddressInUse'],
    },
    { name: 'outside the pool: refused, reported', claims: [pc(vm1, at(['192.168.1.5']))], ips: { 'vm1.data': [] }, events: ['AddressOutsidePool'] },
    {
      name: 'excluded (the router): refused, reported',
      exclude: '10.0.0.1',
      claims: [pc(vm1, at(['10.0.0.1']))],
      ips: { 'vm1.data': [] },
      events: ['AddressExcluded'],
    },
    {
      name: 'pods disagree: refused, reported',
      claims: [pc(vm1, { kind: 'invalid', message: 'they disagree' })],
      ips: { 'vm1.data': [] },
      events: ['InvalidRequest'],
    },
    { name: 'pods unread: left for later', claims: [pc(vm1, { kind: 'unknown', message: 'cannot read' })], ips: {}, skipped: [`${NS}/vm1.data`] },
    {
      name: "one VM's pods unread: no new address for anyone (it could be that VM's), held ones still confirmed",
      claims: [pc(held), pc(vm0), pc(vm1, { kind: 'unknown', message: 'cannot read' })],
      ips: { 'vm9.data': ['10.0.0.5/24'] },
      skipped: [`${NS}/vm0.data`, `${NS}/vm1.data`],
      withheld: true,
    },
    {
      name: 'an owner not cached yet (it may run): likewise',
      claims: [pc(vm0), pc(vm1, undefined, { kind: 'wait', message: 'VirtualMachine vms/vm1 is not known yet' })],
      ips: {},
      skipped: [`${NS}/vm0.data`, `${NS}/vm1.data`],
      withheld: true,
    },
    {
      name: 'a running address is still taken while another VM is unread',
      claims: [pc(vm0, at(['10.0.0.5'])), pc(vm1, { kind: 'unknown', message: 'cannot read' })],
      ips: { 'vm0.data': ['10.0.0.5/24'] },
      skipped: [`${NS}/vm1.data`],
      withheld: false,
    },
    {
      name: 'a static request that differs: the running address wins, with a warning',
      claims: [pc(vm1, at(['10.0.0.5']), { kind: 'addresses', addresses: ['10.0.0.9'] })],
      ips: { 'vm1.data': ['10.0.0.5/24'] },
      events: ['StaticAddressNotApplied'],
    },
    {
      name: 'a static request that matches: no warning',
      claims: [pc(vm1, at(['10.0.0.5']), { kind: 'addresses', addresses: ['10.0.0.5/24'] })],
      ips: { 'vm1.data': ['10.0.0.5/24'] },
    },
  ];
  for (const row of table) {
    it(row.name, () => {
      const plan = planNetwork({ network: NET, pool: pool(row.subnets ?? '10.0.0.0/24', row.exclude), claims: row.claims, now: '2025-06-01T00:00:00Z' });
      const got = Object.fromEntries(plan.writes.map((w) => [w.claim.metadata.name, w.ips]));
      assert.deepEqual(got, row.ips);
      assert.deepEqual(
        plan.events.map((e) => e.reason),
        row.events ?? [],
      );
      assert.deepEqual(
        plan.skipped.map((s) => s.key),
        row.skipped ?? [],
      );
      assert.equal(plan.withheld !== undefined, row.withheld ?? false, `withheld: ${plan.withheld}`);
      for (const w of plan.writes) {
        if (w.claim.metadata.name !== 'vm1.data') continue;
        assert.equal(w.condition.status, w.ips.length > 0 ? 'True' : 'False');
        if (row.claims.some((c) => c.running?.kind === 'addresses') && w.ips.length > 0) assert.match(w.condition.message!, /the address the VM has/);
        if (w.ips.length === 0 && row.events?.[0] !== 'InvalidRequest') assert.match(w.condition.message!, /no other address is handed out/);
      }
    });
  }
});

describe('allocator pass: the pod read at the edge', () => {
  const status = [{ name: `${NS}/nad-blue`, interface: IFACE, ips: ['10.0.0.42'] }];
  /** vm1 and its claim (not added yet); `running`: its VMI runs, its launcher pod has 10.0.0.42. */
  const setUp = (running = false) => {
    const w = new FakeWorld();
    w.nads.upsert(allocatorNad('nad-blue', NET, '10.0.0.0/24'));
    w.vms.upsert(vm('vm1', NETS));
    if (running) {
      w.vmis.upsert(runningVmi('vm1', NETS));
      w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, status)]);
    }
    const c = claim('vm1', 'data', NET);
    c.spec.interface = IFACE;
    return { w, c };
  };

  it('the claim of a running VM takes the address in its pod network-status; a steady state reads no pod', async () => {
    const { w, c } = setUp(true);
    w.addClaim(c);
    assert.deepEqual(await w.pass(NET), { requeue: false });
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), ['10.0.0.42/24']);
    assert.deepEqual(w.podReads, [`${NS}/${VMI_UID}`]);
    w.deliver();
    await w.pass(NET);
    assert.equal(w.podReads.length, 1, 'a claim holding addresses reads no pod');
  });

  it("a VMI still on another network's NAD (its VM's NAD swapped, the move pending): the claim does not take that network's address", async () => {
    const { w, c } = setUp();
    w.nads.upsert(allocatorNad('nad-red', 'red', '10.0.0.0/24'));
    w.vmis.upsert(runningVmi('vm1', [NETS[0]!, { name: 'data', nad: 'nad-red' }]));
    w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, [{ name: `${NS}/nad-red`, interface: IFACE, ips: ['10.0.0.42'] }])]);
    w.addClaim(c);
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), ['10.0.0.1/24']);
  });

  it('a VM that is not running: no pod read, the lowest free address', async () => {
    const { w, c } = setUp();
    w.addClaim(c);
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), ['10.0.0.1/24']);
    assert.deepEqual(w.podReads, []);
  });

  it('pods that cannot be read: no address, a retry', async () => {
    const { w, c } = setUp();
    w.vmis.upsert(runningVmi('vm1', NETS));
    w.podReadFault = true;
    w.addClaim(c);
    assert.deepEqual(await w.pass(NET), { requeue: true });
    assert.deepEqual(w.writes, []);
    w.podReadFault = false;
    w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, status)]);
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), ['10.0.0.42/24']);
  });

  it('the address is held by another claim: nothing handed out, a Warning Event on the VM', async () => {
    const { w, c } = setUp(true);
    w.vms.upsert(vm('vm9', NETS));
    w.addClaim(claim('vm9', 'data', NET, { ips: ['10.0.0.42/24'] }));
    w.addClaim(c);
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), []);
    const cond = w.server.get(`${NS}/vm1.data`)!.status!.conditions![0]!;
    assert.equal(cond.reason, 'IPAddressConflict');
    const ev = w.events.find((e) => e.involvedObject.name === 'vm1');
    assert.equal(ev?.reason, 'AddressInUse');
    assert.match(ev!.message, /the VM has 10\.0\.0\.42 .*virt-launcher-vm1-abc.*held by vms\/vm9\.data/);
  });
});

describe('allocator pass: the address of a running VM that no claim records is never handed out', () => {
  // vm1 runs on nad-blue with 10.0.0.1 (given by whatever served the NAD before), and no claim records it; vm2 is a
  // new VM whose claim would get the lowest free address.
  const status = [{ name: `${NS}/nad-blue`, interface: IFACE, ips: ['10.0.0.1'] }];
  const setUp = () => {
    const w = new FakeWorld();
    w.nads.upsert(allocatorNad('nad-blue', NET, '10.0.0.0/24'));
    for (const name of ['vm1', 'vm2']) w.vms.upsert(vm(name, NETS));
    w.vmis.upsert(runningVmi('vm1', NETS));
    w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, status)]);
    w.addClaim(claim('vm2', 'data', NET, { created: '2025-01-01T00:00:09Z' }));
    return w;
  };
  const vm1Claim = (o: Parameters<typeof claim>[3] = {}) => {
    const c = claim('vm1', 'data', NET, { created: '2025-01-01T00:00:05Z', ...o });
    c.spec.interface = IFACE;
    return c;
  };

  type Row = { name: string; change?: (w: FakeWorld) => void; vm2: string[]; vm1?: string[] };
  const rows: Row[] = [
    // Its claim not made yet (the claims loop is a moment behind), or never to be (a hand-made object holds its name,
    // the gate is off, the template no longer names the network): the address is held back, nothing waits.
    { name: 'no claim at all', vm2: ['10.0.0.2/24'] },
    {
      name: 'its claim is being deleted (empty): it will not take the address',
      change: (w) => w.addClaim({ ...vm1Claim(), metadata: { ...vm1Claim().metadata, deletionTimestamp: '2025-01-01T00:00:10Z' } }),
      vm2: ['10.0.0.2/24'],
      vm1: [],
    },
    {
      name: 'its VM is being deleted: its claim is skipped, its guest still runs',
      change: (w) => {
        w.addClaim(vm1Claim());
        w.vms.upsert({ ...vm('vm1', NETS), metadata: { ...vm('vm1', NETS).metadata, deletionTimestamp: '2025-01-01T00:00:10Z' } });
      },
      vm2: ['10.0.0.2/24'],
      vm1: [],
    },
    {
      name: 'a terminating migration target with another address: both are held back, the claim is refused',
      change: (w) => {
        w.pods.get(VMI_UID)!.push(launcherPod('virt-launcher-vm1-xyz', VMI_UID, [{ ...status[0]!, ips: ['10.0.0.2'] }], { deleting: true }));
        w.addClaim(vm1Claim());
      },
      vm2: ['10.0.0.3/24'],
      vm1: [],
    },
    { name: 'its claim exists: the claim takes it, vm2 the next', change: (w) => w.addClaim(vm1Claim()), vm2: ['10.0.0.2/24'], vm1: ['10.0.0.1/24'] },
    {
      name: 'its interface is being unplugged: the pod may still have it',
      change: (w) => {
        const vmi = runningVmi('vm1', NETS);
        vmi.spec!.domain = { devices: { interfaces: [{ name: 'other' }, { name: 'data', state: 'absent' }] } };
        w.vmis.upsert(vmi);
      },
      vm2: ['10.0.0.2/24'],
    },
    { name: 'it has no launcher pod any more', change: (w) => w.vmis.upsert(runningVmi('vm1', NETS, [])), vm2: ['10.0.0.1/24'] },
    {
      name: 'it names the NAD from another namespace (no claim is made for it, but Multus may attach it)',
      change: (w) => {
        w.vmis.delete(runningVmi('vm1', NETS));
        const vmi = runningVmi('vm1', [{ name: 'data', nad: `${NS}/nad-blue` }], undefined, 'elsewhere');
        w.vmis.upsert(vmi);
        w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, status, { namespace: 'elsewhere' })]);
      },
      vm2: ['10.0.0.2/24'],
    },
  ];
  for (const row of rows) {
    it(row.name, async () => {
      const w = setUp();
      row.change?.(w);
      assert.deepEqual(await w.pass(NET), { requeue: false });
      assert.deepEqual(w.held().get(`${NS}/vm2.data`), row.vm2);
      if (row.vm1) assert.deepEqual(w.held().get(`${NS}/vm1.data`), row.vm1);
    });
  }

  it('its claim is refused (one of its addresses is outside the pool): the address it does have in the pool is still held back', async () => {
    const w = setUp();
    w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, [{ ...status[0]!, ips: ['10.0.0.1', 'fd00:1::7'] }])]);
    w.addClaim(vm1Claim());
    await w.pass(NET);
    assert.equal(w.server.get(`${NS}/vm1.data`)!.status!.conditions![0]!.reason, 'InternalError');
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), []);
    assert.deepEqual(w.held().get(`${NS}/vm2.data`), ['10.0.0.2/24']);
  });

  it("dual stack: a running VM's claim fills the family its pod lacks without taking another running VM's address", async () => {
    const w = new FakeWorld();
    w.nads.upsert(allocatorNad('nad-blue', NET, '10.0.0.0/24,fd00::/64'));
    for (const name of ['vm1', 'vm2']) {
      w.vms.upsert(vm(name, NETS));
      w.vmis.upsert(runningVmi(name, NETS));
    }
    w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, [{ ...status[0]!, ips: ['10.0.0.7'] }])]);
    w.pods.set('uid-vmi-vm2', [launcherPod('virt-launcher-vm2-abc', 'uid-vmi-vm2', [{ ...status[0]!, ips: ['10.0.0.8', 'fd00::1'] }])]);
    w.addClaim(vm1Claim());
    const c2 = claim('vm2', 'data', NET, { created: '2025-01-01T00:00:06Z' });
    c2.spec.interface = IFACE;
    w.addClaim(c2);
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), ['10.0.0.7/24', 'fd00::2/64']);
    assert.deepEqual(w.held().get(`${NS}/vm2.data`), ['10.0.0.8/24', 'fd00::1/64']);
  });

  it('two running VMs with one address, only one of them with a claim: the claim is refused, naming the other VM, whichever pods were read first', async () => {
    const w = setUp();
    w.vms.upsert(vm('vm3', NETS));
    w.vmis.upsert(runningVmi('vm3', NETS));
    w.pods.set('uid-vmi-vm3', [launcherPod('virt-launcher-vm3-abc', 'uid-vmi-vm3', status)]);
    w.addClaim(vm1Claim());
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), []);
    assert.match(w.server.get(`${NS}/vm1.data`)!.status!.conditions![0]!.message!, /held by VMI vms\/vm3 \(no claim records its address\)/);
    assert.deepEqual(w.held().get(`${NS}/vm2.data`), ['10.0.0.2/24']);
  });

  it('a VM with two interfaces on the network, one of them without a claim holding its address: that address is held back', async () => {
    const w = new FakeWorld();
    w.nads.upsert(allocatorNad('nad-blue', NET, '10.0.0.0/24'));
    w.nads.upsert(allocatorNad('nad-blue2', NET, '10.0.0.0/24'));
    const two = [...NETS, { name: 'data2', nad: 'nad-blue2' }];
    w.vms.upsert(vm('vm1', two));
    w.vms.upsert(vm('vm2', NETS));
    w.vmis.upsert(runningVmi('vm1', two));
    w.pods.set(VMI_UID, [
      launcherPod('virt-launcher-vm1-abc', VMI_UID, [
        { ...status[0]!, ips: ['10.0.0.5'] },
        { name: `${NS}/nad-blue2`, interface: podInterfaceName('data2'), ips: ['10.0.0.1'] },
      ]),
    ]);
    w.addClaim(vm1Claim({ ips: ['10.0.0.5/24'] }));
    w.addClaim(claim('vm2', 'data', NET, { created: '2025-01-01T00:00:06Z' }));
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm2.data`), ['10.0.0.2/24']);
  });

  it('no claim about to get an address (its VM being deleted): no pod is read', async () => {
    const w = setUp();
    w.vms.upsert({ ...vm('vm2', NETS), metadata: { ...vm('vm2', NETS).metadata, deletionTimestamp: '2025-01-01T00:00:10Z' } });
    await w.pass(NET);
    assert.deepEqual(w.podReads, []);
  });

  it('a claim asking for that address is refused, naming the VM that has it', async () => {
    const w = setUp();
    w.vms.upsert(vm('vm3', NETS, { data: ['10.0.0.1'] }));
    w.addClaim(claim('vm3', 'data', NET));
    await w.pass(NET);
    const cond = w.server.get(`${NS}/vm3.data`)!.status!.conditions![0]!;
    assert.equal(cond.reason, 'IPAddressConflict');
    assert.match(cond.message!, /10\.0\.0\.1 is already held by VMI vms\/vm1 \(no claim records its address\)/);
  });

  it('its pods cannot be read: no new address on the network, and a retry', async () => {
    const w = setUp();
    w.podReadFault = true;
    assert.deepEqual(await w.pass(NET), { requeue: true });
    assert.deepEqual(w.writes, []);
    w.podReadFault = false;
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm2.data`), ['10.0.0.2/24']);
  });

  it('a steady state reads no pod: the running VMs are looked at only while a claim waits for an address', async () => {
    const w = setUp();
    await w.pass(NET);
    const reads = w.podReads.length;
    assert.ok(reads > 0);
    w.deliver();
    await w.pass(NET);
    assert.equal(w.podReads.length, reads);
  });

  it('a terminating VMI: the claim made while its guest still runs takes the address it has', async () => {
    const w = new FakeWorld();
    w.nads.upsert(allocatorNad('nad-blue', NET, '10.0.0.0/24'));
    w.vms.upsert(vm('vm1', NETS));
    const vmi = runningVmi('vm1', NETS);
    vmi.metadata.deletionTimestamp = '2025-01-01T00:00:09Z';
    w.vmis.upsert(vmi);
    w.pods.set(VMI_UID, [launcherPod('virt-launcher-vm1-abc', VMI_UID, [{ ...status[0]!, ips: ['10.0.0.42'] }], { deleting: true })]);
    w.addClaim(vm1Claim());
    await w.pass(NET);
    assert.deepEqual(w.held().get(`${NS}/vm1.data`), ['10.0.0.42/24']);
  });
});
