import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allocatorServes } from '../claims/nad-config.ts';
import { readAllocatorNad, resolveNetwork } from './nad.ts';
import type { NetworkAttachmentDefinition } from '../kube/types.ts';
import { allocatorNad, nad } from '../../test/allocator-world.ts';

describe('readAllocatorNad: the switch and the pool', () => {
  it('pool from annotations (bridge + static IPAM, whose config takes no extra keys)', () => {
    const r = readAllocatorNad(allocatorNad('n', 'br', '192.0.2.0/24,fd00:10::/64', '192.0.2.1,192.0.2.250/31'));
    assert.equal(r.enabled, true);
    assert.equal(r.network, 'br');
    assert.deepEqual(r.problems, []);
    assert.deepEqual(r.pool?.families, [4, 6]);
    assert.equal(r.pool?.canonical, 'subnets=192.0.2.0/24,fd00:10::/64;excludeSubnets=192.0.2.1/32,192.0.2.250/31');
  });

  it('pool from the config keys OVN-Kubernetes uses, each annotation overriding its own key', () => {
    const annotations = { 'persistent-ips.kubevirt.io/allocator': 'true' };
    const fromConfig = readAllocatorNad(
      nad('n', 'ovn', annotations, { allowPersistentIPs: true, topology: 'localnet', subnets: '10.1.0.0/24', excludeSubnets: '10.1.0.1' }),
    );
    assert.deepEqual(fromConfig.problems, []);
    assert.equal(fromConfig.pool?.canonical, 'subnets=10.1.0.0/24;excludeSubnets=10.1.0.1/32');
    const overridden = readAllocatorNad(
      nad(
        'n',
        'ovn',
        { ...annotations, 'persistent-ips.kubevirt.io/exclude-subnets': '10.1.0.0/28' },
        { allowPersistentIPs: true, subnets: '10.1.0.0/24', excludeSubnets: '10.1.0.1' },
      ),
    );
    assert.equal(overridden.pool?.canonical, 'subnets=10.1.0.0/24;excludeSubnets=10.1.0.0/28');
  });

  it('switch off, or absent: not enabled and nothing to say', () => {
    for (const value of [undefined, 'false', '']) {
      const r = readAllocatorNad(nad('n', 'x', value === undefined ? {} : { 'persistent-ips.kubevirt.io/allocator': value }));
      assert.equal(r.enabled, false);
      assert.deepEqual(r.problems, []);
    }
    const typo = readAllocatorNad(nad('n', 'x', { 'persistent-ips.kubevirt.io/allocator': 'yes' }));
    assert.equal(typo.enabled, false);
    assert.match(typo.problems[0]!, /must be "true" or "false", got "yes"/);
  });

  it('every problem of an enabled NAD is spelled out; none throws', () => {
    const on = { 'persistent-ips.kubevirt.io/allocator': 'true' };
    const cases: [NetworkAttachmentDefinition, RegExp][] = [
      [nad('n', 'x', { ...on, 'persistent-ips.kubevirt.io/subnets': '10.0.0.0/24' }), /does not allow persistent IPs/],
      [nad('n', 'x', { ...on, 'persistent-ips.kubevirt.io/allow-persistent-ips': 'true' }), /no pool: set persistent-ips\.kubevirt\.io\/subnets/],
      [nad('n', 'x', on, { allowPersistentIPs: true, topology: 'layer3', subnets: '10.0.0.0/16/24' }), /layer3/],
    ];
    for (const [n, problem] of cases) assert.match(readAllocatorNad(n).problems.join('\n'), problem);
    for (const config of [undefined, '', 'not json', '[]', '{"name": 5}']) {
      const r = readAllocatorNad({ metadata: { name: 'n', namespace: 'ns', annotations: on }, spec: config === undefined ? {} : { config } });
      assert.equal(r.pool, undefined);
      assert.ok(r.problems.length > 0);
    }
  });
});

describe('resolveNetwork: one network, one pool', () => {
  it('NADs in several namespaces agreeing on the pool: ready', () => {
    const s = resolveNetwork('br', [
      allocatorNad('a', 'br', '10.0.0.0/24'),
      allocatorNad('b', 'br', '10.0.0.0/24', undefined, 'other'),
      allocatorNad('c', 'other-net', '10.9.0.0/24'),
    ]);
    assert.equal(s.kind, 'ready');
    if (s.kind === 'ready')
      assert.deepEqual(
        s.nads.map((n) => n.key),
        ['other/b', 'vms/a'],
      );
  });

  it('different pools, or a NAD of the network that does not opt in: invalid, reported on every NAD concerned', () => {
    const differ = resolveNetwork('br', [allocatorNad('a', 'br', '10.0.0.0/24'), allocatorNad('b', 'br', '10.0.1.0/24', undefined, 'other')]);
    assert.equal(differ.kind, 'invalid');
    if (differ.kind === 'invalid') {
      assert.deepEqual([...differ.problems.keys()].sort(), ['other/b', 'vms/a']);
      assert.match(differ.problems.get('vms/a')![0]!, /declare different pools/);
    }
    const mixed = resolveNetwork('br', [allocatorNad('a', 'br', '10.0.0.0/24'), nad('plain', 'br', {})]);
    assert.equal(mixed.kind, 'invalid');
    if (mixed.kind === 'invalid') assert.match(mixed.problems.get('vms/plain')![0]!, /every NAD of a network must agree/);
  });

  it('no NAD opts in: unmanaged', () => {
    assert.deepEqual(resolveNetwork('br', [nad('plain', 'br', {})]), { kind: 'unmanaged', network: 'br' });
    assert.deepEqual(resolveNetwork('br', []), { kind: 'unmanaged', network: 'br' });
  });
});

describe("OVN-Kubernetes NADs: the allocator refuses them (OVN-Kubernetes writes their claims' status.ips)", () => {
  const SWITCH = { 'persistent-ips.kubevirt.io/allocator': 'true' };
  const OVN = { type: 'ovn-k8s-cni-overlay', topology: 'layer2', allowPersistentIPs: true, subnets: '10.0.0.0/24' };
  const ovnNad = (name: string, network: string, annotations: Record<string, string>, config: Record<string, unknown> = OVN, generation = 3) => {
    const n = nad(name, network, annotations, config);
    n.metadata.generation = generation;
    return n;
  };

  it('readAllocatorNad / allocatorServes, by CNI type and switch', () => {
    const rows: { what: string; nad: ReturnType<typeof nad>; refused: boolean; serves: boolean }[] = [
      { what: 'OVN-K, switch on, valid pool', nad: ovnNad('o', 'ovn', SWITCH), refused: true, serves: false },
      {
        what: 'OVN-K, switch on, pool in annotations',
        nad: ovnNad('o', 'ovn', { ...SWITCH, 'persistent-ips.kubevirt.io/subnets': '10.1.0.0/24' }),
        refused: true,
        serves: false,
      },
      {
        what: 'OVN-K, switch on, no pool at all',
        nad: ovnNad('o', 'ovn', SWITCH, { type: 'ovn-k8s-cni-overlay', allowPersistentIPs: true }),
        refused: true,
        serves: false,
      },
      {
        what: 'OVN-K conflist, switch on',
        nad: {
          metadata: { name: 'o', namespace: 'vms', annotations: SWITCH },
          spec: { config: JSON.stringify({ cniVersion: '0.4.0', name: 'ovn', plugins: [OVN] }) },
        },
        refused: true,
        serves: false,
      },
      { what: 'OVN-K, switch "false"', nad: ovnNad('o', 'ovn', { 'persistent-ips.kubevirt.io/allocator': 'false' }), refused: false, serves: false },
      { what: 'OVN-K, no switch', nad: ovnNad('o', 'ovn', {}), refused: false, serves: false },
      { what: 'bridge + static, switch on', nad: allocatorNad('b', 'br', '10.0.0.0/24'), refused: false, serves: true },
      { what: 'bridge, no switch', nad: nad('b', 'br', {}), refused: false, serves: false },
    ];
    for (const row of rows) {
      const r = readAllocatorNad(row.nad);
      assert.equal(r.refused !== undefined, row.refused, `${row.what}: refused`);
      assert.equal(allocatorServes(row.nad), row.serves, `${row.what}: served`);
      if (row.refused) assert.deepEqual(r.problems, [], `${row.what}: the refusal alone is reported, not the pool`);
    }
  });

  it('the refusal names the NAD, its generation and the network, says why and what to do', () => {
    const r = readAllocatorNad(ovnNad('ovn-a', 'tenant-blue', SWITCH, OVN, 7));
    assert.match(r.refused!, /^NetworkAttachmentDefinition vms\/ovn-a \(generation 7\) has CNI type "ovn-k8s-cni-overlay"/);
    assert.match(r.refused!, /OVN-Kubernetes records the addresses of its claims in status\.ips itself/);
    assert.match(r.refused!, /does not serve network "tenant-blue"/);
    assert.match(r.refused!, /Remove the annotation/);
    assert.notEqual(readAllocatorNad(ovnNad('ovn-a', 'tenant-blue', SWITCH, OVN, 8)).refused, r.refused, 'another generation, another message');
  });

  it('resolveNetwork: a network with an OVN-Kubernetes NAD is refused, whatever else its NADs say', () => {
    const rows: { what: string; nads: ReturnType<typeof nad>[]; kind: string; refusedOn: string[]; match?: RegExp }[] = [
      { what: 'the OVN-K NAD opts in', nads: [ovnNad('o', 'n', SWITCH)], kind: 'refused', refusedOn: ['vms/o'], match: /has CNI type "ovn-k8s-cni-overlay"/ },
      {
        what: 'a bridge NAD opts in, an OVN-K NAD of the same network does not',
        nads: [allocatorNad('b', 'n', '10.0.0.0/24'), ovnNad('o', 'n', {})],
        kind: 'refused',
        refusedOn: ['vms/b'],
        match: /network "n" is OVN-Kubernetes' too \(vms\/o has CNI type "ovn-k8s-cni-overlay"\)/,
      },
      {
        what: 'both opt in, pools differ',
        nads: [allocatorNad('b', 'n', '10.0.0.0/24'), ovnNad('o', 'n', SWITCH)],
        kind: 'refused',
        refusedOn: ['vms/b', 'vms/o'],
      },
      { what: 'the OVN-K NAD does not opt in, nobody else does', nads: [ovnNad('o', 'n', {})], kind: 'unmanaged', refusedOn: [] },
      { what: 'no OVN-K NAD', nads: [allocatorNad('b', 'n', '10.0.0.0/24')], kind: 'ready', refusedOn: [] },
    ];
    for (const row of rows) {
      const s = resolveNetwork('n', row.nads);
      assert.equal(s.kind, row.kind, row.what);
      const refusals = s.kind === 'refused' ? s.refusals : new Map<string, string>();
      assert.deepEqual([...refusals.keys()].sort(), row.refusedOn, `${row.what}: refused on`);
      if (row.match) for (const message of refusals.values()) assert.match(message, row.match, row.what);
    }
  });
});
