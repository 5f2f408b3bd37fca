import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { NetworkAttachmentDefinition } from '../kube/types.ts';
import { NAD_PERSISTENT_IPS_ANNOTATION } from './constants.ts';
import { isOvnKubernetes, parseCniConfig, parseNadConfig } from './nad-config.ts';

const nadWith = (config: unknown, annotations?: Record<string, string>): NetworkAttachmentDefinition =>
  ({
    metadata: { name: 'n', namespace: 'ns', ...(annotations ? { annotations } : {}) },
    spec: config === undefined ? {} : { config },
  }) as NetworkAttachmentDefinition;

describe('parseNadConfig', () => {
  it('reads an OVN-Kubernetes layer2 secondary network', () => {
    const config = parseCniConfig(
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'tenant-blue',
        type: 'ovn-k8s-cni-overlay',
        topology: 'layer2',
        subnets: '10.0.0.0/24, fd00::/64',
        excludeSubnets: '10.0.0.0/30',
        allowPersistentIPs: true,
        netAttachDefName: 'ns/blue',
      }),
    );
    assert.deepEqual(config, {
      networkName: 'tenant-blue',
      allowPersistentIPs: true,
      topology: 'layer2',
      type: 'ovn-k8s-cni-overlay',
      subnets: ['10.0.0.0/24', 'fd00::/64'],
      excludeSubnets: ['10.0.0.0/30'],
      problems: [],
    });
    assert.equal(isOvnKubernetes(config), true);
  });

  it('reads a primary user-defined network', () => {
    const config = parseCniConfig(
      JSON.stringify({
        name: 'udn',
        type: 'ovn-k8s-cni-overlay',
        topology: 'layer2',
        role: 'primary',
        subnets: '10.1.0.0/16',
      }),
    );
    assert.equal(config.role, 'primary');
    assert.equal(config.allowPersistentIPs, false);
  });

  it("keeps OVN's cluster-subnet form and drops empty entries", () => {
    const config = parseCniConfig(JSON.stringify({ name: 'l3', subnets: ' 10.128.0.0/16/24 ,, ,fd01::/48/64 ' }));
    assert.deepEqual(config.subnets, ['10.128.0.0/16/24', 'fd01::/48/64']);
  });

  it('takes the network name from the top of a conflist and the keys from its plugins', () => {
    const config = parseCniConfig(
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'list-net',
        plugins: [
          { type: 'ovn-k8s-cni-overlay', name: 'ignored', topology: 'localnet', allowPersistentIPs: true },
          { type: 'tuning', subnets: '10.9.0.0/24' },
        ],
      }),
    );
    assert.equal(config.networkName, 'list-net');
    assert.equal(config.type, 'ovn-k8s-cni-overlay');
    assert.equal(config.topology, 'localnet');
    assert.equal(config.allowPersistentIPs, true);
    assert.deepEqual(config.subnets, ['10.9.0.0/24']);
    assert.deepEqual(config.problems, []);
  });

  it('prefers a key on the top level of a conflist over the same key on a plugin', () => {
    const config = parseCniConfig(JSON.stringify({ name: 'n', allowPersistentIPs: false, plugins: [{ type: 'x', allowPersistentIPs: true }] }));
    assert.equal(config.allowPersistentIPs, false);
  });

  it('opts in through the annotation for CNIs whose config cannot carry the key', () => {
    const annotations = { [NAD_PERSISTENT_IPS_ANNOTATION]: 'true' };
    const config = parseNadConfig(nadWith('{"name":"br","type":"bridge"}', annotations));
    assert.equal(config.allowPersistentIPs, true);
    assert.equal(config.networkName, 'br');
  });

  it('ignores the annotation unless it says exactly "true"', () => {
    for (const value of ['false', 'True', 'yes', '']) {
      const config = parseNadConfig(nadWith('{"name":"br"}', { [NAD_PERSISTENT_IPS_ANNOTATION]: value }));
      assert.equal(config.allowPersistentIPs, false, value);
    }
  });

  const documentProblems: [string, unknown, RegExp][] = [
    ['a missing config', undefined, /no spec.config/],
    ['an empty config', '', /empty/],
    ['a blank config', '  \n', /empty/],
    ['invalid JSON', '{"name": ', /not valid JSON/],
    ['a JSON array', '[1,2]', /not a JSON object/],
    ['JSON null', 'null', /not a JSON object/],
    ['a JSON string', '"net"', /not a JSON object/],
    ['a config of the wrong type', 42, /not a string/],
    ['plugins that are not an array', '{"name":"n","plugins":{}}', /"plugins" is not an array/],
    ['a plugin that is not an object', '{"name":"n","plugins":[1]}', /plugins\[0\] is not a JSON object/],
  ];
  for (const [name, config, message] of documentProblems) {
    it(`reports ${name} as a problem of the whole document`, () => {
      const parsed = parseNadConfig(nadWith(config));
      assert.equal(parsed.problems.length, 1);
      assert.equal(parsed.problems[0]?.reason, 'InvalidNetworkConfig');
      assert.equal(parsed.problems[0]?.field, undefined);
      assert.match(parsed.problems[0]?.message ?? '', message);
      assert.equal(parsed.allowPersistentIPs, false);
    });
  }

  it('reports keys of the wrong type by name and ignores them', () => {
    const config = parseCniConfig(JSON.stringify({ name: 7, allowPersistentIPs: 'true', topology: ['layer2'], subnets: ['10.0.0.0/24'], role: {} }));
    const fields = config.problems.map((p) => p.field).sort();
    assert.deepEqual(fields, ['allowPersistentIPs', 'name', 'role', 'subnets', 'topology']);
    assert.equal(config.networkName, undefined);
    assert.equal(config.allowPersistentIPs, false);
    assert.deepEqual(config.subnets, []);
  });

  it('treats an empty network name as none', () => {
    assert.equal(parseCniConfig('{"name":"  "}').networkName, undefined);
  });

  it('treats null keys as absent', () => {
    const config = parseCniConfig('{"name":"n","allowPersistentIPs":null,"subnets":null}');
    assert.deepEqual(config.problems, []);
  });

  it('never throws, whatever string spec.config holds', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.json()), (text) => {
        checkShape(parseCniConfig(text));
      }),
      { numRuns: 500 },
    );
  });

  it('never throws, whatever JSON value spec.config encodes, flat or as a conflist', () => {
    const value = fc.jsonValue();
    const keys = fc.record(
      {
        name: value,
        type: value,
        allowPersistentIPs: fc.oneof(fc.boolean(), value),
        topology: value,
        role: value,
        subnets: fc.oneof(fc.string(), value),
        excludeSubnets: value,
      },
      { requiredKeys: [] },
    );
    const conflist = fc.record({ name: value, plugins: fc.oneof(fc.array(fc.oneof(keys, value)), value) });
    fc.assert(
      fc.property(fc.oneof(value, keys, conflist), (doc) => {
        checkShape(parseCniConfig(JSON.stringify(doc)));
      }),
      { numRuns: 1000 },
    );
  });

  it('never throws, whatever the NAD object holds', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (config, annotations) => {
        const nad = { metadata: { name: 'n', annotations }, spec: { config } };
        checkShape(parseNadConfig(nad as unknown as NetworkAttachmentDefinition));
      }),
      { numRuns: 500 },
    );
  });
});

function checkShape(config: ReturnType<typeof parseCniConfig>): void {
  assert.equal(typeof config.allowPersistentIPs, 'boolean');
  for (const list of [config.subnets, config.excludeSubnets]) {
    for (const entry of list) {
      assert.equal(typeof entry, 'string');
      assert.equal(entry, entry.trim());
      assert.notEqual(entry, '');
      assert.ok(!entry.includes(','));
    }
  }
  for (const key of ['networkName', 'role', 'topology', 'type'] as const) {
    assert.ok(config[key] === undefined || typeof config[key] === 'string');
  }
  for (const problem of config.problems) {
    assert.equal(problem.reason, 'InvalidNetworkConfig');
    assert.equal(typeof problem.message, 'string');
  }
}
