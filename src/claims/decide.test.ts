import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import { CLAIM_FINALIZER, VM_LABEL } from './constants.ts';
import { claimNameFor, decide, needsLauncherPodRead, persistentNetworks, type DecideInput, type Plan } from './decide.ts';
import {
  annotatedBridgeNad,
  applyPlan,
  claim,
  claimOf,
  claimOf as claimOfFixture,
  multus,
  nad,
  nadMap,
  NS,
  ovnNad,
  ownerRefTo,
  podNetwork,
  vmiSpec,
  standaloneVmi,
  virtualMachine,
  VM_NAME,
  VM_UID,
  vmiOf,
  type NetSpec,
} from '../../test/objects.ts';
import { allocatorNad } from '../../test/allocator-world.ts';
import { claimName, collisionClaimName, podInterfaceName, referenceClaimName, swapClaimName } from './names.ts';

const KEY = { namespace: NS, name: VM_NAME };

function run(input: Partial<DecideInput>): Plan {
  return decide({ key: KEY, nads: new Map(), claims: [], gateEnabled: true, ...input });
}

/** The writes of a plan by claim name, for compact assertions. */
function writes(plan: Plan): { creates: string[]; removeFinalizers: string[]; deletes: string[] } {
  return {
    creates: plan.creates.map((c) => c.metadata.name),
    removeFinalizers: plan.removeFinalizers.map((w) => w.name),
    deletes: plan.deletes.map((w) => w.name),
  };
}

const NONE = { creates: [], removeFinalizers: [], deletes: [] };
const hasWrites = (plan: Plan): boolean => plan.creates.length + plan.adopts.length + plan.removeFinalizers.length + plan.deletes.length > 0;
const reasons = (plan: Plan): string[] => plan.problems.map((p) => p.reason);

const blue = ovnNad('blue');
const green = annotatedBridgeNad('green');
const plainNad = ovnNad('plain', { persistent: false });
const NADS = nadMap(blue, green, plainNad);
const nets: NetSpec[] = [podNetwork(), multus('blue', 'blue'), multus('green', 'green'), multus('plain', 'plain')];

/** A VM with two persistent networks (blue, green), one ordinary (plain), and the cluster pod network. */
const vm = (opts: Parameters<typeof virtualMachine>[0] = {}): VirtualMachine => virtualMachine({ networks: nets, ...opts });
const claimsOf = (owner: VirtualMachine | VirtualMachineInstance, ...networks: string[]): IPAMClaim[] => networks.map((network) => claimOf(owner, network));
/** Claims of both persistent networks, as this project made them. */
const both = (owner: VirtualMachine | VirtualMachineInstance): IPAMClaim[] => claimsOf(owner, 'blue', 'green');
/** A VM with blue being hot-unplugged. */
const unplugging = (): VirtualMachine => virtualMachine({ networks: [podNetwork(), multus('blue', 'blue', { absent: true }), multus('green', 'green')] });
/** A VM with a single Multus network. */
const vmOn = (network: string, nadRef = network): VirtualMachine => virtualMachine({ networks: [multus(network, nadRef)] });

/** What a decision must show: each field given is checked, and nothing else. */
interface Expect {
  writes?: Partial<ReturnType<typeof writes>>;
  creates?: string[];
  reasons?: string[];
  retry?: boolean;
  wanted?: Plan['wanted'];
  /** The status of each wanted claim, in order. */
  statuses?: string[];
  /** The plan has no owner. */
  noOwner?: boolean;
}

function check(plan: Plan, expected: Expect): void {
  if (expected.writes) assert.deepEqual(writes(plan), { ...NONE, ...expected.writes });
  if (expected.creates) assert.deepEqual(writes(plan).creates, expected.creates);
  if (expected.reasons) assert.deepEqual(reasons(plan), expected.reasons);
  if (expected.retry !== undefined) assert.equal(plan.retry, expected.retry);
  if (expected.wanted) assert.deepEqual(plan.wanted, expected.wanted);
  if (expected.noOwner) assert.equal(plan.owner, undefined);
  if (expected.statuses)
    assert.deepEqual(
      plan.wanted.map((w) => w.status),
      expected.statuses,
    );
}

/** A table of decisions: title, input (a function, so that fixtures are made per case), what the plan shows. */
function decisions(rows: [string, () => Partial<DecideInput>, Expect][]): void {
  for (const [title, input, expected] of rows) it(title, () => check(run(input()), expected));
}

const on = (...networks: NetSpec[]): VirtualMachine => virtualMachine({ networks });
/** A VM, the claims of both its persistent networks, and whatever else the case adds. */
const withBoth = (theVm: VirtualMachine, more: Partial<DecideInput> = {}): Partial<DecideInput> => ({ vm: theVm, nads: NADS, claims: both(theVm), ...more });

describe('spec section 5: lifecycle', () => {
  const BOTH = ['vm1.blue', 'vm1.green'];
  decisions([
    [
      'VM stopped: the VMI and pod are gone, the claims and their finalizers stay (no writes)',
      () => withBoth(vm({ running: false })),
      { writes: {}, reasons: [] },
    ],
    [
      'VM started again: the same claims are reused, with no new objects and no writes',
      () => withBoth(vm(), { vmi: vmiOf(vm(), { uid: 'vmi-uid-2' }) }),
      { writes: {}, statuses: ['created', 'created'] },
    ],
    [
      'live migration: source and target pods of the VMI change nothing',
      () => withBoth(vm(), { vmi: vmiOf(vm(), { migrating: true, activePods: { source: 'node-1', target: 'node-2' } }) }),
      { writes: {}, retry: false },
    ],
    [
      'VM deleted (background): the finalizer holds while the VMI is still there, and a VM on its way out is not nagged about its networks',
      () => {
        const theVm = vm({ deleting: true });
        return withBoth(theVm, { vmi: vmiOf(theVm, { deleting: true }) });
      },
      { writes: {}, reasons: [] },
    ],
    [
      'VM deleted (background): the finalizer holds while the VM is gone but its VMI is not, and a VMI whose VM is gone owns nothing',
      () => ({ vmi: vmiOf(vm(), { deleting: true }), nads: NADS, claims: both(vm()) }),
      { writes: {}, noOwner: true },
    ],
    [
      'VM deleted (background): the claims lose the finalizer when VM and VMI are both gone',
      () => ({ nads: NADS, claims: both(vm()) }),
      { writes: { removeFinalizers: BOTH }, noOwner: true },
    ],
    [
      'standalone VMI: the finalizer holds while the VMI is terminating with active pods',
      () => {
        const vmi = standaloneVmi({ networks: nets, deleting: true });
        return { vmi, nads: NADS, claims: both(vmi) };
      },
      { writes: {} },
    ],
    [
      'standalone VMI: the claims lose the finalizer when the VMI is gone',
      () => ({ nads: NADS, claims: both(standaloneVmi({ networks: nets })) }),
      { writes: { removeFinalizers: BOTH } },
    ],
    [
      'hotplug an interface: a new claim appears for it, and only for it',
      () => withBoth(on(...nets, multus('blue2', 'blue2')), { vmi: vmiOf(vm()), nads: nadMap(blue, green, plainNad, ovnNad('blue2')) }),
      { writes: { creates: ['vm1.blue2'] } },
    ],
    [
      'hot-unplug (state: absent): the deleted claim then loses its finalizer',
      () => {
        const theVm = unplugging();
        const vmi = vmiOf(theVm, { networks: [podNetwork(), multus('green', 'green')] });
        return { vm: theVm, vmi, nads: NADS, claims: [claimOf(theVm, 'blue', { deleting: true }), claimOf(theVm, 'green')] };
      },
      { writes: { removeFinalizers: ['vm1.blue'] } },
    ],
    [
      'hot-unplug (state: absent): a network removed from a stopped VM loses its claim',
      () => withBoth(virtualMachine({ running: false, networks: [podNetwork(), multus('green', 'green')] })),
      { writes: { deletes: ['vm1.blue'] } },
    ],
    [
      'feature gate turned off: deleted VMs still release their claims (no stranded finalizer)',
      () => withBoth(vm({ deleting: true }), { gateEnabled: false }),
      { writes: { removeFinalizers: BOTH } },
    ],
    [
      'feature gate turned off: claims of unplugged networks are still cleaned up',
      () => {
        const theVm = on(podNetwork(), multus('green', 'green'));
        return withBoth(theVm, { vmi: vmiOf(theVm), gateEnabled: false, namedByRunningPods: new Set() });
      },
      { writes: { deletes: ['vm1.blue'] } },
    ],
    [
      'claim with the same name but another owner UID: the leftover keeps its finalizer while its VMI lives',
      () => ({
        vm: vm(),
        vmi: vmiOf(vm({ uid: 'vm-uid-0' }), { deleting: true }),
        nads: NADS,
        claims: [claimOf(vm({ uid: 'vm-uid-0' }), 'blue'), claimOf(vm(), 'green')],
      }),
      { writes: {}, reasons: ['ClaimOwnedByAnotherObject'] },
    ],
    [
      'claim with the same name but another owner UID: a claim of another kind of owner is never touched',
      () => {
        const foreign = claim({ name: 'vm1.blue', owners: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'cm-uid' }], finalizers: [CLAIM_FINALIZER] });
        return { vm: vm(), nads: NADS, claims: [foreign, claimOf(vm(), 'green')] };
      },
      { writes: {}, reasons: ['ClaimOwnedByAnotherObject'], retry: true },
    ],
    [
      'claim terminating (deletionTimestamp): wait for it to go',
      () => ({ vm: vm(), nads: NADS, claims: [claimOf(vm({ uid: 'vm-uid-0' }), 'blue', { deleting: true, finalizers: [] }), claimOf(vm(), 'green')] }),
      { writes: {}, reasons: ['ClaimTerminating'], retry: true },
    ],
    [
      'claim terminating (deletionTimestamp): then create the new one; NAD missing / invalid JSON / empty config: once the NAD appears or is fixed, the claim is created',
      () => ({ vm: vm(), nads: NADS, claims: [claimOf(vm(), 'green')] }),
      { writes: { creates: ['vm1.blue'] } },
    ],
    [
      'claim created by hand, no owner: never adopted or deleted; reported and retried',
      // Without our finalizer it is not ours, whatever its label says (ORPHAN needs both).
      () => ({ vm: vm(), nads: NADS, claims: [claim({ name: 'vm1.blue', network: 'net-blue', labels: { [VM_LABEL]: VM_NAME } }), claimOf(vm(), 'green')] }),
      { writes: {}, reasons: ['ClaimNotOwned'], retry: true },
    ],
    [
      'claim created by hand, no owner: left alone when the VM is deleted too',
      () => ({ nads: NADS, claims: [claim({ name: 'vm1.blue', labels: { [VM_LABEL]: VM_NAME }, finalizers: ['example.com/hand-made'] })] }),
      { writes: {} },
    ],
    [
      'controller restarted at any moment: half-made claims are completed, nothing is duplicated',
      () => ({ vm: vm(), vmi: vmiOf(vm()), nads: NADS, claims: [claimOf(vm(), 'green')] }),
      { writes: { creates: ['vm1.blue'] } },
    ],
    [
      'controller restarted at any moment: claims already released are not written again',
      () => ({ nads: NADS, claims: ['blue', 'green'].map((network) => claimOf(vm(), network, { finalizers: [] })) }),
      { writes: {} },
    ],
  ]);

  it('create VM (running): claims with owner reference, finalizer and label for each persistent network', () => {
    const theVm = vm();
    const plan = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS });
    assert.deepEqual(writes(plan), { ...NONE, creates: ['vm1.blue', 'vm1.green'] });
    assert.deepEqual(plan.creates[0], {
      apiVersion: 'k8s.cni.cncf.io/v1alpha1',
      kind: 'IPAMClaim',
      metadata: {
        name: 'vm1.blue',
        namespace: NS,
        labels: { [VM_LABEL]: VM_NAME },
        finalizers: [CLAIM_FINALIZER],
        ownerReferences: [
          {
            apiVersion: 'kubevirt.io/v1',
            kind: 'VirtualMachine',
            name: VM_NAME,
            uid: VM_UID,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { network: 'net-blue', interface: podInterfaceName('blue') },
    });
    assert.equal(plan.creates[1]?.spec.network, 'net-green');
    assert.deepEqual(plan.owner, { kind: 'VirtualMachine', name: VM_NAME, uid: VM_UID });
    assert.deepEqual(plan.wanted, [
      { network: 'blue', claim: 'vm1.blue', status: 'wanted' },
      { network: 'green', claim: 'vm1.green', status: 'wanted' },
    ]);
    assert.deepEqual(plan.problems, []);
    assert.equal(plan.retry, false);
  });

  it('create VM (running or stopped): the claims are planned before the VMI and its launcher pod exist, so that a start reuses them', () => {
    for (const running of [true, false]) assert.deepEqual(writes(run({ vm: vm({ running }), nads: NADS })).creates, ['vm1.blue', 'vm1.green']);
  });

  it('VM deleted (background): the claims lose the finalizer once the VMI is gone, for GC to remove them', () => {
    const theVm = vm({ deleting: true });
    const claims = claimsOf(theVm, 'blue', 'green');
    const plan = run({ vm: theVm, nads: NADS, claims });
    assert.deepEqual(writes(plan), { ...NONE, removeFinalizers: ['vm1.blue', 'vm1.green'] });
    assert.deepEqual(plan.removeFinalizers[0], {
      name: 'vm1.blue',
      uid: claims[0]?.metadata.uid,
      resourceVersion: claims[0]?.metadata.resourceVersion,
    });
  });

  it('VM deleted (foreground): GC marked the claims; the finalizer holds while the VMI is there, and goes once it is gone (the VM can finish)', () => {
    const theVm = vm({ deleting: true, finalizers: ['foregroundDeletion'] });
    const claims = ['blue', 'green'].map((network) => claimOf(theVm, network, { deleting: true }));
    assert.deepEqual(writes(run({ vm: theVm, vmi: vmiOf(theVm, { deleting: true }), nads: NADS, claims })), NONE);
    assert.deepEqual(writes(run({ vm: theVm, nads: NADS, claims })), { ...NONE, removeFinalizers: ['vm1.blue', 'vm1.green'] });
  });

  it('standalone VMI: the VMI owns the claims', () => {
    const vmi = standaloneVmi({ networks: nets });
    const plan = run({ vmi, nads: NADS });
    assert.deepEqual(writes(plan).creates, ['vm1.blue', 'vm1.green']);
    assert.deepEqual(plan.creates[0]?.metadata.ownerReferences, [
      {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        name: VM_NAME,
        uid: vmi.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.deepEqual(plan.owner, { kind: 'VirtualMachineInstance', name: VM_NAME, uid: vmi.metadata.uid });
  });

  it('standalone VMI: the claims lose the finalizer when the VMI is terminating with no active pods and a fresh read finds no launcher pod', () => {
    const vmi = standaloneVmi({ networks: nets, deleting: true, activePods: {} });
    const claims = claimsOf(vmi, 'blue', 'green');
    assert.equal(needsLauncherPodRead({ vmi, claims }), true);
    assert.deepEqual(writes(run({ vmi, nads: NADS, claims, launcherPodsGone: true })), { ...NONE, removeFinalizers: ['vm1.blue', 'vm1.green'] });
    // activePods lags pod creation (a foreground delete of a VMI whose pod is starting): without the read, or when
    // it finds a pod, the claims are held until the VMI is gone
    assert.deepEqual(writes(run({ vmi, nads: NADS, claims })), NONE);
    assert.deepEqual(writes(run({ vmi, nads: NADS, claims, launcherPodsGone: false })), NONE);
  });

  it('standalone VMI: no pod read is asked for while the VMI runs, has active pods, or belongs to a VM', () => {
    const running = standaloneVmi({ networks: nets, activePods: {} });
    const withPods = standaloneVmi({ networks: nets, deleting: true });
    const ofVm = vmiOf(vm(), { deleting: true, activePods: {} });
    for (const v of [running, withPods, ofVm]) assert.equal(needsLauncherPodRead({ vmi: v, claims: claimsOf(v, 'blue') }), false);
  });

  it('hot-unplug (state: absent): nothing happens while the VMI still has the interface', () => {
    const theVm = unplugging();
    const plan = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: claimsOf(theVm, 'blue', 'green') });
    assert.deepEqual(writes(plan), NONE);
    assert.deepEqual(
      plan.wanted.map((w) => w.network),
      ['green'],
      'an absent interface wants no claim',
    );
  });

  it('hot-unplug (state: absent): once the interface is gone from the VMI and from every launcher pod, its claim is deleted', () => {
    const theVm = unplugging();
    const vmi = vmiOf(theVm, { networks: [podNetwork(), multus('green', 'green')] });
    const claims = claimsOf(theVm, 'blue', 'green');
    const first = run({ vm: theVm, vmi, nads: NADS, claims });
    assert.equal(first.needsPodRead, true, 'the launcher pods are read first');
    assert.deepEqual(writes(first), NONE);
    // A pod still has the element (the unplug ends with a migration): OVN-Kubernetes would free the address under it.
    assert.deepEqual(writes(run({ vm: theVm, vmi, nads: NADS, claims, namedByRunningPods: new Set(['vm1.blue', 'vm1.green']) })), NONE);
    const plan = run({ vm: theVm, vmi, nads: NADS, claims, namedByRunningPods: new Set(['vm1.green']) });
    assert.deepEqual(writes(plan), { ...NONE, deletes: ['vm1.blue'] });
    assert.deepEqual(plan.deletes[0], {
      name: 'vm1.blue',
      uid: claims[0]?.metadata.uid,
      resourceVersion: claims[0]?.metadata.resourceVersion,
    });
  });

  it('hot-unplug (state: absent): plugged back while its claim is being deleted, the claim is created anew', () => {
    const theVm = vm();
    const vmiWithout = vmiOf(theVm, { networks: [podNetwork(), multus('green', 'green'), multus('plain', 'plain')] });
    const deleted = [claimOf(theVm, 'blue', { deleting: true }), claimOf(theVm, 'green')];
    const first = run({ vm: theVm, vmi: vmiWithout, nads: NADS, claims: deleted });
    assert.deepEqual(writes(first), { ...NONE, removeFinalizers: ['vm1.blue'] });
    assert.deepEqual(reasons(first), ['ClaimTerminating']);
    const second = run({ vm: theVm, vmi: vmiWithout, nads: NADS, claims: applyPlan(deleted, first) });
    assert.deepEqual(writes(second), { ...NONE, creates: ['vm1.blue'] });
  });

  it('feature gate turned off: no new claims; existing claims of networks in use are kept', () => {
    const theVm = vm();
    check(run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, gateEnabled: false }), { writes: {}, wanted: [], reasons: [] });
    assert.deepEqual(writes(run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: both(theVm), gateEnabled: false })), NONE);
  });

  it('NAD edited to drop allowPersistentIPs: no new claim for it; the existing claim is kept while in use, and goes with the VM', () => {
    const theVm = vm();
    const nads = nadMap(ovnNad('blue', { persistent: false }), green, plainNad);
    check(run({ vm: theVm, vmi: vmiOf(theVm), nads }), { writes: { creates: ['vm1.green'] }, reasons: [] });
    assert.deepEqual(writes(run({ vm: theVm, vmi: vmiOf(theVm), nads, claims: claimsOf(theVm, 'blue', 'green') })), NONE);
    const deleting = vm({ deleting: true });
    assert.deepEqual(writes(run({ vm: deleting, nads, claims: claimsOf(deleting, 'blue', 'green') })), {
      ...NONE,
      removeFinalizers: ['vm1.blue', 'vm1.green'],
    });
  });

  it('claim with the same name but another owner UID: not adopted, reported, retried; the leftover released', () => {
    const earlier = vm({ uid: 'vm-uid-0' });
    const theVm = vm();
    const leftover = claimOf(earlier, 'blue');
    const plan = run({ vm: theVm, nads: NADS, claims: [leftover, claimOf(theVm, 'green')] });
    assert.deepEqual(writes(plan), { ...NONE, removeFinalizers: ['vm1.blue'] });
    assert.deepEqual(reasons(plan), ['ClaimOwnedByAnotherObject']);
    assert.equal(plan.problems[0]?.claim, 'vm1.blue');
    assert.equal(plan.problems[0]?.network, 'blue');
    assert.match(plan.problems[0]?.message ?? '', /vm-uid-0/);
    assert.equal(plan.retry, true);
    assert.deepEqual(plan.wanted[0], {
      network: 'blue',
      claim: 'vm1.blue',
      status: 'blocked',
      reason: 'ClaimOwnedByAnotherObject',
    });
  });

  const brokenNads: [string, NetworkAttachmentDefinition, string][] = [
    ['NAD missing', nad('other', {}), 'NetworkAttachmentDefinitionNotFound'],
    ['invalid JSON', nad('blue', '{"name": "net-blue", "allowPersistentIPs": tr'), 'InvalidNetworkConfig'],
    ['empty config', nad('blue', ''), 'InvalidNetworkConfig'],
    ['no config at all', nad('blue', undefined), 'InvalidNetworkConfig'],
  ];
  for (const [title, broken, reason] of brokenNads) {
    it(`NAD missing / invalid JSON / empty config: ${title} gives no claim and ${reason}, without retry`, () => {
      const theVm = vm();
      const plan = run({ vm: theVm, vmi: vmiOf(theVm), nads: nadMap(broken, green, plainNad) });
      assert.deepEqual(writes(plan), { ...NONE, creates: ['vm1.green'] });
      assert.deepEqual(reasons(plan), [reason]);
      assert.equal(plan.problems[0]?.network, 'blue');
      assert.equal(plan.retry, false, 'a NAD event brings the key back');
      assert.deepEqual(plan.wanted[0], { network: 'blue', claim: 'vm1.blue', status: 'blocked', reason });
    });
  }

  it('controller restarted at any moment: a finalizer is never removed early, whatever was done before', () => {
    const theVm = vm();
    const vmi = vmiOf(theVm);
    for (const deleting of [false, true]) {
      const claims = ['blue', 'green'].map((n) => claimOf(theVm, n, { deleting }));
      const plan = run({ vm: theVm, vmi, nads: NADS, claims });
      assert.deepEqual(writes(plan).removeFinalizers, []);
    }
  });
});

describe('spec section 4: when a claim is wanted', () => {
  decisions([
    ['§4.1 the feature gate PersistentIPs must be on', () => ({ vm: vm(), nads: NADS, gateEnabled: false }), { writes: {} }],
    ['§4.2 the pod network of a namespace without a primary network gets nothing', () => ({ vm: on(podNetwork()), nads: NADS }), { writes: {}, reasons: [] }],
    [
      '§4.2 a primary network elsewhere does not count for the pod network',
      () => ({ vm: on(podNetwork()), nads: nadMap(ovnNad('udn', { role: 'primary', namespace: 'other' })) }),
      { writes: {} },
    ],
    [
      '§4.2 two primary networks in one namespace are reported, not guessed between',
      () => ({ vm: on(podNetwork()), nads: nadMap(ovnNad('udn-a', { role: 'primary' }), ovnNad('udn-b', { role: 'primary' })) }),
      { writes: {}, reasons: ['AmbiguousPrimaryNetwork'] },
    ],
    ['§4.2 an interface with state: absent wants no claim', () => ({ vm: on(multus('blue', 'blue', { absent: true })), nads: NADS }), { writes: {} }],
    [
      '§4.2 a Multus network that replaces the default network (default: true) is not secondary',
      () => ({ vm: on(multus('blue', 'blue', { default: true })), nads: NADS }),
      { writes: {} },
    ],
    ['§4.3 the NAD must exist', () => ({ vm: on(multus('blue', 'nope')), nads: NADS }), { reasons: ['NetworkAttachmentDefinitionNotFound'], writes: {} }],
    ['§4.3 the NAD opts in through allowPersistentIPs in its config', () => ({ vm: on(multus('blue', 'blue')), nads: NADS }), { creates: ['vm1.blue'] }],
    ["§4.3 the NAD opts in through the project's annotation", () => ({ vm: on(multus('green', 'green')), nads: NADS }), { creates: ['vm1.green'] }],
    [
      '§4.3 a NAD that does not opt in gives no claim and no problem',
      () => ({ vm: on(multus('plain', 'plain')), nads: NADS }),
      { writes: {}, reasons: [], wanted: [] },
    ],
    [
      '§4.4 the NAD must be in the VM namespace: a persistent NAD elsewhere is reported',
      () => ({ vm: on(multus('shared', 'infra/shared')), nads: nadMap(ovnNad('shared', { namespace: 'infra' })) }),
      { writes: {}, reasons: ['CrossNamespacePersistentNetwork'], retry: false },
    ],
    [
      '§4.4 a non-persistent NAD elsewhere is an ordinary network',
      () => ({ vm: on(multus('shared', 'infra/shared')), nads: nadMap(ovnNad('shared', { namespace: 'infra', persistent: false })) }),
      { writes: {}, reasons: [] },
    ],
    [
      '§4.4 a NAD named with the VM namespace spelled out is in the VM namespace',
      () => ({ vm: on(multus('blue', `${NS}/blue`)), nads: NADS }),
      { creates: ['vm1.blue'] },
    ],
    [
      '§4 topologies: layer3 cannot keep addresses',
      () => ({ vm: vmOn('l3'), nads: nadMap(ovnNad('l3', { topology: 'layer3' })) }),
      { reasons: ['UnsupportedTopology'], writes: {} },
    ],
    [
      '§4 topologies: localnet works for a secondary network, with or without subnets',
      () => ({ vm: on(multus('ln', 'ln')), nads: nadMap(ovnNad('ln', { topology: 'localnet', subnets: null })) }),
      { creates: ['vm1.ln'] },
    ],
    [
      '§4 topologies: a primary network must be layer2',
      () => ({ vm: on(podNetwork()), nads: nadMap(ovnNad('udn', { role: 'primary', topology: 'localnet' })) }),
      { reasons: ['UnsupportedTopology'] },
    ],
    [
      '§4 subnets: an OVN-Kubernetes layer2 network without subnets is reported',
      () => ({ vm: vmOn('blue'), nads: nadMap(ovnNad('blue', { subnets: null })) }),
      { reasons: ['MissingSubnets'], writes: {} },
    ],
    ['§4 subnets: other CNIs have no subnet requirement here', () => ({ vm: on(multus('green', 'green')), nads: NADS }), { reasons: [] }],
  ]);

  it('§4.2 a Multus secondary network gets a claim on its pod interface', () => {
    const plan = run({ vm: on(multus('blue', 'blue')), nads: NADS });
    assert.equal(plan.creates[0]?.spec.interface, podInterfaceName('blue'));
  });

  it('§4.2 the pod network gets a claim on eth0 when the namespace has a persistent primary network', () => {
    const primary = ovnNad('udn', { role: 'primary', networkName: 'ns-udn' });
    const plan = run({ vm: on(podNetwork('default')), nads: nadMap(primary) });
    assert.deepEqual(writes(plan).creates, ['vm1.default']);
    assert.deepEqual(plan.creates[0]?.spec, { network: 'ns-udn', interface: 'eth0' });
  });
});

describe('NAD problems', () => {
  const nameless = nad('blue', { type: 'ovn-k8s-cni-overlay', topology: 'layer2', subnets: '10.0.0.0/24', allowPersistentIPs: true });
  decisions([
    [
      'a persistent NAD without a network name is reported as MissingNetworkName',
      () => ({ vm: on(multus('blue', 'blue')), nads: nadMap(nameless) }),
      { reasons: ['MissingNetworkName'] },
    ],
    [
      'a badly typed key on a NAD that does not opt in is none of our business',
      () => ({ vm: vmOn('blue'), nads: nadMap(nad('blue', { name: 'b', subnets: 5 })) }),
      { reasons: [] },
    ],
    [
      'a badly typed key on a persistent NAD is reported',
      () => ({ vm: vmOn('blue'), nads: nadMap(nad('blue', { name: 'b', allowPersistentIPs: true, topology: 2 })) }),
      { reasons: ['InvalidNetworkConfig'] },
    ],
    [
      'a networkName that is neither "name" nor "namespace/name" is reported',
      () => ({ vm: on(multus('blue', 'a/b/c')), nads: NADS }),
      { reasons: ['InvalidNetworkReference'] },
    ],
  ]);

  it('allowPersistentIPs written as a string is reported, not guessed', () => {
    const plan = run({ vm: vmOn('blue'), nads: nadMap(nad('blue', { name: 'b', allowPersistentIPs: 'true' })) });
    assert.deepEqual(reasons(plan), ['InvalidNetworkConfig']);
    assert.match(plan.problems[0]?.message ?? '', /allowPersistentIPs/);
  });

  it('a conflist NAD opting in on its plugin gets a claim named after the conflist', () => {
    const list = nad('blue', {
      cniVersion: '1.0.0',
      name: 'list',
      plugins: [{ type: 'ovn-k8s-cni-overlay', topology: 'localnet', allowPersistentIPs: true }],
    });
    const plan = run({ vm: on(multus('blue', 'blue')), nads: nadMap(list) });
    assert.equal(plan.creates[0]?.spec.network, 'list');
  });
});

describe('names', () => {
  it('networks net_a and net.a of one VM get two different claims', () => {
    const theVm = virtualMachine({ networks: [multus('net_a', 'blue'), multus('net.a', 'blue')] });
    const plan = run({ vm: theVm, nads: NADS });
    assert.deepEqual(writes(plan).creates, [claimName(VM_NAME, 'net_a'), 'vm1.net.a']);
    assert.notEqual(plan.creates[0]?.metadata.name, plan.creates[1]?.metadata.name);
  });

  it('a network deliberately named after the hashed claim of another is reported, not merged', () => {
    const hashed = claimName(VM_NAME, 'net_a').slice(`${VM_NAME}.`.length);
    const theVm = virtualMachine({ networks: [multus('net_a', 'blue'), multus(hashed, 'blue')] });
    check(run({ vm: theVm, nads: NADS }), { creates: [claimName(VM_NAME, 'net_a')], reasons: ['ClaimNameConflict'] });
  });

  it('a claim made by kubevirt/ipam-extensions under the plain name is adopted as is', () => {
    const theVm = virtualMachine({ networks: [multus('blue', 'blue')] });
    const reference = claim({
      name: 'vm1.blue',
      owners: [ownerRefTo(theVm)],
      finalizers: [CLAIM_FINALIZER],
      labels: { [VM_LABEL]: VM_NAME },
      network: 'net-blue',
    });
    const plan = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: [reference] });
    assert.deepEqual(writes(plan), NONE);
  });

  it('a claim kubevirt/ipam-extensions made under its own name for net_a is not deleted while net_a is in use', () => {
    const theVm = virtualMachine({ networks: [multus('net_a', 'blue')] });
    const reference = claim({
      name: referenceClaimName(VM_NAME, 'net_a'),
      owners: [ownerRefTo(theVm)],
      finalizers: [CLAIM_FINALIZER],
      labels: { [VM_LABEL]: VM_NAME },
    });
    const plan = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: [reference] });
    assert.deepEqual(writes(plan), { ...NONE, creates: [claimName(VM_NAME, 'net_a')] });
  });

  it('a long VM name gets a valid label-less claim rather than an uncreatable one', () => {
    const long = 'v'.repeat(70);
    const theVm = virtualMachine({ name: long, networks: [multus('blue', 'blue')] });
    const plan = decide({ key: { namespace: NS, name: long }, vm: theVm, nads: NADS, claims: [], gateEnabled: true });
    assert.equal(plan.creates[0]?.metadata.name, `${long}.blue`);
    assert.equal(plan.creates[0]?.metadata.labels, undefined);
  });
});

describe('persistentNetworks', () => {
  it('gives the webhook the claim of each persistent network of a VMI spec, and what blocks the others', () => {
    const extra = [multus('gone', 'nope'), multus('blue-off', 'blue', { absent: true })];
    const vmi = vmiOf(virtualMachine({ networks: [...nets, ...extra] }));
    assert.deepEqual(persistentNetworks(KEY, vmi.spec, NADS), [
      { network: 'blue', claim: 'vm1.blue', claimSpec: { network: 'net-blue', interface: podInterfaceName('blue') } },
      {
        network: 'green',
        claim: 'vm1.green',
        claimSpec: { network: 'net-green', interface: podInterfaceName('green') },
      },
      {
        network: 'gone',
        claim: 'vm1.gone',
        problem: {
          reason: 'NetworkAttachmentDefinitionNotFound',
          message: `NetworkAttachmentDefinition ${NS}/nope does not exist`,
        },
      },
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Properties over generated states: VMs, VMIs, NADs and claims of several incarnations of one name, mixed freely.

const OLD_VM_UID = 'vm-uid-0';
const NETWORK_POOL: NetSpec[] = [
  podNetwork('default'),
  multus('blue', 'blue'),
  multus('green', 'green'),
  multus('plain', 'plain'),
  multus('net_a', 'blue'),
  multus('net.a', 'blue'),
  multus('l3', 'l3'),
  multus('broken', 'broken'),
  multus('shared', 'infra/shared'),
  multus('missing', 'missing'),
];
const NAD_POOL = [
  blue,
  green,
  plainNad,
  ovnNad('l3', { topology: 'layer3' }),
  nad('broken', '{'),
  ovnNad('shared', { namespace: 'infra' }),
  ovnNad('udn', { role: 'primary' }),
];

/** Mostly true: the interesting states are mostly live ones. */
const mostly = fc.constantFrom(true, true, true, false);
const netSpecs = fc
  .subarray(NETWORK_POOL)
  .chain((picked) => fc.tuple(...picked.map((net) => mostly.map((present) => ({ ...net, absent: !present })))))
  .map((picked) => picked as NetSpec[]);

const vmArb = fc.option(
  fc.record({
    uid: fc.constantFrom(VM_UID, VM_UID, OLD_VM_UID),
    deleting: mostly.map((b) => !b),
    running: fc.boolean(),
    networks: netSpecs,
  }),
  { nil: undefined, freq: 4 },
);
const vmiArb = fc.option(
  fc.record({
    controller: fc.constantFrom<string | undefined>(VM_UID, OLD_VM_UID, undefined),
    uid: fc.constantFrom('vmi-uid-1', 'vmi-uid-2'),
    deleting: mostly.map((b) => !b),
    activePods: fc.boolean(),
    networks: netSpecs,
  }),
  { nil: undefined },
);
const ownerArb = fc.constantFrom(
  { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: VM_NAME, uid: VM_UID },
  { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: VM_NAME, uid: OLD_VM_UID },
  { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: VM_NAME, uid: 'vmi-uid-1' },
  { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: VM_NAME, uid: 'vmi-uid-2' },
  { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm2', uid: 'vm2-uid' },
  { apiVersion: 'v1', kind: 'ConfigMap', name: VM_NAME, uid: 'cm-uid' },
);
const claimArb = fc.record({
  name: fc.constantFrom(...NETWORK_POOL.map((net) => claimName(VM_NAME, net.name)), referenceClaimName(VM_NAME, 'net_a'), 'vm1.gone', 'vm2.blue'),
  owners: fc.array(ownerArb, { maxLength: 2 }),
  finalizer: fc.boolean(),
  label: fc.boolean(),
  deleting: fc.boolean(),
  iface: fc.constantFrom('', 'eth0', podInterfaceName('blue'), podInterfaceName('gone')),
});

const inputArb = fc
  .record({
    vm: vmArb,
    vmi: vmiArb,
    nads: fc.subarray(NAD_POOL),
    claims: fc.uniqueArray(claimArb, { selector: (c) => c.name, maxLength: 8 }),
    gateEnabled: mostly,
  })
  .map((gen): DecideInput => {
    const theVm = gen.vm && virtualMachine({ ...gen.vm });
    let vmi: VirtualMachineInstance | undefined;
    if (gen.vmi) {
      const { uid, deleting, networks, controller } = gen.vmi;
      const opts = { uid, deleting, networks, ...(gen.vmi.activePods ? {} : { activePods: {} }) };
      vmi = controller === undefined ? standaloneVmi(opts) : vmiOf(virtualMachine({ uid: controller }), opts);
    }
    const claims = gen.claims.map((c) =>
      claim({
        name: c.name,
        owners: c.owners,
        finalizers: c.finalizer ? [CLAIM_FINALIZER] : [],
        ...(c.label ? { labels: { [VM_LABEL]: VM_NAME } } : {}),
        deleting: c.deleting && c.finalizer,
        iface: c.iface,
      }),
    );
    return { key: KEY, vm: theVm, vmi, nads: nadMap(...gen.nads), claims, gateEnabled: gen.gateEnabled };
  });

const ofThisKey = (c: IPAMClaim): boolean => {
  const refs = (c.metadata.ownerReferences ?? []).filter((r) => r.apiVersion.startsWith('kubevirt.io/'));
  const kinds = ['VirtualMachine', 'VirtualMachineInstance'];
  // ORPHAN: no KubeVirt owner (others may have been added by someone), and both our finalizer and our label for this VM.
  const orphanOfOurs = refs.length === 0 && !!c.metadata.finalizers?.includes(CLAIM_FINALIZER) && c.metadata.labels?.[VM_LABEL] === VM_NAME;
  return orphanOfOurs || (refs.length > 0 && refs.every((r) => r.name === VM_NAME && kinds.includes(r.kind)));
};

describe('properties', () => {
  it('applying the creates and deciding again plans no more creates and the same other writes', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const first = decide(input);
        const created = applyPlan(input.claims, { ...first, adopts: [], removeFinalizers: [], deletes: [] });
        const second = decide({ ...input, claims: created });
        assert.deepEqual(second.creates, []);
        assert.deepEqual(writes(second).removeFinalizers, writes(first).removeFinalizers);
        assert.deepEqual(writes(second).deletes, writes(first).deletes);
      }),
      { numRuns: 1000 },
    );
  });

  it('with no claims at all, names every wanted claim as a lookup that finds nothing does', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const bare: DecideInput = { ...input, claims: [] };
        const plan = decide(bare);
        const ownerSpec = bare.vm ? bare.vm.spec?.template?.spec : bare.vmi?.spec;
        const named = persistentNetworks(bare.key, ownerSpec, bare.nads, () => undefined);
        for (const w of plan.wanted) assert.equal(w.claim, named.find((v) => v.network === w.network)?.claim, `network ${w.network}`);
        assert.deepEqual(
          plan.creates.map((c) => c.metadata.name),
          plan.wanted.filter((w) => w.status === 'wanted').map((w) => w.claim),
        );
      }),
      { numRuns: 1000 },
    );
  });

  it('applying every plan converges to a state that needs zero writes, each write guarded correctly', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        let claims = input.claims;
        for (let round = 0; round < 4; round++) {
          const plan = decide({ ...input, claims });
          if (!hasWrites(plan)) return;
          claims = applyPlan(claims, plan); // throws when a precondition is wrong
        }
        assert.fail('no steady state after 4 rounds');
      }),
      { numRuns: 1000 },
    );
  });

  it('never writes to a claim that is not owned by a VM or VMI of this key, nor twice to one claim', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const plan = decide(input);
        const byName = new Map(input.claims.map((c) => [c.metadata.name, c]));
        for (const write of [...plan.adopts, ...plan.removeFinalizers, ...plan.deletes]) {
          const target = byName.get(write.name);
          assert.ok(target && ofThisKey(target), write.name);
        }
        for (const adoption of plan.adopts) {
          const owners = byName.get(adoption.name)?.metadata.ownerReferences ?? [];
          assert.ok(!owners.some((r) => r.apiVersion.startsWith('kubevirt.io/')), `${adoption.name}: only a claim without a KubeVirt owner is adopted`);
          assert.equal(adoption.append, owners.length > 0, `${adoption.name}: other owners are kept`);
        }
        for (const d of plan.deletes) {
          const owners = byName.get(d.name)?.metadata.ownerReferences ?? [];
          assert.ok(owners.length === 0 || owners.some((r) => r.apiVersion.startsWith('kubevirt.io/')), `${d.name}: a claim someone else owns is not deleted`);
        }
        const touched = [...plan.adopts, ...plan.removeFinalizers, ...plan.deletes].map((w) => w.name);
        assert.equal(new Set(touched).size, touched.length);
        for (const create of plan.creates) assert.ok(!byName.has(create.metadata.name));
        for (const w of plan.removeFinalizers) {
          assert.ok(byName.get(w.name)?.metadata.finalizers?.includes(CLAIM_FINALIZER));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('never releases a claim whose network a live VMI of its owner still has', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const { vmi } = input;
        if (!vmi || vmi.metadata.deletionTimestamp) return;
        const vmiOwner = vmi.metadata.ownerReferences?.find((r) => r.controller)?.uid ?? vmi.metadata.uid;
        const used = new Set((vmi.spec?.networks ?? []).map((n) => claimName(VM_NAME, n.name)));
        const plan = decide(input);
        const byName = new Map(input.claims.map((c) => [c.metadata.name, c]));
        for (const write of [...plan.removeFinalizers, ...plan.deletes]) {
          const target = byName.get(write.name);
          const owned = target?.metadata.ownerReferences?.some((r) => r.uid === vmiOwner);
          assert.ok(!(owned && used.has(write.name)), write.name);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('creates claims only while the gate is on, for a live owner, fully formed', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const plan = decide(input);
        if (plan.creates.length === 0) return;
        assert.ok(input.gateEnabled);
        assert.ok(plan.owner);
        for (const create of plan.creates) {
          assert.deepEqual(create.metadata.finalizers, [CLAIM_FINALIZER]);
          assert.equal(create.metadata.ownerReferences?.[0]?.uid, plan.owner.uid);
          assert.equal(create.metadata.ownerReferences?.[0]?.controller, true);
          assert.equal(create.metadata.namespace, NS);
          assert.ok(create.spec.network !== '');
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('NAME: dotted-name collisions (VM `a` with network `b.c`, VM `a.b` with network `c`: both `a.b.c`)', () => {
  const bc = ovnNad('nad-bc');
  const nads = nadMap(bc);
  const vmA = virtualMachine({ name: 'a', uid: 'uid-a', networks: [multus('b.c', 'nad-bc')] });
  const vmAB = virtualMachine({ name: 'a.b', uid: 'uid-ab', networks: [multus('c', 'nad-bc')] });
  const decideFor = (vm: VirtualMachine, claims: IPAMClaim[]) =>
    decide({ key: { namespace: NS, name: vm.metadata.name }, vm, nads, claims, gateEnabled: true });
  const alt = collisionClaimName('a.b', 'c');
  const claimOf = (owner: VirtualMachine, network: string) => claimOfFixture(owner, network, { network: 'net-nad-bc' });

  it('the two VMs would share `a.b.c`', () => {
    assert.equal(claimName('a', 'b.c'), 'a.b.c');
    assert.equal(claimName('a.b', 'c'), 'a.b.c');
    assert.notEqual(collisionClaimName('a.b', 'c'), collisionClaimName('a', 'b.c'));
  });

  it('a VM whose name does not collide keeps `<vm>.<network>` (ipam-extensions compatibility)', () => {
    assert.deepEqual(writes(decideFor(vmA, [])).creates, ['a.b.c']);
    assert.equal(
      claimNameFor('a', 'b.c', () => undefined),
      'a.b.c',
    );
  });

  it("the second VM gets its own claim under the collision name, never the first one's", () => {
    const first = claimOf(vmA, 'b.c');
    const plan = decideFor(vmAB, [first]);
    assert.deepEqual(writes(plan), { ...NONE, creates: [alt] });
    assert.equal(plan.creates[0]?.metadata.ownerReferences?.[0]?.uid, 'uid-ab');
    assert.deepEqual(plan.problems, []);
    assert.deepEqual(plan.wanted, [{ network: 'c', claim: alt, status: 'wanted' }]);
    // And the first VM goes on using its own, with no writes.
    assert.deepEqual(
      writes(decideFor(vmA, [first, { ...plan.creates[0]!, metadata: { ...plan.creates[0]!.metadata, uid: 'x', resourceVersion: '1' } }])),
      NONE,
    );
  });

  it('whichever came first keeps the plain name: the other one moves (here VM `a`)', () => {
    const firstAB = claimOf(vmAB, 'c');
    const plan = decideFor(vmA, [firstAB]);
    assert.deepEqual(writes(plan).creates, [collisionClaimName('a', 'b.c')]);
  });

  it('stable: once a VM has its collision-named claim it keeps it after the other VM and its claim are gone', () => {
    const own = { ...claimOf(vmAB, 'c'), metadata: { ...claimOf(vmAB, 'c').metadata, name: alt } };
    const plan = decideFor(vmAB, [own]);
    assert.deepEqual(writes(plan), NONE, 'no new `a.b.c`, and the collision-named claim is not unplugged');
    assert.deepEqual(plan.wanted, [{ network: 'c', claim: alt, status: 'created' }]);
  });

  it('an earlier VM of the same name is not a collision: its leftover is waited for (EXISTING-OTHER-OWNER)', () => {
    const earlier = virtualMachine({ name: 'a.b', uid: 'uid-ab-old', networks: [multus('c', 'nad-bc')] });
    check(decideFor(vmAB, [claimOf(earlier, 'c')]), { reasons: ['ClaimOwnedByAnotherObject'], creates: [] });
  });

  it('a claim with no owner is not a collision either: reported, never avoided by another name', () => {
    const bare = claim({ name: 'a.b.c', network: 'nad-bc' });
    assert.deepEqual(reasons(decideFor(vmAB, [bare])), ['ClaimNotOwned']);
  });

  it("the claim of the other VM is never written to by this VM's reconcile (not even when this VM is deleted)", () => {
    const first = claimOf(vmA, 'b.c');
    const gone = decide({ key: { namespace: NS, name: 'a.b' }, nads, claims: [first], gateEnabled: true });
    assert.deepEqual(writes(gone), NONE);
  });
});

describe('eth0 claims, skipped networks, claims of a NAD the VM no longer names', () => {
  const udn = ovnNad('udn', { role: 'primary', networkName: 'ns-udn' });
  const nads = nadMap(udn, blue);

  it('a renamed pod network: the old eth0 claim is in use only while the VMI still has the old name, then unplugged', () => {
    const before = virtualMachine({ networks: [podNetwork('default')] });
    const old = claimOf(before, 'default', { primary: true, network: 'ns-udn' });
    const renamed = virtualMachine({ networks: [podNetwork('pod0')] });
    const running = run({ vm: renamed, vmi: vmiOf(before), nads, claims: [old] });
    assert.deepEqual(writes(running), { ...NONE, creates: ['vm1.pod0'] }, 'kept while the running VMI has it');
    const restarted = run({ vm: renamed, vmi: vmiOf(renamed), nads, claims: [old], namedByRunningPods: new Set() });
    assert.deepEqual(writes(restarted), { ...NONE, creates: ['vm1.pod0'], deletes: ['vm1.default'] }, 'eth0 alone does not keep it');
  });

  it("an eth0 claim under a name this VM produces for its pod network is in use (ipam-extensions' name included)", () => {
    const theVm = virtualMachine({ networks: [podNetwork('Pod_Net')] });
    const adopted = claim({
      name: referenceClaimName('vm1', 'Pod_Net'),
      owners: [ownerRefTo(theVm)],
      finalizers: [CLAIM_FINALIZER],
      iface: 'eth0',
      network: 'ns-udn',
    });
    const plan = run({ vm: theVm, nads, claims: [adopted] });
    assert.deepEqual(writes(plan).deletes, []);
  });

  it('a network listed twice: reported (DuplicateNetworkName), the first one is used', () => {
    const spec = vmiSpec([multus('blue', 'blue')]);
    spec.networks!.push({ name: 'blue', multus: { networkName: 'blue' } });
    const theVm: VirtualMachine = { ...virtualMachine(), spec: { template: { spec } } };
    const plan = run({ vm: theVm, nads });
    assert.deepEqual(writes(plan).creates, ['vm1.blue']);
    assert.deepEqual(reasons(plan), ['DuplicateNetworkName']);
    assert.match(plan.problems[0]!.message, /"blue" is listed more than once/);
  });

  it('a network without a name: reported (InvalidNetwork)', () => {
    const spec = vmiSpec([multus('blue', 'blue')]);
    spec.networks!.push({ multus: { networkName: 'blue' } } as unknown as NonNullable<typeof spec.networks>[number]);
    const plan = run({ vm: { ...virtualMachine(), spec: { template: { spec } } }, nads });
    assert.deepEqual(reasons(plan), ['InvalidNetwork']);
  });

  it('our claim for another network than the NAD names now: replaced when no VMI uses it', () => {
    const theVm = vm({ running: false });
    const stale = claimOf(theVm, 'blue', { network: 'old-network' });
    const plan = run({ vm: theVm, nads: NADS, claims: [stale, claimOf(theVm, 'green')] });
    assert.deepEqual(writes(plan), { ...NONE, deletes: ['vm1.blue'] });
    // Its finalizer goes with the delete (no VMI uses it), then it is created anew for the right network.
    const claims = applyPlan([stale, claimOf(theVm, 'green')], plan);
    assert.deepEqual(
      claims.map((c) => c.metadata.name),
      ['vm1.green'],
    );
    const last = run({ vm: theVm, nads: NADS, claims });
    assert.deepEqual(writes(last).creates, ['vm1.blue']);
    assert.equal(last.creates[0]?.spec.network, 'net-blue');
  });

  it('SWAP: our claim for another network while a VMI uses it (a NAD swapped on a running VM): kept; the new network gets a claim of its own under the swap name', () => {
    const theVm = vm();
    const stale = claimOf(theVm, 'blue', { network: 'old-network' });
    const plan = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: [stale, claimOf(theVm, 'green')] });
    const swap = swapClaimName(VM_NAME, 'blue', 'net-blue');
    assert.deepEqual(writes(plan), { ...NONE, creates: [swap] });
    assert.equal(plan.creates[0]!.spec.network, 'net-blue');
    assert.deepEqual(reasons(plan), []);
    // Then the old claim is kept while a running launcher pod names it (the migration source), and released after.
    const claims = applyPlan([stale, claimOf(theVm, 'green')], plan);
    const next = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims });
    assert.equal(next.needsPodRead, true);
    assert.deepEqual(
      next.wanted.find((w) => w.network === 'blue'),
      { network: 'blue', claim: swap, status: 'created' },
    );
    assert.deepEqual(writes(run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims, namedByRunningPods: new Set(['vm1.blue', swap]) })), NONE);
    // The source pod being deleted still names the old claim: kept, and looked at again (no event says when it ends).
    const ending = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims, namedByRunningPods: new Set(['vm1.blue', swap]), runningPodTerminating: true });
    assert.deepEqual(writes(ending), NONE);
    assert.equal(ending.retry, true);
    const done = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims, namedByRunningPods: new Set([swap]) });
    assert.notEqual(done.retry, true);
    assert.deepEqual(writes(done), { ...NONE, deletes: ['vm1.blue'] });
    // and the VM keeps the swap name from then on: a steady state, also once the VMI is gone
    const after = applyPlan(claims, done);
    assert.equal(hasWrites(run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: after, namedByRunningPods: new Set([swap]) })), false);
    assert.equal(hasWrites(run({ vm: theVm, nads: NADS, claims: after })), false);
  });

  it('SWAP there and back (n1 → n2 → n1), or on to a third NAD before the migration ended: the middle claim is released too once no running pod names it', () => {
    const theVm = vm();
    const middle = claimOf(theVm, 'blue', { name: swapClaimName(VM_NAME, 'blue', 'net-red'), network: 'net-red', uid: 'uid-middle' });
    const rows: { name: string; claims: IPAMClaim[]; current: string }[] = [
      // Back on the first NAD: vm1.blue (net-blue) is the claim again.
      { name: 'back', claims: [claimOf(theVm, 'blue'), middle], current: 'vm1.blue' },
      // On to a third NAD: the VM's claim is the net-blue swap claim, and both earlier ones go.
      {
        name: 'third',
        claims: [
          claimOf(theVm, 'blue', { network: 'net-first' }),
          middle,
          claimOf(theVm, 'blue', { name: swapClaimName(VM_NAME, 'blue', 'net-blue'), uid: 'uid-current' }),
        ],
        current: swapClaimName(VM_NAME, 'blue', 'net-blue'),
      },
    ];
    for (const row of rows) {
      row.claims.push(claimOf(theVm, 'green'));
      const plan = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: row.claims });
      assert.equal(plan.needsPodRead, true, row.name);
      assert.deepEqual(plan.wanted.find((w) => w.network === 'blue')?.claim, row.current, row.name);
      const earlier = row.claims.map((c) => c.metadata.name).filter((n) => n !== row.current && n !== 'vm1.green');
      assert.deepEqual(writes(run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: row.claims, namedByRunningPods: new Set(earlier) })), NONE, row.name);
      const done = run({ vm: theVm, vmi: vmiOf(theVm), nads: NADS, claims: row.claims, namedByRunningPods: new Set([row.current]) });
      assert.deepEqual(writes(done), { ...NONE, deletes: [...earlier].sort() }, row.name);
    }
  });
});

describe('decide: ORPHAN (kubectl delete vm --cascade=orphan)', () => {
  /** What garbage collection leaves of a claim of ours once the VM it belonged to was deleted with orphan propagation. */
  const orphaned = (c: IPAMClaim): IPAMClaim => {
    const copy = structuredClone(c);
    delete copy.metadata.ownerReferences;
    return copy;
  };
  const theVm = vm();
  /** The VMI kept running: GC stripped its VM owner reference too, so it is standalone now. */
  const freed = (): VirtualMachineInstance => {
    const v = vmiOf(theVm);
    delete v.metadata.ownerReferences;
    return v;
  };

  it('the running VMI (standalone now) owns the claims again, by a guarded patch; nothing is reported as ClaimNotOwned', () => {
    const vmi = freed();
    const claims = both(theVm).map(orphaned);
    const plan = run({ vmi, nads: NADS, claims });
    assert.deepEqual(
      plan.adopts.map((a) => [a.name, a.owner.kind, a.owner.uid, a.owner.controller]),
      [
        ['vm1.blue', 'VirtualMachineInstance', vmi.metadata.uid, true],
        ['vm1.green', 'VirtualMachineInstance', vmi.metadata.uid, true],
      ],
    );
    assert.deepEqual(writes(plan), NONE);
    assert.deepEqual(reasons(plan), []);
    // and the next reconcile of the adopted claims is a steady state
    const next = run({ vmi, nads: NADS, claims: applyPlan(claims, plan) });
    assert.equal(hasWrites(next), false);
  });

  it('a stopped VM deleted with orphan propagation: the claims keep the finalizer until GC has stripped the VM, then ORPHAN deletes them', () => {
    // GC puts `orphan` on the VM and frees its dependents one at a time; released before that, a claim would be left
    // with neither owner nor finalizer, like a hand-made one, holding its address for ever.
    const deleting = vm({ deleting: true, finalizers: ['orphan'] });
    const claims = both(deleting);
    assert.deepEqual(writes(run({ vm: deleting, nads: NADS, claims })), NONE);
    // GC has stripped them (the VM may still show its finalizer, or be gone): ORPHAN's to delete
    const stripped = claims.map(orphaned);
    const plan = run({ nads: NADS, claims: stripped });
    assert.deepEqual(writes(plan), { ...NONE, deletes: ['vm1.blue', 'vm1.green'] });
    // the same VM, deleted in the background, lets go at once as before
    const background = vm({ deleting: true });
    assert.deepEqual(writes(run({ vm: background, nads: NADS, claims: both(background) })), { ...NONE, removeFinalizers: ['vm1.blue', 'vm1.green'] });
  });

  it('a VM of that name that adopted the VMI owns them', () => {
    const again = vm({ uid: 'vm-uid-2' });
    const plan = run({ vm: again, vmi: vmiOf(again), nads: NADS, claims: both(theVm).map(orphaned) });
    assert.deepEqual(
      plan.adopts.map((a) => [a.name, a.owner.kind, a.owner.uid]),
      [
        ['vm1.blue', 'VirtualMachine', 'vm-uid-2'],
        ['vm1.green', 'VirtualMachine', 'vm-uid-2'],
      ],
    );
  });

  it('once neither a VM nor a VMI of that name exists: deleted and released', () => {
    const claims = both(theVm).map(orphaned);
    const plan = run({ nads: NADS, claims });
    assert.deepEqual(writes(plan), { ...NONE, deletes: ['vm1.blue', 'vm1.green'] });
    assert.deepEqual(applyPlan(claims, plan), []);
    const marked = claims.map((c) => ({ ...c, metadata: { ...c.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } }));
    assert.deepEqual(writes(run({ nads: NADS, claims: marked })), { ...NONE, removeFinalizers: ['vm1.blue', 'vm1.green'] });
  });

  it('garbage collection freed the VMI first, the claim still names the terminating VM: the finalizer holds (the VMI runs on it)', () => {
    const vmi = freed();
    const stillOwned = both(theVm);
    for (const vmNow of [vm({ deleting: true }), undefined]) {
      const plan = run({ ...(vmNow ? { vm: vmNow } : {}), vmi, nads: NADS, claims: stillOwned });
      assert.deepEqual(plan.removeFinalizers, [], vmNow ? 'VM terminating' : 'VM gone');
    }
    // a VMI controlled by another VM of that name (recreated) is not this VM's: the old claims go
    const other = vmiOf(vm({ uid: 'vm-uid-2' }));
    assert.deepEqual(writes(run({ vm: vm({ uid: 'vm-uid-2' }), vmi: other, nads: NADS, claims: stillOwned })).removeFinalizers, ['vm1.blue', 'vm1.green']);
  });

  it('while the VM is still terminating, or the VMI still names it as controller: nothing yet', () => {
    const claims = both(theVm).map(orphaned);
    assert.deepEqual(writes(run({ vm: vm({ deleting: true }), vmi: vmiOf(theVm), nads: NADS, claims })), NONE);
    assert.deepEqual(run({ vm: vm({ deleting: true }), vmi: vmiOf(theVm), nads: NADS, claims }).adopts, []);
    assert.deepEqual(writes(run({ vmi: vmiOf(theVm), nads: NADS, claims })), NONE);
  });

  it('deleted by someone while the running VMI uses it: the finalizer holds (no adoption, no release) until the network is unused', () => {
    const vmi = freed();
    const deleted = {
      ...orphaned(claimOf(theVm, 'blue')),
      metadata: { ...orphaned(claimOf(theVm, 'blue')).metadata, deletionTimestamp: '2026-01-01T00:00:00Z' },
    };
    const plan = run({ vmi, nads: NADS, claims: [deleted, orphaned(claimOf(theVm, 'green'))] });
    assert.ok(!plan.removeFinalizers.some((w) => w.name === 'vm1.blue'));
    assert.ok(!plan.adopts.some((w) => w.name === 'vm1.blue'));
    assert.deepEqual(writes(run({ nads: NADS, claims: [deleted] })).removeFinalizers, ['vm1.blue']);
  });

  it('an owner reference someone else added survives the orphan deletion: the claim is owned again beside it, or only released', () => {
    const foreign = { apiVersion: 'example.com/v1', kind: 'Backup', name: 'nightly', uid: 'backup-uid', controller: true };
    const withForeign = (c: IPAMClaim): IPAMClaim => {
      const copy = orphaned(c);
      copy.metadata.ownerReferences = [foreign];
      return copy;
    };
    const claims = both(theVm).map(withForeign);
    const vmi = freed();
    const plan = run({ vmi, nads: NADS, claims });
    assert.deepEqual(
      plan.adopts.map((a) => [a.name, a.owner.uid, a.owner.controller, a.append]),
      [
        ['vm1.blue', vmi.metadata.uid, false, true],
        ['vm1.green', vmi.metadata.uid, false, true],
      ],
    );
    assert.deepEqual(reasons(plan), []);
    const adopted = applyPlan(claims, plan);
    assert.deepEqual(
      adopted[0]!.metadata.ownerReferences!.map((o) => o.uid),
      ['backup-uid', vmi.metadata.uid],
    );
    assert.equal(hasWrites(run({ vmi, nads: NADS, claims: adopted })), false);
    // Once no VM and no VMI of that name is left: our finalizer goes, the claim is not ours alone to delete.
    assert.deepEqual(writes(run({ nads: NADS, claims })), { ...NONE, removeFinalizers: ['vm1.blue', 'vm1.green'] });
  });

  it('a claim of a network the owner no longer has: deleted and released, not adopted', () => {
    const vmi = freed();
    const stale = orphaned(claimOf(theVm, 'gone'));
    const plan = run({ vmi, nads: NADS, claims: [...both(theVm).map(orphaned), stale] });
    assert.deepEqual(
      plan.deletes.map((d) => d.name),
      ['vm1.gone'],
    );
    assert.ok(!plan.adopts.some((a) => a.name === 'vm1.gone'));
  });

  it('hand-made claims keep the "never adopt" rule: no finalizer, or no label for this VM → ClaimNotOwned, untouched', () => {
    const vmi = freed();
    for (const c of [
      orphaned(claimOf(theVm, 'blue', { finalizers: [] })),
      orphaned(claimOf(theVm, 'blue', { labels: {} })),
      orphaned(claimOf(theVm, 'blue', { labels: { [VM_LABEL]: 'someone-else' } })),
    ]) {
      const plan = run({ vmi, nads: NADS, claims: [c, orphaned(claimOf(theVm, 'green'))] });
      assert.ok(!plan.adopts.some((a) => a.name === 'vm1.blue'), JSON.stringify(c.metadata));
      assert.ok(!plan.deletes.some((a) => a.name === 'vm1.blue'));
      assert.ok(reasons(plan).includes('ClaimNotOwned'));
    }
  });
});

describe('EXISTING-REFUSED: the IPAM refused our claim (IPsAllocated False)', () => {
  const withCondition = (c: IPAMClaim, status: string, reason: string, message: string): IPAMClaim => ({
    ...c,
    status: { ips: [], conditions: [{ type: 'IPsAllocated', status, reason, message }] },
  });
  const refusedBlue = (owner: VirtualMachine | VirtualMachineInstance, status: string, reason: string, message: string): IPAMClaim[] => {
    const [blueClaim, greenClaim] = both(owner);
    return [withCondition(blueClaim!, status, reason, message), greenClaim!];
  };

  it('the VM is told, naming the network, the claim and the reason; no write, no retry (the claim status change brings the key back)', () => {
    const plan = run({ vm: vm(), vmi: vmiOf(vm()), nads: NADS, claims: refusedBlue(vm(), 'False', 'SubnetExhausted', 'range is full') });
    check(plan, { writes: {}, retry: false, statuses: ['created', 'created'] });
    assert.deepEqual(plan.problems, [
      {
        reason: 'IPAllocationRefused',
        message: 'the IPAM refused addresses for IPAMClaim vm1.blue (network "blue"): SubnetExhausted: range is full',
        network: 'blue',
        claim: 'vm1.blue',
      },
    ]);
  });

  decisions([
    [
      'a claim allocated again (True), or never judged, is no problem',
      () => ({ vm: vm(), vmi: vmiOf(vm()), nads: NADS, claims: refusedBlue(vm(), 'True', 'SuccessfulAllocation', '') }),
      { writes: {}, reasons: [] },
    ],
    [
      'a stopped VM (no VMI) is not told: OVN-Kubernetes judges a claim only when a pod names it, so the refusal is stale',
      () => ({ vm: vm({ running: false }), nads: NADS, claims: refusedBlue(vm({ running: false }), 'False', 'SubnetExhausted', 'range is full') }),
      { writes: {}, reasons: [] },
    ],
    [
      'a network the built-in allocator serves is left to the allocator, which tells the VM itself',
      () => {
        const theVm = vmOn('alloc');
        const refusedClaim = withCondition(claimOf(theVm, 'alloc', { network: 'net-alloc' }), 'False', 'SubnetExhausted', 'full');
        return { vm: theVm, vmi: vmiOf(theVm), nads: nadMap(allocatorNad('alloc', 'net-alloc', '10.9.0.0/30')), claims: [refusedClaim] };
      },
      { writes: {}, reasons: [] },
    ],
    [
      "another owner's refused claim is not this VM's refusal: the ownership problem is reported instead",
      () => {
        const owners = [{ ...ownerRefTo(vm()), uid: 'other-uid' }];
        const stranger = withCondition(claim({ name: 'vm1.blue', network: 'net-blue', owners }), 'False', 'SubnetExhausted', 'full');
        return { vm: vm(), nads: NADS, claims: [stranger, both(vm())[1]!] };
      },
      { reasons: ['ClaimOwnedByAnotherObject'] },
    ],
    [
      'a standalone VMI is told too',
      () => {
        const vmi = standaloneVmi({ networks: nets });
        return { vmi, nads: NADS, claims: refusedBlue(vmi, 'False', 'IPAddressConflict', 'provided IP is already allocated') };
      },
      { writes: {}, reasons: ['IPAllocationRefused'] },
    ],
  ]);
});
