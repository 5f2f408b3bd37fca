import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim } from '../kube/types.ts';
import { claim, ovnNad } from '../../test/objects.ts';
import { allocatorNad } from '../../test/allocator-world.ts';
import { networksOf, renderNetworks, renderNetworksJson } from './status-networks.ts';

const refused: IPAMClaim = {
  ...claim({ name: 'vm7.blue', network: 'blue' }),
  status: { ips: [], conditions: [{ type: 'IPsAllocated', status: 'False', reason: 'SubnetExhausted', message: 'range is full' }] },
};
const NADS = [ovnNad('blue', { networkName: 'blue', subnets: '10.100.0.0/29' }), allocatorNad('dual', 'dual', '10.0.0.0/30,fd00::/64', undefined, 'other')];
const CLAIMS = [claim({ name: 'vm1.blue', network: 'blue', ips: ['10.100.0.1/29'] }), claim({ name: 'vm2.blue', network: 'blue' }), refused];

describe('persistent-ips status --networks', () => {
  it('one line per network of the namespace, with capacity, held, free, pending and refused; the reasons below', () => {
    const text = renderNetworks(networksOf(NADS, CLAIMS, 'vms'));
    assert.deepEqual(text.trimEnd().split('\n'), [
      'NETWORK    IPAM             NADS       SUBNETS         CAPACITY   HELD   FREE   PENDING   REFUSED',
      'blue [1]   ovn-kubernetes   vms/blue   10.100.0.0/29   6          1      5      1         1 SubnetExhausted',
      '',
      '[1] blue: IPAMClaim vms/vm7.blue refused (SubnetExhausted): range is full',
      'Note: held counts the addresses recorded in IPAMClaims; on OVN-Kubernetes, pods on the network that name no claim hold addresses too, so free is at most what is shown',
    ]);
  });

  it('two families share a cell, each named; every namespace with -A', () => {
    const lines = renderNetworks(networksOf(NADS, CLAIMS, undefined)).split('\n');
    assert.match(lines[1] ?? '', /^blue /);
    assert.match(
      lines[2] ?? '',
      /^dual\s+allocator\s+other\/dual\s+10\.0\.0\.0\/30,fd00::\/64\s+ipv4 2, ipv6 18446744073709551615\s+ipv4 0, ipv6 0\s+ipv4 2, ipv6 18446744073709551615\s+0\s+0$/,
    );
  });

  it('an unknown capacity shows "?" and says why; a namespace with no persistent network says so', () => {
    const text = renderNetworks(networksOf([ovnNad('l3', { networkName: 'l3', topology: 'layer3', subnets: '10.128.0.0/16/24' })], [], undefined));
    assert.match(text, /^l3 \[1\]\s+ovn-kubernetes\s+vms\/l3\s+-\s+\?\s+0\s+\?\s+0\s+0$/m);
    assert.match(text, /\[1\] l3: capacity unknown: topology layer3/);
    assert.equal(renderNetworks(networksOf(NADS, CLAIMS, 'empty')), 'No network that allows persistent IPs found.\n');
  });

  it('bad input is shown as such, never as a negative free: subnets that do not parse, overlapping subnets, an address outside the pool', () => {
    const nads = [
      ovnNad('bad', { networkName: 'bad', subnets: '10.0.0.300/24' }),
      ovnNad('overlap', { networkName: 'overlap', subnets: '10.1.0.0/24,10.1.0.0/25' }),
      ovnNad('small', { networkName: 'small', subnets: '10.2.0.0/30' }),
    ];
    const claims = [claim({ name: 'a.small', network: 'small', ips: ['10.2.0.1/30'] }), claim({ name: 'b.small', network: 'small', ips: ['10.9.9.9/30'] })];
    const lines = renderNetworks(networksOf(nads, claims, 'vms'))
      .trimEnd()
      .split('\n');
    assert.match(lines[1] ?? '', /^bad \[1\]\s+ovn-kubernetes\s+vms\/bad\s+-\s+\?\s+0\s+\?\s+0\s+0$/);
    assert.match(lines[2] ?? '', /^overlap \[2\]\s+ovn-kubernetes\s+vms\/overlap\s+-\s+\?\s+0\s+\?/);
    assert.match(lines[3] ?? '', /^small \[3\]\s+ovn-kubernetes\s+vms\/small\s+10\.2\.0\.0\/30\s+2\s+1\s+1\s+0\s+0$/);
    assert.deepEqual(
      lines.filter((l) => l.startsWith('[')),
      [
        '[1] bad: NetworkAttachmentDefinition vms/bad: subnets: "10.0.0.300/24" is not a valid IP address (Invalid IPv4 address)',
        '[2] overlap: NetworkAttachmentDefinition vms/overlap: subnets: 10.1.0.0/24 and 10.1.0.0/25 overlap',
        '[3] small: 1 address(es) in IPAMClaims that the pool does not hand out: vms/b.small holds 10.9.9.9',
      ],
    );
  });

  it('JSON: the figures, capacity and free as strings (an IPv6 /64 is beyond a JSON number)', () => {
    const doc = JSON.parse(renderNetworksJson(networksOf(NADS, CLAIMS, 'other'), ['a note']));
    assert.equal(doc.kind, 'NetworkList');
    assert.deepEqual(doc.notes, ['a note']);
    assert.deepEqual(doc.items[0].families, {
      ipv4: { capacity: '2', held: 0, free: '2' },
      ipv6: { capacity: '18446744073709551615', held: 0, free: '18446744073709551615' },
    });
    assert.deepEqual(doc.items[0].nads, ['other/dual']);
  });
});
