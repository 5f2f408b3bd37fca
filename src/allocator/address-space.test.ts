import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim, IPAMClaimCondition, NetworkAttachmentDefinition } from '../kube/types.ts';
import { claim, nad, ovnNad } from '../../test/objects.ts';
import { allocatorNad } from '../../test/allocator-world.ts';
import { type NetworkFigures, addressSpace } from './address-space.ts';

const refused = (reason: string, message = `${reason} happened`): IPAMClaimCondition => ({ type: 'IPsAllocated', status: 'False', reason, message });
const allocated: IPAMClaimCondition = { type: 'IPsAllocated', status: 'True', reason: 'SuccessfulAllocation' };

function held(name: string, network: string, ips: string[], condition?: IPAMClaimCondition): IPAMClaim {
  const c = claim({ name, network, ips });
  return condition ? { ...c, status: { ...c.status, conditions: [condition] } } : c;
}

interface Row {
  name: string;
  nads: NetworkAttachmentDefinition[];
  claims?: IPAMClaim[];
  want: Partial<NetworkFigures>[];
}

const rows: Row[] = [
  {
    name: 'OVN-K layer2 /29: six addresses (no network, no broadcast), held and free per family',
    nads: [ovnNad('blue', { networkName: 'tenantblue', subnets: '10.100.0.0/29' })],
    claims: [
      held('vm1.blue', 'tenantblue', ['10.100.0.1/29'], allocated),
      held('vm2.blue', 'tenantblue', ['10.100.0.2/29']),
      held('vm3.blue', 'tenantblue', [], refused('SubnetExhausted')),
      held('vm4.blue', 'tenantblue', []),
      held('other.net', 'elsewhere', ['10.100.0.3/29']),
    ],
    want: [
      {
        network: 'tenantblue',
        ipam: 'ovn-kubernetes',
        nads: ['vms/blue'],
        subnets: ['10.100.0.0/29'],
        families: { ipv4: { capacity: 6n, held: 2, free: 4n } },
        claims: { allocated: 2, pending: 1, refused: { SubnetExhausted: 1 } },
        refusedClaims: [{ claim: 'vms/vm3.blue', reason: 'SubnetExhausted', message: 'SubnetExhausted happened' }],
        problems: [],
      },
    ],
  },
  {
    name: 'dual stack with excludes: each family counted on its own; IPv6 keeps its last address',
    nads: [
      nad('dual', {
        name: 'dual',
        type: 'ovn-k8s-cni-overlay',
        topology: 'layer2',
        subnets: '192.0.2.0/28,fd00:1::/125',
        excludeSubnets: '192.0.2.8/29',
        allowPersistentIPs: true,
      }),
    ],
    claims: [held('vm1.dual', 'dual', ['192.0.2.1/28', 'fd00:1::7/125'])],
    want: [{ families: { ipv4: { capacity: 7n, held: 1, free: 6n }, ipv6: { capacity: 7n, held: 1, free: 6n } } }],
  },
  {
    name: 'OVN-K primary layer2: the gateway (.1) and management port (.2) are not capacity',
    nads: [ovnNad('prim', { networkName: 'prim', subnets: '10.0.0.0/29', role: 'primary' })],
    want: [{ families: { ipv4: { capacity: 4n, held: 0, free: 4n } } }],
  },
  {
    name: 'OVN-K primary layer2: infrastructureSubnets and reservedSubnets are not read (PreconfiguredUDNAddresses off, its default)',
    nads: [
      nad('prim', {
        name: 'prim',
        type: 'ovn-k8s-cni-overlay',
        topology: 'layer2',
        role: 'primary',
        subnets: '10.0.0.0/29',
        infrastructureSubnets: '10.0.0.6/32',
        reservedSubnets: '10.0.0.5/32',
        allowPersistentIPs: true,
      }),
    ],
    want: [{ families: { ipv4: { capacity: 4n, held: 0, free: 4n } } }],
  },
  {
    name: "OVN-K's range limits: at most 65,536 addresses per subnet (an IPv6 /64 gives 65,535, an IPv4 /8 65,534); none in a /31, /32, /127 or /128",
    nads: [
      ovnNad('v6', { networkName: 'v6', subnets: 'fd00:2::/64' }),
      ovnNad('v4', { networkName: 'v4', subnets: '10.0.0.0/8' }),
      ovnNad('p2p', { networkName: 'p2p', subnets: '192.0.2.0/31,fd00:3::/127' }),
    ],
    want: [
      { network: 'p2p', families: { ipv4: { capacity: 0n, held: 0, free: 0n }, ipv6: { capacity: 0n, held: 0, free: 0n } } },
      { network: 'v4', families: { ipv4: { capacity: 65_534n, held: 0, free: 65_534n } } },
      { network: 'v6', families: { ipv6: { capacity: 65_535n, held: 0, free: 65_535n } } },
    ],
  },
  {
    name: 'the built-in allocator: its pool from the annotations',
    nads: [allocatorNad('green', 'green', '10.1.0.0/30', '10.1.0.1')],
    claims: [held('vm1.green', 'green', ['10.1.0.2/30'], allocated)],
    want: [{ ipam: 'allocator', families: { ipv4: { capacity: 1n, held: 1, free: 0n } }, claims: { allocated: 1, pending: 0, refused: {} } }],
  },
  {
    name: 'an allocator network whose NADs disagree: the allocator hands out nothing, so capacity is unknown, and why is a problem',
    nads: [allocatorNad('green', 'green', '10.1.0.0/30'), allocatorNad('green', 'green', '10.2.0.0/30', undefined, 'other')],
    want: [
      {
        ipam: 'allocator',
        families: {},
        unknownBecause:
          'the built-in allocator hands out no new address on it: the NADs of network "green" declare different pools (other/green: subnets=10.2.0.0/30;excludeSubnets=; vms/green: subnets=10.1.0.0/30;excludeSubnets=); no new address is handed out until they agree',
      },
    ],
  },
  {
    name: 'a NAD naming no subnet: capacity unknown, said so; held still counted',
    nads: [ovnNad('nosub', { networkName: 'nosub', subnets: null })],
    claims: [held('vm1.nosub', 'nosub', ['10.9.0.4/24'])],
    want: [{ unknownBecause: 'NetworkAttachmentDefinition vms/nosub names no subnet', families: { ipv4: { held: 1 } }, problems: [] }],
  },
  {
    name: 'layer3: no network-wide figure',
    nads: [ovnNad('l3', { networkName: 'l3', topology: 'layer3', subnets: '10.128.0.0/16/24' })],
    want: [{ unknownBecause: 'topology layer3 gives every node its own subnet: there is no network-wide figure', families: {} }],
  },
  {
    name: 'another IPAM: unknown',
    nads: [nad('br', { name: 'br', type: 'bridge', allowPersistentIPs: true, subnets: '10.0.0.0/24' })],
    want: [{ ipam: 'other', unknownBecause: 'the IPAM of this network is neither OVN-Kubernetes nor the built-in allocator' }],
  },
  {
    name: 'subnets that do not parse: a problem, capacity unknown (never a negative free)',
    nads: [ovnNad('bad', { networkName: 'bad', subnets: '10.0.0.300/24' })],
    claims: [held('vm1.bad', 'bad', ['10.0.0.1/24'])],
    want: [
      {
        families: { ipv4: { held: 1 } },
        problems: ['NetworkAttachmentDefinition vms/bad: subnets: "10.0.0.300/24" is not a valid IP address (Invalid IPv4 address)'],
      },
    ],
  },
  {
    name: 'overlapping subnets: a problem, capacity unknown',
    nads: [ovnNad('ov', { networkName: 'ov', subnets: '10.0.0.0/24,10.0.0.128/25' })],
    want: [{ families: {}, problems: ['NetworkAttachmentDefinition vms/ov: subnets: 10.0.0.0/24 and 10.0.0.128/25 overlap'] }],
  },
  {
    name: 'a held address outside every subnet, and one that is not an address: problems, not counted',
    nads: [ovnNad('out', { networkName: 'out', subnets: '10.0.0.0/30' })],
    claims: [held('vm1.out', 'out', ['10.7.0.1/24']), held('vm2.out', 'out', ['not-an-ip'])],
    want: [
      {
        families: { ipv4: { capacity: 2n, held: 0, free: 2n } },
        problems: [
          '1 address(es) in IPAMClaims that the pool does not hand out: vms/vm1.out holds 10.7.0.1',
          '1 IPAMClaim address(es) that are not IP addresses: vms/vm2.out holds "not-an-ip"',
        ],
      },
    ],
  },
  {
    name: 'one network, two NADs in two namespaces: one pool, both NADs listed; an address held by two claims counts once and is a problem',
    nads: [
      ovnNad('blue', { networkName: 'shared', subnets: '10.5.0.0/29' }),
      ovnNad('blue', { networkName: 'shared', subnets: '10.5.0.0/29', namespace: 'other' }),
    ],
    claims: [held('a.blue', 'shared', ['10.5.0.1/29']), held('b.blue', 'shared', ['10.5.0.1/29'])],
    want: [
      {
        nads: ['other/blue', 'vms/blue'],
        families: { ipv4: { capacity: 6n, held: 1, free: 5n } },
        problems: ['1 address(es) held by more than one IPAMClaim: 10.5.0.1 by vms/a.blue, vms/b.blue'],
      },
    ],
  },
  {
    name: 'many claims outside a shrunk subnet: one problem with three examples, not one per claim',
    nads: [ovnNad('shrunk', { networkName: 'shrunk', subnets: '10.0.0.0/30' })],
    claims: [1, 2, 3, 4, 5].map((i) => held(`vm${i}.shrunk`, 'shrunk', [`10.0.1.${i}/24`])),
    want: [
      {
        problems: [
          '5 address(es) in IPAMClaims that the pool does not hand out: vms/vm1.shrunk holds 10.0.1.1; vms/vm2.shrunk holds 10.0.1.2; vms/vm3.shrunk holds 10.0.1.3, and 2 more',
        ],
      },
    ],
  },
  {
    name: 'two NADs of one network describing different pools: unknown, and a problem',
    nads: [ovnNad('a', { networkName: 'split', subnets: '10.5.0.0/29' }), ovnNad('b', { networkName: 'split', subnets: '10.6.0.0/29' })],
    want: [
      {
        families: {},
        problems: [
          'the NetworkAttachmentDefinitions of the network describe different pools: subnets=10.5.0.0/29;excludeSubnets= | subnets=10.6.0.0/29;excludeSubnets=',
        ],
      },
    ],
  },
  {
    name: 'a NAD that does not allow persistent IPs is not a persistent network',
    nads: [ovnNad('plain', { networkName: 'plain', persistent: false })],
    want: [],
  },
];

describe('addressSpace', () => {
  for (const row of rows) {
    it(row.name, () => {
      const got = addressSpace(row.nads, row.claims ?? []);
      assert.equal(got.length, row.want.length, 'one entry per persistent network');
      row.want.forEach((want, i) => {
        const picked = Object.fromEntries(Object.keys(want).map((k) => [k, got[i]?.[k as keyof NetworkFigures]]));
        assert.deepEqual(picked, want);
      });
    });
  }
});
