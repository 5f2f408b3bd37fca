import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type Pool, type PoolProblemCode, type PoolSpec, classifyAddress, parsePool } from './pool.ts';
import { type IPFamily, formatAddress, parseAddress } from './address.ts';

function mustParse(spec: PoolSpec): Pool {
  const r = parsePool(spec);
  if (!r.ok) assert.fail(`expected a valid pool, got ${JSON.stringify(r.problems)}`);
  return r.pool;
}

function problemCodes(spec: PoolSpec): PoolProblemCode[] {
  const r = parsePool(spec);
  assert.equal(r.ok, false, `expected problems for ${JSON.stringify(spec)}`);
  return r.ok ? [] : r.problems.map((p) => p.code);
}

function addr(text: string): { family: IPFamily; value: bigint } {
  const r = parseAddress(text);
  if (!r.ok) throw new Error(r.message);
  return r.value;
}

/** [first usable, size] per family. */
function shape(pool: Pool): Record<string, [string | undefined, bigint]> {
  const out: Record<string, [string | undefined, bigint]> = {};
  for (const f of pool.families) {
    const set = pool.usable[f]!;
    const first = set.first();
    out[`v${f}`] = [first === undefined ? undefined : formatAddress(f, first), set.size];
  }
  return out;
}

test('usable addresses per subnet size', () => {
  const cases: [string, Record<string, [string | undefined, bigint]>][] = [
    ['10.0.0.0/24', { v4: ['10.0.0.1', 254n] }], // network and broadcast never handed out
    ['192.0.2.0/24', { v4: ['192.0.2.1', 254n] }], // nothing is reserved for a gateway: the first usable address is handed out
    ['10.0.0.0/30', { v4: ['10.0.0.1', 2n] }],
    ['10.0.0.0/31', { v4: ['10.0.0.0', 2n] }], // RFC 3021: both addresses usable
    ['10.0.0.5/32', { v4: ['10.0.0.5', 1n] }],
    ['10.0.0.0/16', { v4: ['10.0.0.1', 65534n] }],
    ['fd00::/64', { v6: ['fd00::1', (1n << 64n) - 1n] }], // subnet-router anycast not handed out, no broadcast
    ['fd00::/126', { v6: ['fd00::1', 3n] }],
    ['fd00::/127', { v6: ['fd00::', 2n] }], // RFC 6164
    ['fd00::7/128', { v6: ['fd00::7', 1n] }],
    ['10.0.0.0/24,fd00::/120', { v4: ['10.0.0.1', 254n], v6: ['fd00::1', 255n] }],
    ['10.0.0.0/30, 10.0.1.0/30', { v4: ['10.0.0.1', 4n] }],
  ];
  for (const [subnets, want] of cases) assert.deepEqual(shape(mustParse({ subnets })), want, subnets);
});

test('accepted spellings', () => {
  const a = mustParse({ subnets: ' 10.0.0.0/24 , fd00::/64,', excludeSubnets: '10.0.0.1, fd00::1' });
  const b = mustParse({ subnets: 'fd00:0::/64,10.0.0.0/24', excludeSubnets: 'fd00::1/128, 10.0.0.1/32' });
  assert.equal(a.canonical, 'subnets=10.0.0.0/24,fd00::/64;excludeSubnets=10.0.0.1/32,fd00::1/128');
  assert.equal(a.canonical, b.canonical);
  assert.deepEqual(a.families, [4, 6]);
  assert.deepEqual(a.warnings, []);
  for (const excludeSubnets of ['', ' , ', undefined]) assert.equal(mustParse({ subnets: '10.0.0.0/24', excludeSubnets }).excludes.length, 0);
  for (const topology of ['layer2', 'localnet', undefined]) mustParse({ subnets: '10.0.0.0/24', topology });
});

test("OVN's cidr/hostPrefix form: the host prefix is ignored, with a warning", () => {
  const pool = mustParse({ subnets: '10.128.0.0/14/23', topology: 'layer2' });
  assert.equal(pool.subnets[0]!.text, '10.128.0.0/14');
  assert.match(pool.warnings.join('\n'), /host prefix \/23 .* ignored/);
  assert.deepEqual(problemCodes({ subnets: '10.128.0.0/14/8' }), ['InvalidSubnet']);
  assert.deepEqual(problemCodes({ subnets: '10.128.0.0/14/x' }), ['InvalidSubnet']);
  assert.deepEqual(problemCodes({ subnets: '10.128.0.0/14/23/24' }), ['InvalidSubnet']);
});

test('host bits set are masked off, with a warning', () => {
  const pool = mustParse({ subnets: '10.0.0.7/24', excludeSubnets: '10.0.0.9/31' });
  assert.equal(pool.subnets[0]!.text, '10.0.0.0/24');
  assert.equal(pool.excludes[0]!.text, '10.0.0.8/31');
  assert.equal(pool.warnings.length, 2);
});

test('excludes: single addresses and CIDRs, overlapping each other', () => {
  const pool = mustParse({
    subnets: '10.0.0.0/24,fd00::/64',
    excludeSubnets: '10.0.0.1,10.0.0.0/28,10.0.0.8/29,10.0.0.255/32,fd00::/120',
  });
  assert.deepEqual(shape(pool), { v4: ['10.0.0.16', 254n - 15n], v6: ['fd00::100', (1n << 64n) - 256n] });
});

test('invalid pools: every problem is reported, nothing throws', () => {
  const cases: [PoolSpec, PoolProblemCode[]][] = [
    [{}, ['NoSubnets']],
    [{ subnets: '' }, ['NoSubnets']],
    [{ subnets: ' , ' }, ['NoSubnets']],
    [{ subnets: '10.0.0.0' }, ['InvalidSubnet']], // a subnet needs a prefix
    [{ subnets: '10.0.0.0/33' }, ['InvalidSubnet']],
    [{ subnets: '10.0.0.300/24' }, ['InvalidSubnet']],
    [{ subnets: 'not-a-cidr' }, ['InvalidSubnet']],
    [{ subnets: '10.0.0.0/24', topology: 'layer3' }, ['UnsupportedTopology']],
    [{ subnets: '10.0.0.0/16,10.0.5.0/24' }, ['OverlappingSubnets']],
    [{ subnets: '10.0.0.0/24,10.0.0.0/24' }, ['OverlappingSubnets']],
    [{ subnets: '10.0.0.0/16,10.1.0.0/24,10.0.9.0/24' }, ['OverlappingSubnets']], // not adjacent once sorted
    [{ subnets: 'fd00::/64,fd00::/48' }, ['OverlappingSubnets']],
    [{ subnets: '10.0.0.0/24', excludeSubnets: '10.0.1.0/28' }, ['ExcludeOutsidePool']],
    [{ subnets: '10.0.0.0/24', excludeSubnets: '10.0.0.0/23' }, ['ExcludeOutsidePool']], // extends outside
    [{ subnets: '10.0.0.0/24', excludeSubnets: 'fd00::1' }, ['ExcludeOutsidePool']], // no IPv6 subnet
    [{ subnets: '10.0.0.0/24', excludeSubnets: 'bogus' }, ['InvalidExclude']],
    [{ subnets: '10.0.0.0/24', excludeSubnets: '10.0.0.0/24' }, ['EmptyPool']],
    [{ subnets: '10.0.0.0/30', excludeSubnets: '10.0.0.1,10.0.0.2' }, ['EmptyPool']], // network/broadcast too
    [{ subnets: '10.0.0.4/32', excludeSubnets: '10.0.0.4' }, ['EmptyPool']],
    [{ subnets: '10.0.0.0/24,fd00::/127', excludeSubnets: 'fd00::/127' }, ['EmptyPool']], // one family empty
    [
      { subnets: '10.0.0.0/24,10.0.0.0/25,x/1', excludeSubnets: '192.168.0.1,??', topology: 'layer3' },
      ['UnsupportedTopology', 'InvalidSubnet', 'OverlappingSubnets', 'ExcludeOutsidePool', 'InvalidExclude'],
    ],
  ];
  for (const [spec, codes] of cases) assert.deepEqual(problemCodes(spec), codes, JSON.stringify(spec));
});

test('problem messages name the offending entry', () => {
  const r = parsePool({ subnets: '10.0.0.0/24', excludeSubnets: '10.0.1.0/28' });
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.equal(r.problems[0]!.value, '10.0.1.0/28');
    assert.match(r.problems[0]!.message, /10\.0\.1\.0\/28 is not inside any of the subnets \(10\.0\.0\.0\/24\)/);
  }
  const e = parsePool({ subnets: '10.0.0.0/30', excludeSubnets: '10.0.0.1/32,10.0.0.2/32' });
  if (!e.ok) assert.match(e.problems[0]!.message, /no usable IPv4 address is left in 10\.0\.0\.0\/30/);
});

test('classifyAddress explains why an address is not handed out', () => {
  const pool = mustParse({ subnets: '10.0.0.0/24,fd00::/64', excludeSubnets: '10.0.0.16/28' });
  const cases: [string, 'usable' | RegExp][] = [
    ['10.0.0.5', 'usable'],
    ['10.0.0.0', /network address of 10\.0\.0\.0\/24/],
    ['10.0.0.255', /broadcast address of 10\.0\.0\.0\/24/],
    ['10.0.0.20', /excludeSubnets entry 10\.0\.0\.16\/28/],
    ['10.0.1.1', /outside the pool \(10\.0\.0\.0\/24\)/],
    ['fd00::', /subnet-router anycast address of fd00::\/64/],
    ['fd00::ffff:ffff:ffff:ffff', 'usable'],
    ['fd01::1', /outside the pool \(fd00::\/64\)/],
  ];
  for (const [text, want] of cases) {
    const { family, value } = addr(text);
    const v = classifyAddress(pool, family, value);
    if (want === 'usable') assert.equal(v.usable, true, text);
    else {
      assert.equal(v.usable, false, text);
      if (!v.usable) assert.match(v.message, want, text);
    }
  }
  const v4only = mustParse({ subnets: '10.0.0.0/24' });
  const v = classifyAddress(v4only, 6, 1n);
  assert.ok(!v.usable && v.code === 'AddressOutsidePool' && /has no IPv6 subnet/.test(v.message));
});

test('parsePool never throws, whatever the input', () => {
  const entry = fc.oneof(fc.string(), fc.constantFrom('10.0.0.0/24', 'fd00::/64', '10.0.0.1', '::/0', '0.0.0.0/0', '10.0.0.0/16/24', '1.2.3.4/40'));
  const value = fc.oneof(
    entry,
    fc.array(entry).map((list) => list.join(',')),
    fc.constant(undefined),
  );
  fc.assert(
    fc.property(value, value, value, (subnets, excludeSubnets, topology) => {
      const r = parsePool({ subnets, excludeSubnets, topology });
      if (!r.ok) assert.ok(r.problems.length > 0 && r.problems.every((p) => p.message.length > 0));
    }),
    { numRuns: 500 },
  );
});
