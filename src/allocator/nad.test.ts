import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readAllocatorNad, resolveNetwork } from './nad.ts';
import { allocatorNad, nad } from './testing.ts';

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
    const fromConfig = readAllocatorNad(nad('n', 'ovn', annotations, { allowPersistentIPs: true, topology: 'localnet', subnets: '10.1.0.0/24', excludeSubnets: '10.1.0.1' }));
    assert.deepEqual(fromConfig.problems, []);
    assert.equal(fromConfig.pool?.canonical, 'subnets=10.1.0.0/24;excludeSubnets=10.1.0.1/32');
    const overridden = readAllocatorNad(
      nad('n', 'ovn', { ...annotations, 'persistent-ips.kubevirt.io/exclude-subnets': '10.1.0.0/28' }, { allowPersistentIPs: true, subnets: '10.1.0.0/24', excludeSubnets: '10.1.0.1' }),
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
    const notPersistent = readAllocatorNad(nad('n', 'x', { 'persistent-ips.kubevirt.io/allocator': 'true', 'persistent-ips.kubevirt.io/subnets': '10.0.0.0/24' }));
    assert.match(notPersistent.problems.join('\n'), /does not allow persistent IPs/);
    const noPool = readAllocatorNad(nad('n', 'x', { 'persistent-ips.kubevirt.io/allocator': 'true', 'persistent-ips.kubevirt.io/allow-persistent-ips': 'true' }));
    assert.match(noPool.problems.join('\n'), /no pool: set persistent-ips\.kubevirt\.io\/subnets/);
    const layer3 = readAllocatorNad(nad('n', 'x', { 'persistent-ips.kubevirt.io/allocator': 'true' }, { allowPersistentIPs: true, topology: 'layer3', subnets: '10.0.0.0/16/24' }));
    assert.match(layer3.problems.join('\n'), /layer3/);
    const broken: typeof noPool[] = [];
    for (const config of [undefined, '', 'not json', '[]', '{"name": 5}']) {
      broken.push(readAllocatorNad({ metadata: { name: 'n', namespace: 'ns', annotations: { 'persistent-ips.kubevirt.io/allocator': 'true' } }, spec: config === undefined ? {} : { config } }));
    }
    for (const r of broken) {
      assert.equal(r.pool, undefined);
      assert.ok(r.problems.length > 0);
    }
  });
});

describe('resolveNetwork: one network, one pool', () => {
  it('NADs in several namespaces agreeing on the pool: ready', () => {
    const s = resolveNetwork('br', [allocatorNad('a', 'br', '10.0.0.0/24'), allocatorNad('b', 'br', '10.0.0.0/24', undefined, 'other'), allocatorNad('c', 'other-net', '10.9.0.0/24')]);
    assert.equal(s.kind, 'ready');
    if (s.kind === 'ready') assert.deepEqual(s.nads.map((n) => n.key), ['other/b', 'vms/a']);
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
