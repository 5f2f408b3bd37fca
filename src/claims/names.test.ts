import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { claimName, isDns1123Subdomain, podInterfaceName, referenceClaimName } from './names.ts';

const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);

/** Valid object names up to 253 characters, with many near the limit, where truncation happens. */
const vmName = fc
  .oneof(
    fc.array(label, { minLength: 1, maxLength: 6 }).map((labels) => labels.join('.')),
    fc.tuple(fc.integer({ min: 1, max: 253 }), label).map(([length, seed]) => seed.repeat(Math.ceil(length / seed.length) + 1).slice(0, length - 1) + '0'),
    fc.integer({ min: 230, max: 253 }).map((length) => 'v'.repeat(length)),
  )
  .filter(isDns1123Subdomain);

/** Anything a user may type as a network name: lowercase, uppercase, `_`, dots, unicode, very long. */
const networkName = fc.oneof(
  label,
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.stringMatching(/^[a-zA-Z0-9_.-]{1,80}$/),
  fc.integer({ min: 200, max: 400 }).map((n) => 'N'.repeat(n)),
);

describe('podInterfaceName', () => {
  it('is "pod" and the first 11 hex characters of sha256 of the network name, as KubeVirt names it', () => {
    const expected = 'pod' + createHash('sha256').update('blue').digest('hex').slice(0, 11);
    assert.equal(podInterfaceName('blue'), expected);
    assert.match(podInterfaceName('any_Name'), /^pod[0-9a-f]{11}$/);
  });
});

describe('claimName', () => {
  const examples: [string, string, string, string | RegExp][] = [
    ['plain form kept', 'vm1', 'blue', 'vm1.blue'],
    ['plain form with a dotted network name kept', 'vm1', 'net.a', 'vm1.net.a'],
    ['plain form with dashes kept', 'my-vm', 'tenant-blue-2', 'my-vm.tenant-blue-2'],
    ['underscore hashed', 'vm1', 'net_a', /^vm1\.net-a-[0-9a-f]{10}$/],
    ['uppercase hashed', 'vm1', 'Blue', /^vm1\.blue-[0-9a-f]{10}$/],
    ['trailing dash hashed', 'vm1', 'blue-', /^vm1\.blue-[0-9a-f]{10}$/],
    ['double dot hashed', 'vm1', 'a..b', /^vm1\.a-b-[0-9a-f]{10}$/],
    ['unicode only hashed without a readable part', 'vm1', 'ネット', /^vm1\.[0-9a-f]{10}$/],
    ['empty network name hashed', 'vm1', '', /^vm1\.[0-9a-f]{10}$/],
  ];
  for (const [title, vm, network, expected] of examples) {
    it(`${title}: (${vm}, ${JSON.stringify(network)})`, () => {
      const name = claimName(vm, network);
      if (typeof expected === 'string') assert.equal(name, expected);
      else assert.match(name, expected);
      assert.ok(isDns1123Subdomain(name), name);
    });
  }

  it('does not let net_a and net.a share a claim, unlike the reference implementation', () => {
    assert.equal(referenceClaimName('vm1', 'net_a'), referenceClaimName('vm1', 'net.a'));
    assert.notEqual(claimName('vm1', 'net_a'), claimName('vm1', 'net.a'));
    assert.equal(claimName('vm1', 'net.a'), 'vm1.net.a');
  });

  it('gives Net and net different claims although both read "net"', () => {
    assert.notEqual(claimName('vm1', 'Net'), claimName('vm1', 'NET'));
    assert.equal(claimName('vm1', 'net'), 'vm1.net');
    assert.notEqual(claimName('vm1', 'Net'), 'vm1.net');
  });

  it('cuts a long network name so the whole stays within 253 characters', () => {
    const name = claimName('vm1', 'Net_'.repeat(100));
    assert.equal(name.length, 253);
    assert.ok(isDns1123Subdomain(name));
    assert.match(name, /^vm1\.net-net-/);
  });

  it('keeps the plain form up to exactly 253 characters', () => {
    const vm = 'v'.repeat(200);
    const network = 'n'.repeat(52);
    assert.equal(claimName(vm, network), `${vm}.${network}`);
    assert.notEqual(claimName(vm, network + 'n'), `${vm}.${network}n`);
  });

  it('cuts the VM name when it leaves no room, and still tells networks apart', () => {
    const vm = 'a.'.repeat(125) + 'abc'; // 253 characters, ends in a dot after cutting at 242
    const first = claimName(vm, 'blue');
    const second = claimName(vm, 'green');
    assert.ok(isDns1123Subdomain(first), first);
    assert.ok(first.length <= 253);
    assert.notEqual(first, second);
  });

  it('is a valid DNS-1123 subdomain of at most 253 characters for any VM and network name', () => {
    fc.assert(
      fc.property(vmName, networkName, (vm, network) => {
        const name = claimName(vm, network);
        assert.ok(name.length <= 253, `${name.length}`);
        assert.ok(isDns1123Subdomain(name), name);
      }),
      { numRuns: 2000 },
    );
  });

  it('is deterministic and depends on nothing but the VM and the network', () => {
    fc.assert(
      fc.property(vmName, networkName, (vm, network) => {
        assert.equal(claimName(vm, network), claimName(vm, network));
      }),
    );
  });

  it('keeps the plain form whenever it is valid', () => {
    fc.assert(
      fc.property(vmName, fc.oneof(label, networkName), (vm, network) => {
        const plain = `${vm}.${network}`;
        if (isDns1123Subdomain(plain)) assert.equal(claimName(vm, network), plain);
      }),
      { numRuns: 2000 },
    );
  });

  it('never gives two networks of one VM the same claim', () => {
    fc.assert(
      fc.property(vmName, fc.uniqueArray(networkName, { minLength: 2, maxLength: 20 }), (vm, networks) => {
        const names = networks.map((network) => claimName(vm, network));
        assert.equal(new Set(names).size, networks.length);
      }),
      { numRuns: 1000 },
    );
  });

  it('never gives a network the claim of a lookalike: case, separators and suffixes', () => {
    fc.assert(
      fc.property(vmName, fc.stringMatching(/^[a-z][a-z0-9]{0,20}$/), (vm, base) => {
        const lookalikes = [base, base.toUpperCase(), `${base}_x`, `${base}.x`, `${base}-x`, `${base}__x`, `${base}_X`];
        const unique = [...new Set(lookalikes)];
        assert.equal(new Set(unique.map((network) => claimName(vm, network))).size, unique.length);
      }),
    );
  });
});
