import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ADDRESSES_ANNOTATION } from '../claims/constants.ts';
import { parseAddressesAnnotation } from '../claims/addresses-annotation.ts';
import { type AllocateResult, type AllocationErrorCode, PoolAllocator } from './allocator.ts';
import { ALLOCATION_CONDITION_REASON } from './plan.ts';
import { type PoolSpec, parsePool } from '../ip/pool.ts';

function allocator(spec: PoolSpec): PoolAllocator {
  const r = parsePool(spec);
  if (!r.ok) assert.fail(JSON.stringify(r.problems));
  return new PoolAllocator(r.pool);
}

function ips(r: AllocateResult): string[] {
  if (!r.ok) assert.fail(`expected success, got ${r.error}: ${r.message}`);
  return r.ips;
}

function refused(r: AllocateResult, code: AllocationErrorCode, message?: RegExp): void {
  assert.equal(r.ok, false, `expected ${code}, got ${JSON.stringify(r)}`);
  if (!r.ok) {
    assert.equal(r.error, code, r.message);
    if (message) assert.match(r.message, message);
  }
}

test('dynamic allocation: lowest free address, CIDR form with the pool prefix', () => {
  const a = allocator({ subnets: '10.0.0.0/24' });
  assert.deepEqual(ips(a.allocate('ns/vm1.net')), ['10.0.0.1/24']);
  assert.deepEqual(ips(a.allocate('ns/vm2.net')), ['10.0.0.2/24']);
  assert.deepEqual(a.holdersOf('10.0.0.1'), ['ns/vm1.net']);
  assert.deepEqual(a.holdersOf('10.0.0.2/24'), ['ns/vm2.net']);
  assert.deepEqual(a.holdersOf('10.0.0.3'), []);
  assert.deepEqual(a.holdersOf('not an ip'), []);
});

test('allocation is idempotent per key', () => {
  const a = allocator({ subnets: '10.0.0.0/24,fd00::/64' });
  const first = a.allocate('k');
  assert.deepEqual(first, { ok: true, ips: ['10.0.0.1/24', 'fd00::1/64'], changed: true, warnings: [] });
  assert.deepEqual(a.allocate('k'), { ok: true, ips: ['10.0.0.1/24', 'fd00::1/64'], changed: false, warnings: [] });
  assert.equal(a.stats().families[0]!.used, 1n);
});

test('IPv4 exhaustion is reported, and a release makes room again', () => {
  const a = allocator({ subnets: '192.0.2.0/30' });
  assert.deepEqual(ips(a.allocate('a')), ['192.0.2.1/30']);
  assert.deepEqual(ips(a.allocate('b')), ['192.0.2.2/30']);
  refused(a.allocate('c'), 'SubnetExhausted', /no free IPv4 address left in 192\.0\.2\.0\/30 \(2 usable, all in use\)/);
  assert.deepEqual(a.release('a'), ['192.0.2.1/30']);
  assert.deepEqual(a.release('a'), []);
  assert.deepEqual(ips(a.allocate('c')), ['192.0.2.1/30']);
  refused(a.allocate('d'), 'SubnetExhausted');
});

test('every address of the pool in turn, then exhaustion: tiny subnets, excludes (the gateway among them), several subnets of one family', () => {
  const cases: [PoolSpec, string[]][] = [
    [{ subnets: '10.0.0.7/32' }, ['10.0.0.7/32']],
    [{ subnets: '10.0.0.6/31' }, ['10.0.0.6/31', '10.0.0.7/31']],
    [{ subnets: 'fd00::6/127' }, ['fd00::6/127', 'fd00::7/127']],
    [{ subnets: 'fd00::7/128' }, ['fd00::7/128']],
    [{ subnets: '10.0.0.0/29', excludeSubnets: '10.0.0.1,10.0.0.4/31,10.0.0.6' }, ['10.0.0.2/29', '10.0.0.3/29']],
    [{ subnets: '10.0.1.0/30,10.0.0.0/30' }, ['10.0.0.1/30', '10.0.0.2/30', '10.0.1.1/30', '10.0.1.2/30']],
  ];
  for (const [spec, want] of cases) {
    const a = allocator(spec);
    const got = want.map((_, i) => ips(a.allocate(`k${i}`))[0]);
    assert.deepEqual(got, want, spec.subnets);
    refused(a.allocate('one-more'), 'SubnetExhausted');
  }
});

test('dual stack: one address per family, all or nothing', () => {
  const a = allocator({ subnets: '10.0.0.0/24,fd00::/127' });
  assert.deepEqual(ips(a.allocate('a')), ['10.0.0.1/24', 'fd00::/127']);
  assert.deepEqual(ips(a.allocate('b')), ['10.0.0.2/24', 'fd00::1/127']);
  refused(a.allocate('c'), 'SubnetExhausted', /IPv6/);
  // The IPv4 address that would have gone with it was not taken.
  assert.deepEqual(a.holdersOf('10.0.0.3'), []);
  assert.equal(a.stats().families[0]!.used, 2n);
  a.release('a');
  assert.deepEqual(ips(a.allocate('c')), ['10.0.0.1/24', 'fd00::/127']);
});

test('a claim missing a family (IPv6 added to the network) gets it added; what it holds never changes', () => {
  const a = allocator({ subnets: '10.0.0.0/24,fd00::/64' });
  a.rebuild([{ key: 'old', ips: ['10.0.0.9/24'] }]);
  const r = a.allocate('old');
  assert.deepEqual(r, { ok: true, ips: ['10.0.0.9/24', 'fd00::1/64'], changed: true, warnings: [] });
});

test('IPv6 /64: allocation and requests anywhere in it work at once', () => {
  const a = allocator({ subnets: 'fd00:1:2:3::/64' });
  assert.deepEqual(ips(a.allocate('a')), ['fd00:1:2:3::1/64']);
  assert.deepEqual(ips(a.allocate('b', { requested: ['fd00:1:2:3:ffff:ffff:ffff:ffff'] })), ['fd00:1:2:3:ffff:ffff:ffff:ffff/64']);
  a.rebuild([
    { key: 'x', ips: ['fd00:1:2:3::1/64'] },
    { key: 'y', ips: ['fd00:1:2:3::2/64'] },
    { key: 'z', ips: ['fd00:1:2:3:8000::/64'] },
  ]);
  assert.deepEqual(ips(a.allocate('c')), ['fd00:1:2:3::3/64']);
  const s = a.stats().families[0]!;
  assert.equal(s.size, (1n << 64n) - 1n);
  assert.equal(s.free, (1n << 64n) - 5n);
});

test('static requests: honoured when free and inside the pool', () => {
  const a = allocator({ subnets: '10.0.0.0/24,fd00::/64' });
  assert.deepEqual(ips(a.allocate('a', { requested: ['10.0.0.50', 'fd00::50/64'] })), ['10.0.0.50/24', 'fd00::50/64']);
  // A request for one family only: the other is allocated dynamically.
  assert.deepEqual(ips(a.allocate('b', { requested: ['fd00::60'] })), ['10.0.0.1/24', 'fd00::60/64']);
  // Dynamic allocation skips requested addresses.
  a.rebuild([{ key: 'c', ips: ['10.0.0.2/24', 'fd00::1/64'] }]);
  assert.deepEqual(ips(a.allocate('d', { requested: [] })), ['10.0.0.1/24', 'fd00::2/64']);
});

test('static requests: refused with the reason', () => {
  const a = allocator({ subnets: '10.0.0.0/24', excludeSubnets: '10.0.0.128/25,10.0.0.1' });
  ips(a.allocate('holder', { requested: ['10.0.0.10'] }));
  const cases: [string[], AllocationErrorCode, RegExp][] = [
    [['10.0.0.10'], 'AddressInUse', /10\.0\.0\.10 is already held by holder/],
    [['10.0.1.10'], 'AddressOutsidePool', /10\.0\.1\.10 is outside the pool \(10\.0\.0\.0\/24\)/],
    [['fd00::1'], 'AddressOutsidePool', /pool has no IPv6 subnet/],
    [['10.0.0.0'], 'AddressExcluded', /network address/],
    [['10.0.0.255'], 'AddressExcluded', /broadcast address|excludeSubnets/],
    [['10.0.0.200'], 'AddressExcluded', /inside excludeSubnets entry 10\.0\.0\.128\/25/],
    [['10.0.0.1'], 'AddressExcluded', /inside excludeSubnets entry 10\.0\.0\.1\/32/],
    [['10.0.0.20/16'], 'InvalidRequest', /pool subnet is 10\.0\.0\.0\/24/],
    [['10.0.0.20', '10.0.0.21'], 'InvalidRequest', /at most one IPv4 address/],
    [['banana'], 'InvalidRequest', /not a valid IP address/],
  ];
  for (const [requested, code, message] of cases) {
    refused(a.allocate('k', { requested }), code, message);
    assert.equal(a.ipsOf('k'), undefined, 'a refused request takes nothing');
  }
  assert.deepEqual(ips(a.allocate('k', { requested: ['10.0.0.20/24'] })), ['10.0.0.20/24']);
});

test('a request for a key that already holds addresses is not applied, and says so', () => {
  const a = allocator({ subnets: '10.0.0.0/24' });
  ips(a.allocate('k'));
  const same = a.allocate('k', { requested: ['10.0.0.1/24'] });
  assert.deepEqual(same, { ok: true, ips: ['10.0.0.1/24'], changed: false, warnings: [] });
  const other = a.allocate('k', { requested: ['10.0.0.7'] });
  assert.deepEqual(ips(other), ['10.0.0.1/24']);
  assert.match(other.ok ? other.warnings[0]! : '', /requested 10\.0\.0\.7 not applied: k already holds 10\.0\.0\.1\/24/);
  assert.deepEqual(a.holdersOf('10.0.0.7'), []);
});

test('rebuild: claims are the source of truth; a shared address is reported for both, neither changes', () => {
  const a = allocator({ subnets: '10.0.0.0/24' });
  const report = a.rebuild([
    { key: 'ns/a.net', ips: ['10.0.0.5/24'] },
    { key: 'ns/b.net', ips: ['10.0.0.5/24'] },
    { key: 'ns/c.net', ips: ['10.0.0.1/24'] },
  ]);
  assert.deepEqual(report, { conflicts: [{ ip: '10.0.0.5', keys: ['ns/a.net', 'ns/b.net'] }], problems: [] });
  refused(a.allocate('ns/a.net'), 'IPAddressConflict', /10\.0\.0\.5 is held by ns\/a\.net and also by ns\/b\.net/);
  refused(a.allocate('ns/b.net'), 'IPAddressConflict', /also by ns\/a\.net/);
  assert.deepEqual(a.holdersOf('10.0.0.5'), ['ns/a.net', 'ns/b.net']);
  assert.deepEqual(a.ipsOf('ns/a.net'), ['10.0.0.5/24']);
  assert.equal(a.stats().conflicts, 1);
  // A new claim never gets the shared address, nor any held one.
  assert.deepEqual(ips(a.allocate('ns/d.net')), ['10.0.0.2/24']);
  // Releasing one holder resolves the conflict; the address stays with the other.
  a.release('ns/a.net');
  assert.deepEqual(a.conflicts(), []);
  assert.deepEqual(a.allocate('ns/b.net'), { ok: true, ips: ['10.0.0.5/24'], changed: false, warnings: [] });
  a.release('ns/b.net');
  assert.deepEqual(ips(a.allocate('ns/e.net', { requested: ['10.0.0.5'] })), ['10.0.0.5/24']);
});

test('rebuild: what the pool would not hand out is reported and kept', () => {
  const a = allocator({ subnets: '10.0.0.0/24', excludeSubnets: '10.0.0.200' });
  const report = a.rebuild([
    { key: 'outside', ips: ['10.9.0.5/24'] },
    { key: 'excluded', ips: ['10.0.0.200/24'] },
    { key: 'network', ips: ['10.0.0.0/24'] },
    { key: 'garbage', ips: ['10.0.0.300/24'] },
    { key: 'two', ips: ['10.0.0.7/24', '10.0.0.8/24'] },
    { key: 'dup', ips: ['10.0.0.9/24'] },
    { key: 'dup', ips: ['10.0.0.9/24'] },
    { key: 'empty', ips: [] },
  ]);
  assert.deepEqual(report.conflicts, []);
  assert.deepEqual(
    report.problems.map((p) => [p.key, p.code]),
    [
      ['outside', 'AddressOutsidePool'],
      ['excluded', 'AddressExcluded'],
      ['network', 'AddressExcluded'],
      ['garbage', 'InvalidAddress'],
      ['two', 'MultipleAddressesPerFamily'],
      ['dup', 'DuplicateKey'],
    ],
  );
  refused(a.allocate('outside'), 'AddressOutsidePool', /claim outside: 10\.9\.0\.5 is outside the pool/);
  refused(a.allocate('excluded'), 'AddressExcluded', /excludeSubnets entry 10\.0\.0\.200\/32/);
  refused(a.allocate('network'), 'AddressExcluded', /network address/);
  refused(a.allocate('garbage'), 'InvalidAddress', /"10\.0\.0\.300\/24"/);
  assert.deepEqual(a.allocate('two'), { ok: true, ips: ['10.0.0.7/24', '10.0.0.8/24'], changed: false, warnings: [] });
  assert.equal(a.ipsOf('empty'), undefined);
  assert.deepEqual(a.holdersOf('10.9.0.5'), ['outside']);
  const s = a.stats();
  assert.equal(s.claims, 7 - 1);
  assert.equal(s.families[0]!.used, 3n); // .7, .8, .9
  assert.equal(s.families[0]!.heldUnusable, 3); // 10.9.0.5, .200, .0
  assert.deepEqual(ips(a.allocate('new')), ['10.0.0.1/24']);
  // Releasing what the pool would not hand out does not make it allocatable.
  a.release('excluded');
  a.release('network');
  assert.equal(a.stats().families[0]!.free, 253n - 4n);
});

test('rebuild(claims()) reproduces the state; the next allocation is the same', () => {
  const a = allocator({ subnets: '10.0.0.0/28,fd00::/124', excludeSubnets: '10.0.0.3' });
  for (const k of ['a', 'b', 'c', 'd', 'e']) ips(a.allocate(k));
  a.release('b');
  a.release('d');
  ips(a.allocate('f', { requested: ['10.0.0.9'] }));
  const b = new PoolAllocator(a.pool);
  const report = b.rebuild(a.claims());
  assert.deepEqual(report, { conflicts: [], problems: [] });
  assert.deepEqual(b.claims(), a.claims());
  assert.deepEqual(b.stats(), a.stats());
  assert.deepEqual(b.allocate('g'), a.allocate('g'));
});

test('every error code has an IPAMClaim condition reason', () => {
  // The table is a Record over every AllocationErrorCode (and Success): the type checker sees that none is missing.
  const known = ['SuccessfulAllocation', 'SubnetExhausted', 'IPAddressConflict', 'InternalError'];
  for (const [code, reason] of Object.entries(ALLOCATION_CONDITION_REASON)) assert.ok(known.includes(reason), code);
  assert.equal(ALLOCATION_CONDITION_REASON.Success, 'SuccessfulAllocation');
});

test(`${ADDRESSES_ANNOTATION} annotation parsing never throws and reports bad input`, () => {
  const ok = parseAddressesAnnotation('{"net1": ["192.0.2.10", "2001:db8::10/64"], "net2": []}');
  assert.deepEqual(ok.problems, []);
  assert.deepEqual(
    [...ok.requests],
    [
      ['net1', ['192.0.2.10', '2001:db8::10/64']],
      ['net2', []],
    ],
  );
  for (const empty of [undefined, null, '']) {
    assert.deepEqual(parseAddressesAnnotation(empty), { requests: new Map(), problems: [] });
  }
  const cases: [unknown, (string | undefined)[], RegExp][] = [
    [42, [undefined], /must be a JSON string/],
    ['{nope', [undefined], /not valid JSON/],
    ['["192.0.2.1"]', [undefined], /must be a JSON object/],
    ['null', [undefined], /must be a JSON object/],
    ['"192.0.2.1"', [undefined], /must be a JSON object/],
    ['{"net1": "192.0.2.1"}', ['net1'], /"net1" must map to a list/],
    ['{"net1": ["192.0.2.1", 5]}', ['net1'], /expected a string/],
    ['{"net1": ["192.0.2.300"]}', ['net1'], /not a valid IP address/],
    ['{"net1": ["192.0.2.1", "192.0.2.2"]}', ['net1'], /more than one IPv4 address/],
    ['{"": ["192.0.2.1"]}', [undefined], /interface name is empty/],
    ['{"__proto__": ["nope"], "net2": ["192.0.2.1"]}', ['__proto__'], /not a valid IP/],
  ];
  for (const [value, ifaces, message] of cases) {
    const r = parseAddressesAnnotation(value);
    assert.deepEqual(
      r.problems.map((p) => p.interface),
      ifaces,
      String(value),
    );
    assert.match(r.problems[0]!.message, message, String(value));
    for (const iface of ifaces) if (iface !== undefined) assert.equal(r.requests.has(iface), false);
  }
  // Valid interfaces survive a bad neighbour.
  assert.deepEqual(parseAddressesAnnotation('{"__proto__": ["nope"], "net2": ["192.0.2.1"]}').requests.get('net2'), ['192.0.2.1']);
});

test('PoolAllocator.hold (addresses in use that no claim records): takes the free ones of the pool for the key, skips held, excluded, foreign and unreadable ones', () => {
  const a = allocator({ subnets: '10.0.0.0/29', excludeSubnets: '10.0.0.6' });
  a.rebuild([{ key: 'ns/c1', ips: ['10.0.0.1/29'] }]);
  assert.deepEqual(a.hold('VMI ns/vm', ['10.0.0.1', '10.0.0.2', '10.0.0.6', '192.168.0.1', 'fd00::1', 'nonsense']), ['10.0.0.2']);
  assert.deepEqual(a.holdersOf('10.0.0.1'), ['ns/c1']);
  assert.deepEqual(a.holdersOf('10.0.0.2'), ['VMI ns/vm']);
  assert.deepEqual(ips(a.allocate('ns/c2')), ['10.0.0.3/29']);
  refused(a.allocate('ns/c3', { requested: ['10.0.0.2'] }), 'AddressInUse', /already held by VMI ns\/vm/);
});
