// Allocator benchmark: how fast the pure pool maths is at the sizes the issue names.
//
//   node_modules/.bin/node bench/allocator.ts [--out results.json] [--runs 5] [--seed 42]
//
// Without --out the JSON goes to stdout and the table to stderr (stdout stays machine-readable); with --out the
// table goes to stdout. `runAllocatorBench(opts)` returns the same figures for a top-level `npm run bench`.
//
// Scenarios (each repeated `runs` times on fresh state; the median is reported):
// - slash16: a /16 (65,534 usable) with 60,000 addresses already held, scattered at random (the worst case for
//   fragmentation: thousands of free intervals). Then: allocate new keys until the pool is exhausted
//   ("allocations/s"), and a steady-state churn on the full pool: release a random key, allocate a new one
//   ("churn ops/s", one op = one release + one allocation).
// - rebuild: state rebuilt from 20,000 dual-stack claims (10.0.0.0/16 + fd00::/64, 40,000 addresses).
// - ipv6_64: parse a /64 pool, create the allocator and make the first allocation; then a request at the far
//   end of the /64, and a rebuild of 20,000 claims scattered across the /64 followed by one allocation.

import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { PoolAllocator, type ClaimAddresses } from '../src/allocator/allocator.ts';
import { formatAddress } from '../src/ip/address.ts';
import { type Pool, parsePool } from '../src/ip/pool.ts';
import { fmtN, textTable, type Row } from './lib/report.ts';
import { median, round } from './lib/stats.ts';

export interface AllocatorBenchOptions {
  /** Repetitions of each scenario; the median is reported. Default 5. */
  runs?: number;
  /** PRNG seed for the scattered addresses. Default 42. */
  seed?: number;
  /** Addresses already in use in the /16. Default 60,000. */
  inUse?: number;
  /** Claims to rebuild from. Default 20,000. */
  rebuildClaims?: number;
  /** Release+allocate pairs in the churn phase. Default 20,000. */
  churnOps?: number;
}

export type AllocatorBenchResult = ReturnType<typeof runAllocatorBench>;

export function runAllocatorBench(opts: AllocatorBenchOptions = {}) {
  const runs = Math.max(1, opts.runs ?? 5);
  const seed = opts.seed ?? 42;
  const inUse = opts.inUse ?? 60_000;
  const rebuildClaims = opts.rebuildClaims ?? 20_000;
  const churnOps = opts.churnOps ?? 20_000;

  // --- /16 with 60,000 in use ---------------------------------------------------------------------------------
  const p16 = pool('10.0.0.0/16');
  const usable16 = Number(p16.usable[4]!.size);
  if (inUse >= usable16) throw new Error(`inUse must be below ${usable16}`);
  const s16 = [] as { setup: number; alloc: number; allocs: number; churn: number; intervals: number }[];
  for (let r = 0; r < runs; r++) {
    const rand = mulberry32(seed + r);
    const offsets = sample(rand, 1, usable16, inUse); // host offsets 1..65534
    const claims: ClaimAddresses[] = offsets.map((off, i) => ({ key: `ns/vm-${i}.net`, ips: [ip4(off)] }));
    const a = new PoolAllocator(p16);
    const [setup] = timed(() => a.rebuild(claims));
    const intervals = a.stats().families[0]!.freeIntervals;

    let allocs = 0;
    const [alloc] = timed(() => {
      while (a.allocate(`ns/new-${allocs}.net`).ok) allocs++;
    });
    if (allocs !== usable16 - inUse) throw new Error(`expected ${usable16 - inUse} allocations, got ${allocs}`);

    // Churn on the (now full) pool: free a random holder, allocate for a new key.
    const keys = [...claims.map((c) => c.key), ...Array.from({ length: allocs }, (_, i) => `ns/new-${i}.net`)];
    const [churn] = timed(() => {
      for (let i = 0; i < churnOps; i++) {
        const j = Math.floor(rand() * keys.length);
        a.release(keys[j]!);
        const key = `ns/churn-${i}.net`;
        const res = a.allocate(key);
        if (!res.ok) throw new Error(`churn allocation failed: ${res.message}`);
        keys[j] = key;
      }
    });
    s16.push({ setup, alloc, allocs, churn, intervals });
  }
  const allocMs = median(s16.map((s) => s.alloc));
  const allocs = s16[0]!.allocs;

  // --- rebuild from 20,000 dual-stack claims ------------------------------------------------------------------
  const pDual = pool('10.0.0.0/16,fd00::/64');
  const rebuildTimes: number[] = [];
  for (let r = 0; r < runs; r++) {
    const rand = mulberry32(seed + 1000 + r);
    const v4 = sample(rand, 1, usable16, rebuildClaims);
    const claims: ClaimAddresses[] = v4.map((off, i) => ({ key: `ns/vm-${i}.net`, ips: [ip4(off), ip6(rand)] }));
    const a = new PoolAllocator(pDual);
    const [ms, report] = timed(() => a.rebuild(claims));
    rebuildTimes.push(ms);
    if (report.problems.length > 0) throw new Error(`unexpected rebuild problems: ${report.problems[0]!.message}`);
  }
  const rebuildMs = median(rebuildTimes);

  // --- IPv6 /64 ----------------------------------------------------------------------------------------------
  const first: number[] = [];
  const far: number[] = [];
  const rebuild64: number[] = [];
  for (let r = 0; r < runs; r++) {
    const [firstMs, [p64, res]] = timed(() => {
      const p = pool('fd00::/64');
      return [p, new PoolAllocator(p).allocate('ns/vm.net')] as const;
    });
    first.push(firstMs * 1000);
    if (!res.ok || res.ips[0] !== 'fd00::1/64') throw new Error('unexpected first /64 allocation');

    const b = new PoolAllocator(p64);
    const [farMs, req] = timed(() => b.allocate('ns/vm.net', { requested: ['fd00::ffff:ffff:ffff:fffe'] }));
    far.push(farMs * 1000);
    if (!req.ok) throw new Error(req.message);

    const rand = mulberry32(seed + 2000 + r);
    const claims: ClaimAddresses[] = Array.from({ length: rebuildClaims }, (_, i) => ({ key: `ns/vm-${i}.net`, ips: [ip6(rand)] }));
    const c = new PoolAllocator(p64);
    const [rebuildMs, next] = timed(() => {
      c.rebuild(claims);
      return c.allocate('ns/next.net');
    });
    rebuild64.push(rebuildMs);
    if (!next.ok) throw new Error(next.message);
  }

  return {
    node: process.version,
    runs,
    slash16: {
      pool: '10.0.0.0/16',
      usable: usable16,
      inUse,
      freeIntervals: s16[0]!.intervals,
      /** Allocations until exhaustion. */
      allocations: allocs,
      allocationsPerSecond: Math.round(allocs / (allocMs / 1000)),
      /** Mean time per allocation, µs. */
      allocationMicros: round((allocMs * 1000) / allocs, 2),
      churnOps,
      churnOpsPerSecond: Math.round(churnOps / (median(s16.map((s) => s.churn)) / 1000)),
      /** Time to build the 60,000-address state (itself a rebuild). */
      setupMs: round(median(s16.map((s) => s.setup)), 1),
    },
    rebuild: {
      pool: '10.0.0.0/16,fd00::/64',
      claims: rebuildClaims,
      addresses: rebuildClaims * 2,
      ms: round(rebuildMs, 1),
      claimsPerSecond: Math.round(rebuildClaims / (rebuildMs / 1000)),
    },
    ipv6_64: {
      pool: 'fd00::/64',
      /** parsePool + new PoolAllocator + first allocate. */
      firstAllocationMicros: round(median(first), 1),
      /** Request of fd00::ffff:ffff:ffff:fffe in a fresh allocator. */
      requestFarEndMicros: round(median(far), 1),
      /** Rebuild from `rebuildClaims` claims scattered across the /64, then one allocation. */
      rebuildThenAllocateMs: round(median(rebuild64), 1),
    },
  };
}

/** The figures as report rows (bench/run.ts's section, and the table below). */
export function allocatorRows(r: AllocatorBenchResult): Row[] {
  return [
    [`/16: ${r.slash16.inUse} of ${r.slash16.usable} in use (${r.slash16.freeIntervals} free intervals)`, ''],
    ['  allocations until exhausted', `${r.slash16.allocations}`],
    ['  allocations per second', fmtN(r.slash16.allocationsPerSecond)],
    ['  time per allocation', `${r.slash16.allocationMicros} µs`],
    ['  churn (release + allocate) per second', fmtN(r.slash16.churnOpsPerSecond)],
    ['  state for 60,000 held addresses built in', `${r.slash16.setupMs} ms`],
    [`rebuild: ${r.rebuild.claims} dual-stack claims (${r.rebuild.addresses} addresses)`, `${r.rebuild.ms} ms`],
    ['  claims per second', fmtN(r.rebuild.claimsPerSecond)],
    ['/64: parse + first allocation', `${r.ipv6_64.firstAllocationMicros} µs`],
    ['/64: request at the far end', `${r.ipv6_64.requestFarEndMicros} µs`],
    [`/64: rebuild ${r.rebuild.claims} scattered claims + allocate`, `${r.ipv6_64.rebuildThenAllocateMs} ms`],
  ];
}

export function formatAllocatorBenchTable(r: AllocatorBenchResult): string {
  return textTable(`allocator benchmark (node ${r.node}, median of ${r.runs} runs)`, allocatorRows(r));
}

function pool(subnets: string): Pool {
  const r = parsePool({ subnets });
  if (!r.ok) throw new Error(r.problems.map((p) => p.message).join('; '));
  return r.pool;
}

/** `count` distinct integers in [lo, hi], in random order (partial Fisher–Yates). */
function sample(rand: () => number, lo: number, hi: number, count: number): number[] {
  const values = Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(rand() * (values.length - i));
    [values[i], values[j]] = [values[j]!, values[i]!];
  }
  return values.slice(0, count);
}

/** Milliseconds `fn` took, and what it returned. */
function timed<T>(fn: () => T): [number, T] {
  const t = performance.now();
  const value = fn();
  return [performance.now() - t, value];
}

/** The address at host offset `off` of 10.0.0.0/16. */
const ip4 = (off: number): string => `${formatAddress(4, 0x0a000000n + BigInt(off))}/16`;

/** A random address of fd00::/64, never the subnet-router anycast address (host part 0). */
function ip6(rand: () => number): string {
  const hi = BigInt(Math.floor(rand() * 2 ** 32));
  const lo = BigInt(Math.floor(rand() * 2 ** 32));
  return `${formatAddress(6, (0xfd00n << 112n) + ((hi << 32n) | lo || 1n))}/64`;
}

function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      runs: { type: 'string' },
      seed: { type: 'string' },
    },
  });
  const result = runAllocatorBench({
    ...(values.runs !== undefined ? { runs: Number(values.runs) } : {}),
    ...(values.seed !== undefined ? { seed: Number(values.seed) } : {}),
  });
  const table = formatAllocatorBenchTable(result);
  const json = `${JSON.stringify(result, null, 2)}\n`;
  if (values.out !== undefined) {
    writeFileSync(values.out, json);
    process.stdout.write(`${table}wrote ${values.out}\n`);
  } else {
    process.stderr.write(table);
    process.stdout.write(json);
  }
}
