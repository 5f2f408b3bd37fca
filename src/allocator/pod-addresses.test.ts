import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { persistentNetworks, swapClaimName, withClaimNames } from '../claims/index.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachineInstance } from '../kube/types.ts';
import { TransientLookupError, addressesOf, createPodAddressLookup, type PodAddressLookup } from './pod-addresses.ts';
import { NS, allocatorNad, claim, nad } from '../../test/allocator-world.ts';

const vmi: VirtualMachineInstance = {
  metadata: {
    name: 'vm1',
    namespace: NS,
    uid: 'uid-vmi-vm1',
    ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm1', uid: 'uid-vm-vm1', controller: true }],
  },
  spec: {
    networks: [
      { name: 'default', pod: {} },
      { name: 'blue', multus: { networkName: 'nad-blue' } },
      { name: 'plain', multus: { networkName: 'nad-plain' } },
    ],
    domain: {
      devices: {
        interfaces: [
          { name: 'default', masquerade: {} },
          { name: 'blue', bridge: {} },
          { name: 'plain', bridge: {} },
        ],
      },
    },
  },
};
const withCondition = (c: IPAMClaim, status: string, reason: string, message: string): IPAMClaim => ({
  ...c,
  status: { ips: c.status?.ips ?? [], conditions: [{ type: 'IPsAllocated', status, reason, message, lastTransitionTime: '2025-01-01T00:00:00Z' }] },
});

describe('addressesOf: what a claim means for the launcher pod', () => {
  it('addresses: used as they are', () => {
    assert.deepEqual(addressesOf(claim('vm1', 'blue', 'blue', { ips: ['10.0.0.1/24'] }), 'vms/vm1.blue', vmi, 'blue'), { ips: ['10.0.0.1/24'] });
  });
  it('no claim, no address yet, a refusal, a conflict, another owner: denied, each with its reason', () => {
    const deny = (c: IPAMClaim | undefined) => {
      const r = addressesOf(c, 'vms/vm1.blue', vmi, 'blue');
      assert.ok('deny' in r, JSON.stringify(r));
      return r.deny;
    };
    assert.match(deny(undefined), /does not exist yet/);
    assert.match(deny(claim('vm1', 'blue', 'blue')), /has no address yet/);
    assert.match(
      deny(withCondition(claim('vm1', 'blue', 'blue'), 'False', 'IPAddressConflict', 'requested 10.0.0.5 is already held by vms/vm2.blue')),
      /IPAddressConflict: requested 10\.0\.0\.5 is already held/,
    );
    assert.match(
      deny(
        withCondition(
          claim('vm1', 'blue', 'blue', { ips: ['10.0.0.5/24'] }),
          'False',
          'IPAddressConflict',
          '10.0.0.5 is held by vms/vm1.blue and also by vms/vm2.blue',
        ),
      ),
      /also by vms\/vm2\.blue/,
    );
    assert.match(
      deny(claim('vm1', 'blue', 'blue', { ips: ['10.0.0.5/24'], ownerUid: 'an-older-vm1' })),
      /belongs to VirtualMachine vm1 \(uid an-older-vm1\), not to vm1 \(uid uid-vm-vm1\).*\(network "blue"\)/,
    );
  });
  it("a claim that keeps an address the pool no longer covers: the pod still gets the claim's address", () => {
    const c = withCondition(claim('vm1', 'blue', 'blue', { ips: ['10.9.0.5/24'] }), 'False', 'InternalError', 'outside the pool');
    assert.deepEqual(addressesOf(c, 'vms/vm1.blue', vmi, 'blue'), { ips: ['10.9.0.5/24'] });
  });
});

describe('createPodAddressLookup', () => {
  const nads = new Map<string, NetworkAttachmentDefinition>([
    [`${NS}/nad-blue`, allocatorNad('nad-blue', 'blue', '10.0.0.0/24')],
    [`${NS}/nad-plain`, nad('nad-plain', 'plain', { 'persistent-ips.kubevirt.io/allow-persistent-ips': 'true' })],
  ]);
  /** The lookup as the webhook calls it: the verdicts named among the claims it resolved for the pod. */
  const run = (lookup: PodAddressLookup, resolved: IPAMClaim[], given: ReadonlyMap<string, NetworkAttachmentDefinition> = nads) => {
    const claims = new Map(resolved.map((c) => [c.metadata.name, c]));
    const verdicts = withClaimNames('vm1', persistentNetworks({ namespace: NS, name: 'vm1' }, vmi.spec, given), (n) => claims.get(n));
    return lookup(NS, vmi, given, verdicts, claims, new AbortController().signal);
  };
  /** A lookup with no NAD in the allocator's cache, whose API read of a claim answers `fetchClaim`. */
  const lookupWith = (fetchClaim: (namespace: string, name: string) => Promise<IPAMClaim | undefined>) =>
    createPodAddressLookup({ allocatorNad: () => undefined, fetchClaim });
  /** The denial for network blue, which must be one, given the claims resolved and what the API read of a claim answers. */
  const denial = async (resolved: IPAMClaim[], fetchClaim: () => Promise<IPAMClaim | undefined>, given = nads): Promise<string> => {
    const r = (await run(lookupWith(fetchClaim), resolved, given)).get('blue');
    assert.ok(r && 'deny' in r, JSON.stringify(r));
    return r.deny;
  };

  it('only allocator networks; a claim shown without addresses is read again from the API', async () => {
    const fetched: string[] = [];
    const lookup = lookupWith(async (ns, name) => {
      fetched.push(`${ns}/${name}`);
      return claim('vm1', 'blue', 'blue', { ips: ['10.0.0.1/24'] });
    });
    const out = await run(lookup, [claim('vm1', 'blue', 'blue'), claim('vm1', 'plain', 'plain')]);
    assert.deepEqual([...out], [['blue', { ips: ['10.0.0.1/24'] }]]);
    assert.deepEqual(fetched, [`${NS}/vm1.blue`]);
  });

  it('the addresses come from the claim the reference names, never from another claim of the same network', async () => {
    // A NAD swapped on a running VM: the old claim (another NAD network, still used by the old pod) keeps its
    // address; the new pod is pointed at the swap claim, so its `ips` must be the swap claim's.
    const old = claim('vm1', 'blue', 'blue-before', { ips: ['10.0.0.7/24'] });
    const swapped = {
      ...claim('vm1', 'blue', 'blue', { ips: ['10.0.0.9/24'] }),
      metadata: { ...claim('vm1', 'blue', 'blue').metadata, name: swapClaimName('vm1', 'blue', 'blue'), uid: 'uid-swap' },
    };
    const noRead = async () => assert.fail('no read: both claims hold addresses');
    assert.deepEqual([...(await run(lookupWith(noRead), [old, swapped]))], [['blue', { ips: ['10.0.0.9/24'] }]]);
    // Only the old claim resolved (the swap claim not made yet): no address lent from it, the pod waits.
    assert.match(await denial([old], noRead), /is for network "blue-before", but the VM's NAD is now network "blue"/);
  });

  it("a claim replaced or deleted between the webhook's read and the API read lends no address", async () => {
    for (const answer of [
      undefined,
      { ...claim('vm1', 'blue', 'blue', { ips: ['10.0.0.3/24'] }), metadata: { ...claim('vm1', 'blue', 'blue').metadata, uid: 'uid-new-claim' } },
    ]) {
      const deny = await denial([claim('vm1', 'blue', 'blue')], async () => answer);
      assert.match(deny, /vm1\.blue for network "blue" was deleted or replaced while the launcher pod was admitted/);
    }
  });

  it('a terminating claim lends no address, even one it still holds', async () => {
    const c = claim('vm1', 'blue', 'blue', { ips: ['10.0.0.4/24'] });
    c.metadata.deletionTimestamp = '2025-01-02T00:00:00Z';
    assert.match(await denial([c], async () => c), /is being deleted/);
  });

  it('a NAD the allocator cache has not seen yet is read from the API (the given one may lack the annotations)', async () => {
    const trimmed = new Map(nads);
    trimmed.set(`${NS}/nad-blue`, nad('nad-blue', 'blue', { 'persistent-ips.kubevirt.io/allow-persistent-ips': 'true' }));
    const lookup = createPodAddressLookup({
      allocatorNad: () => undefined,
      fetchNad: async (_ns, name) => (name === 'nad-blue' ? allocatorNad('nad-blue', 'blue', '10.0.0.0/24') : nads.get(`${NS}/${name}`)),
      fetchClaim: async () => undefined,
    });
    assert.deepEqual([...(await run(lookup, [claim('vm1', 'blue', 'blue', { ips: ['10.0.0.4/24'] })], trimmed))], [['blue', { ips: ['10.0.0.4/24'] }]]);
  });

  it('a NAD whose pool cannot be served: the denial says why', async () => {
    const broken = new Map(nads);
    broken.set(`${NS}/nad-blue`, allocatorNad('nad-blue', 'blue', '10.0.0.0/33'));
    const deny = await denial([claim('vm1', 'blue', 'blue')], async () => claim('vm1', 'blue', 'blue'), broken);
    assert.match(deny, /cannot be served: subnets: "10\.0\.0\.0\/33" has an invalid prefix length/);
  });

  it("an OVN-Kubernetes NAD with the switch: no `ips` and no denial (OVN-Kubernetes gives the pod its claim's addresses)", async () => {
    const ovn = nad(
      'nad-blue',
      'blue',
      { 'persistent-ips.kubevirt.io/allocator': 'true' },
      { type: 'ovn-k8s-cni-overlay', topology: 'layer2', allowPersistentIPs: true, subnets: '10.0.0.0/24' },
    );
    for (const held of [undefined, ['10.0.0.9/24']]) {
      const c = claim('vm1', 'blue', 'blue', held ? { ips: held } : {});
      const fetched: string[] = [];
      const lookup = createPodAddressLookup({
        allocatorNad: (_ns, name) => (name === 'nad-blue' ? ovn : undefined),
        fetchClaim: async (ns, name) => {
          fetched.push(`${ns}/${name}`);
          return c;
        },
      });
      const out = await run(lookup, [c], new Map([...nads, [`${NS}/nad-blue`, ovn]]));
      assert.deepEqual([...out], [], `claim ${held ? 'with' : 'without'} addresses: the allocator path does not apply`);
      assert.deepEqual(fetched, [], 'not even read');
    }
  });

  it('a failed API read is a TransientLookupError naming the claim', async () => {
    const lookup = lookupWith(async () => Promise.reject(new Error('etcd timeout')));
    await assert.rejects(run(lookup, [claim('vm1', 'blue', 'blue')]), (err: unknown) => err instanceof TransientLookupError && err.object.name === 'vm1.blue');
  });
});
