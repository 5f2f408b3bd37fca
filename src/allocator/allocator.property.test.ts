// Model-based property tests: random pools with excludes, random sequences of allocate / request-specific /
// release / restart, checked step by step against a brute-force model that enumerates the (small) pools. The
// allocator itself never enumerates; the model does, which makes it an independent statement of the rules.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type AllocateResult, type ClaimAddresses, PoolAllocator } from './allocator.ts';
import { type IPFamily, FAMILY_BITS, formatAddress, parseAddress } from '../ip/address.ts';
import { cmp } from '../ip/intervals.ts';
import { type Pool, parsePool } from '../ip/pool.ts';

// ---------------------------------------------------------------------------------------------------------------
// Generated pools: per family 1–2 small subnets (1..64 addresses) and 0–3 aligned excludes inside them.

interface GenSubnet {
  family: IPFamily;
  first: bigint;
  prefix: number;
  excludes: { first: bigint; prefix: number }[];
}

const V4_BASE = 0x0a000000n; // 10.0.0.0
const V6_BASE = 0xfd00n << 112n; // fd00::

function subnetArb(family: IPFamily, slot: number): fc.Arbitrary<GenSubnet> {
  const bits = FAMILY_BITS[family];
  const base = (family === 4 ? V4_BASE : V6_BASE) + BigInt(slot) * 256n;
  return fc.integer({ min: bits - 6, max: bits }).chain((prefix) => {
    const exclude = fc.integer({ min: prefix, max: bits }).chain((exPrefix) => {
      const count = 1 << (exPrefix - prefix);
      return fc.integer({ min: 0, max: count - 1 }).map((i) => ({ first: base + BigInt(i) * (1n << BigInt(bits - exPrefix)), prefix: exPrefix }));
    });
    // Excludes may cover a whole family: such pools must be refused (EmptyPool), which the test checks.
    return fc.array(exclude, { maxLength: 3 }).map((excludes) => ({ family, first: base, prefix, excludes }));
  });
}

const familySubnets = (family: IPFamily) =>
  fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 2 }).chain((slots) => fc.tuple(...slots.map((s) => subnetArb(family, s))));

const specArb = fc
  .constantFrom<IPFamily[]>([4], [6], [4, 6])
  .chain((families) => fc.tuple(...families.map(familySubnets)))
  .map((perFamily) => perFamily.flat());

function cidrText(family: IPFamily, first: bigint, prefix: number, bare: boolean): string {
  const text = formatAddress(family, first);
  return bare && prefix === FAMILY_BITS[family] ? text : `${text}/${prefix}`;
}

function toSpec(subnets: GenSubnet[]) {
  return {
    subnets: subnets.map((s) => cidrText(s.family, s.first, s.prefix, false)).join(','),
    excludeSubnets: subnets.flatMap((s) => s.excludes.map((e, i) => cidrText(s.family, e.first, e.prefix, i % 2 === 0))).join(', '),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The model: usable addresses by enumeration, holders as plain maps.

interface Model {
  families: IPFamily[];
  usable: Map<IPFamily, bigint[]>; // ascending
  candidates: Map<IPFamily, bigint[]>; // usable, reserved, excluded, and just-outside addresses
  prefixOf: (family: IPFamily, v: bigint) => number | undefined;
}

function buildModel(subnets: GenSubnet[]): Model {
  const usable = new Map<IPFamily, bigint[]>();
  const candidates = new Map<IPFamily, bigint[]>();
  const families = ([4, 6] as const).filter((f) => subnets.some((s) => s.family === f));
  for (const family of families) {
    const bits = FAMILY_BITS[family];
    const list: bigint[] = [];
    const cands: bigint[] = [];
    for (const s of subnets.filter((x) => x.family === family)) {
      const size = 1n << BigInt(bits - s.prefix);
      cands.push(s.first - 1n, s.first + size);
      for (let v = s.first; v < s.first + size; v++) {
        cands.push(v);
        const isFirst = v === s.first;
        const isLast = v === s.first + size - 1n;
        if (family === 4 && s.prefix <= 30 && (isFirst || isLast)) continue; // network, broadcast
        if (family === 6 && s.prefix <= 126 && isFirst) continue; // subnet-router anycast
        const excluded = s.excludes.some((e) => v >= e.first && v < e.first + (1n << BigInt(bits - e.prefix)));
        if (!excluded) list.push(v);
      }
    }
    usable.set(family, list.sort(cmp));
    candidates.set(family, cands);
  }
  const prefixOf = (family: IPFamily, v: bigint) => {
    const size = (x: GenSubnet) => 1n << BigInt(FAMILY_BITS[family] - x.prefix);
    const s = subnets.find((x) => x.family === family && v >= x.first && v < x.first + size(x));
    return s?.prefix;
  };
  return { families, usable, candidates, prefixOf };
}

type Op =
  | { kind: 'alloc'; key: number }
  | { kind: 'request'; key: number; picks: { family: IPFamily; index: number }[] }
  | { kind: 'release'; key: number }
  | { kind: 'restart' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('alloc' as const), key: fc.nat(11) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('request' as const),
      key: fc.nat(11),
      picks: fc.uniqueArray(fc.record({ family: fc.constantFrom<IPFamily>(4, 6), index: fc.nat(200) }), {
        minLength: 1,
        maxLength: 2,
        selector: (p) => p.family,
      }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('release' as const), key: fc.nat(11) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' as const }) },
);

function heldSnapshot(a: PoolAllocator): Map<string, Map<IPFamily, bigint>> {
  const out = new Map<string, Map<IPFamily, bigint>>();
  for (const { key, ips } of a.claims()) {
    const m = new Map<IPFamily, bigint>();
    for (const ip of ips) {
      const r = parseAddress(ip, { allowPrefix: true });
      assert.ok(r.ok, ip);
      assert.ok(!m.has(r.value.family), `${key} holds two ${r.value.family} addresses`);
      m.set(r.value.family, r.value.value);
    }
    out.set(key, m);
  }
  return out;
}

function checkInvariants(a: PoolAllocator, model: Model): void {
  const held = heldSnapshot(a);
  const seen = new Map<string, string>();
  for (const [key, m] of held) {
    assert.deepEqual([...m.keys()].sort(), model.families, `${key} holds one address per family`);
    for (const [family, v] of m) {
      const id = `${family}/${v}`;
      assert.ok(!seen.has(id), `${formatAddress(family, v)} held by ${seen.get(id)} and ${key}`);
      seen.set(id, key);
      const text = formatAddress(family, v);
      assert.ok(model.usable.get(family)!.includes(v), `${text} is inside the pool, not excluded/reserved`);
      assert.deepEqual(a.holdersOf(text), [key]);
    }
  }
  const stats = a.stats();
  assert.equal(stats.conflicts, 0);
  assert.equal(stats.claims, held.size);
  for (const f of stats.families) {
    assert.equal(f.size, BigInt(model.usable.get(f.family)!.length));
    assert.equal(f.used, BigInt(held.size));
    assert.equal(f.free, f.size - f.used);
    assert.equal(f.heldUnusable, 0);
  }
}

/** What the model says allocate(key, requested) must return. */
function expected(
  model: Model,
  held: Map<string, Map<IPFamily, bigint>>,
  key: string,
  requested: { family: IPFamily; value: bigint }[],
): { ok: true; values: Map<IPFamily, bigint>; changed: boolean } | { ok: false; error: string } {
  const mine = held.get(key);
  if (mine) return { ok: true, values: mine, changed: false };
  const taken = (family: IPFamily, v: bigint) => [...held.values()].some((m) => m.get(family) === v);
  for (const r of requested) {
    if (!model.families.includes(r.family)) return { ok: false, error: 'AddressOutsidePool' };
  }
  const values = new Map<IPFamily, bigint>();
  let exhausted = false;
  for (const family of model.families) {
    const r = requested.find((x) => x.family === family);
    if (r) {
      if (model.prefixOf(family, r.value) === undefined) return { ok: false, error: 'AddressOutsidePool' };
      if (!model.usable.get(family)!.includes(r.value)) return { ok: false, error: 'AddressExcluded' };
      if (taken(family, r.value)) return { ok: false, error: 'AddressInUse' };
      values.set(family, r.value);
    } else {
      const free = model.usable.get(family)!.find((v) => !taken(family, v));
      if (free === undefined) exhausted = true;
      else values.set(family, free);
    }
  }
  if (exhausted) return { ok: false, error: 'SubnetExhausted' };
  return { ok: true, values, changed: true };
}

function checkResult(model: Model, got: AllocateResult, want: ReturnType<typeof expected>): void {
  if (!want.ok) {
    assert.equal(got.ok, false, `expected ${want.error}, got ${JSON.stringify(got)}`);
    if (!got.ok) assert.equal(got.error, want.error, got.message);
    return;
  }
  assert.ok(got.ok, `expected success, got ${JSON.stringify(got)}`);
  assert.equal(got.changed, want.changed);
  const wantIps = [...want.values].sort(([a], [b]) => a - b).map(([f, v]) => `${formatAddress(f, v)}/${model.prefixOf(f, v)}`);
  assert.deepEqual(got.ips, wantIps);
}

test('any sequence of allocate / request / release / restart on any pool keeps every promise', () => {
  let pools = 0;
  const outcomes = new Map<string, number>();
  fc.assert(
    fc.property(specArb, fc.array(opArb, { maxLength: 80, size: 'max' }), (subnets, ops) => {
      const parsed = parsePool(toSpec(subnets));
      const model = buildModel(subnets);
      if (!parsed.ok) {
        // The generator only builds valid layouts; the only possible problem is excludes eating a whole family.
        assert.deepEqual(
          parsed.problems.map((p) => p.code).filter((c) => c !== 'EmptyPool'),
          [],
        );
        assert.ok(model.families.some((f) => model.usable.get(f)!.length === 0));
        return;
      }
      pools++;
      let a: PoolAllocator = new PoolAllocator(parsed.pool);
      for (const op of ops) {
        const before = heldSnapshot(a);
        if (op.kind === 'restart') {
          const claims: ClaimAddresses[] = a.claims();
          const b: PoolAllocator = new PoolAllocator(parsed.pool);
          assert.deepEqual(b.rebuild(claims), { conflicts: [], problems: [] });
          assert.deepEqual(b.claims(), claims);
          assert.deepEqual(b.stats(), a.stats());
          a = b;
        } else if (op.kind === 'release') {
          const key = `k${op.key}`;
          const released = a.release(key);
          assert.equal(released.length, before.get(key)?.size ?? 0);
          assert.equal(a.ipsOf(key), undefined);
        } else {
          const key = `k${op.key}`;
          const requested =
            op.kind === 'request'
              ? op.picks.map(({ family, index }) => {
                  const cands = model.candidates.get(family) ?? [family === 4 ? V4_BASE + 5000n : V6_BASE + 5000n];
                  return { family, value: cands[index % cands.length]! };
                })
              : [];
          const want = expected(model, before, key, requested);
          const got = a.allocate(key, { requested: requested.map((r) => formatAddress(r.family, r.value)) });
          checkResult(model, got, want);
          const outcome = `${op.kind}:${got.ok ? (got.changed ? 'new' : 'same') : got.error}`;
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
          if (!got.ok) assert.deepEqual(heldSnapshot(a), before, 'a refused allocation changes nothing');
        }
        checkInvariants(a, model);
      }
    }),
    { numRuns: 300 },
  );
  assert.ok(pools > 100, `only ${pools} valid pools were generated`);
  // The generators reach every outcome (otherwise the property would hold vacuously for some of them).
  for (const outcome of [
    'alloc:new',
    'alloc:same',
    'alloc:SubnetExhausted',
    'request:new',
    'request:same',
    'request:SubnetExhausted',
    'request:AddressInUse',
    'request:AddressOutsidePool',
    'request:AddressExcluded',
  ]) {
    assert.ok((outcomes.get(outcome) ?? 0) > 0, `never saw ${outcome}: ${JSON.stringify([...outcomes])}`);
  }
});

test('rebuild from arbitrary claims: every shared address is reported for all its holders and nothing moves', () => {
  const pool = parsePool({ subnets: '10.0.0.0/28,fd00::/124', excludeSubnets: '10.0.0.8/30' });
  assert.ok(pool.ok);
  const p: Pool = pool.pool;
  const address = fc.oneof(
    fc.nat(17).map((i) => `10.0.0.${i}/28`),
    fc.nat(17).map((i) => `fd00::${i.toString(16)}/124`),
  );
  const claimsArb = fc.uniqueArray(fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), ips: fc.array(address, { maxLength: 2 }) }), {
    maxLength: 6,
    selector: (c) => c.key,
  });
  const laterArb = fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'new1', 'new2'), { maxLength: 10 });
  fc.assert(
    fc.property(claimsArb, laterArb, (claims, later) => {
      const a = new PoolAllocator(p);
      const report = a.rebuild(claims);
      // Expected conflicts: addresses (ignoring the prefix) held by two or more distinct keys.
      const holders = new Map<string, Set<string>>();
      for (const c of claims) {
        for (const ip of c.ips) {
          const norm = normalise(ip);
          if (!holders.has(norm)) holders.set(norm, new Set());
          holders.get(norm)!.add(c.key);
        }
      }
      const wantConflicts = [...holders]
        .filter(([, ks]) => ks.size > 1)
        .map(([ip, ks]) => ({ ip, keys: [...ks].sort() }))
        .sort((x, y) => cmpIp(x.ip, y.ip));
      assert.deepEqual(report.conflicts, wantConflicts);
      // Every claim keeps exactly what it had.
      for (const c of claims) if (c.ips.length > 0) assert.deepEqual(a.ipsOf(c.key), [...new Set(c.ips)]);
      // Then: allocations never hand out a held address; conflicted keys are refused; releases free an address only
      // when its last holder goes.
      const released = new Set<string>();
      for (const key of later) {
        const r = a.allocate(key);
        const mine = released.has(key) ? undefined : claims.find((c) => c.key === key);
        const conflicted = mine?.ips.some((ip) => (holders.get(normalise(ip))?.size ?? 0) > 1) ?? false;
        if (conflicted) {
          assert.ok(!r.ok && r.error === 'IPAddressConflict');
        } else if (r.ok && r.changed) {
          for (const ip of r.ips) {
            const n = normalise(ip);
            assert.ok(!holders.has(n) || [...holders.get(n)!].every((k) => k === key), `${ip} was already held`);
            if (!holders.has(n)) holders.set(n, new Set());
            holders.get(n)!.add(key);
          }
        }
        if (key.startsWith('new')) continue;
        a.release(key);
        released.add(key);
        for (const [ip, ks] of holders) {
          ks.delete(key);
          if (ks.size === 0) holders.delete(ip);
        }
        for (const [ip, ks] of holders) assert.deepEqual(a.holdersOf(ip), [...ks].sort());
      }
    }),
    { numRuns: 300 },
  );
});

function normalise(ip: string): string {
  const r = parseAddress(ip, { allowPrefix: true });
  assert.ok(r.ok);
  return formatAddress(r.value.family, r.value.value);
}

function cmpIp(x: string, y: string): number {
  const a = parseAddress(x);
  const b = parseAddress(y);
  assert.ok(a.ok && b.ok);
  // IPv4 before IPv6, then by value: the order conflicts() reports in.
  if (a.value.family !== b.value.family) return a.value.family - b.value.family;
  return a.value.value < b.value.value ? -1 : a.value.value > b.value.value ? 1 : 0;
}
