import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachineInstance } from '../kube/types.ts';
import { ClaimLookupError, addressesOf, createPodAddressLookup } from './pod-addresses.ts';
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
      /belongs to VirtualMachine vm1 \(uid an-older-vm1\), not to this VM/,
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

  it('only allocator networks; the cache first, the API when the cache shows no address', async () => {
    const fetched: string[] = [];
    const cached = claim('vm1', 'blue', 'blue');
    const lookup = createPodAddressLookup({
      allocatorNad: () => undefined,
      claims: { get: (_ns, name) => (name === 'vm1.blue' ? cached : undefined) },
      fetchClaim: async (ns, name) => {
        fetched.push(`${ns}/${name}`);
        return claim('vm1', 'blue', 'blue', { ips: ['10.0.0.1/24'] });
      },
    });
    const out = await lookup(NS, vmi, nads, new AbortController().signal);
    assert.deepEqual([...out], [['blue', { ips: ['10.0.0.1/24'] }]]);
    assert.deepEqual(fetched, [`${NS}/vm1.blue`]);
  });

  it('a NAD the allocator cache has not seen yet is read from the API (the given one may lack the annotations)', async () => {
    const trimmed = new Map(nads);
    trimmed.set(`${NS}/nad-blue`, nad('nad-blue', 'blue', { 'persistent-ips.kubevirt.io/allow-persistent-ips': 'true' }));
    const lookup = createPodAddressLookup({
      allocatorNad: () => undefined,
      fetchNad: async (_ns, name) => (name === 'nad-blue' ? allocatorNad('nad-blue', 'blue', '10.0.0.0/24') : nads.get(`${NS}/${name}`)),
      claims: { get: (_ns, name) => (name === 'vm1.blue' ? claim('vm1', 'blue', 'blue', { ips: ['10.0.0.4/24'] }) : undefined) },
      fetchClaim: async () => undefined,
    });
    assert.deepEqual([...(await lookup(NS, vmi, trimmed, new AbortController().signal))], [['blue', { ips: ['10.0.0.4/24'] }]]);
  });

  it('a NAD whose pool cannot be served: the denial says why', async () => {
    const broken = new Map(nads);
    broken.set(`${NS}/nad-blue`, allocatorNad('nad-blue', 'blue', '10.0.0.0/33'));
    const lookup = createPodAddressLookup({
      allocatorNad: () => undefined,
      claims: { get: () => claim('vm1', 'blue', 'blue') },
      fetchClaim: async () => claim('vm1', 'blue', 'blue'),
    });
    const out = await lookup(NS, vmi, broken, new AbortController().signal);
    const r = out.get('blue');
    assert.ok(r && 'deny' in r);
    assert.match(r.deny, /cannot be served: subnets: "10\.0\.0\.0\/33" has an invalid prefix length/);
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
        claims: { get: () => c },
        fetchClaim: async (ns, name) => {
          fetched.push(`${ns}/${name}`);
          return c;
        },
      });
      const out = await lookup(NS, vmi, new Map([...nads, [`${NS}/nad-blue`, ovn]]), new AbortController().signal);
      assert.deepEqual([...out], [], `claim ${held ? 'with' : 'without'} addresses: the allocator path does not apply`);
      assert.deepEqual(fetched, [], 'not even read');
    }
  });

  it('a failed API read is a ClaimLookupError naming the claim', async () => {
    const lookup = createPodAddressLookup({
      allocatorNad: () => undefined,
      claims: { get: () => undefined },
      fetchClaim: async () => Promise.reject(new Error('etcd timeout')),
    });
    await assert.rejects(
      lookup(NS, vmi, nads, new AbortController().signal),
      (err: unknown) => err instanceof ClaimLookupError && err.object.name === 'vm1.blue',
    );
  });
});
