// Keeps bench/allocator.ts working: runs it at small sizes and checks the shape of the figures (never their
// values: speed belongs to the benchmark, not to tests).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatAllocatorBenchTable, runAllocatorBench } from '../../bench/allocator.ts';

test('the allocator benchmark runs end to end and reports every figure', () => {
  const r = runAllocatorBench({ runs: 1, inUse: 65_000, rebuildClaims: 200, churnOps: 100 });
  assert.equal(r.slash16.usable, 65_534);
  assert.equal(r.slash16.allocations, 534);
  assert.equal(r.rebuild.addresses, 400);
  for (const n of [
    r.slash16.allocationsPerSecond,
    r.slash16.churnOpsPerSecond,
    r.rebuild.ms,
    r.ipv6_64.firstAllocationMicros,
    r.ipv6_64.rebuildThenAllocateMs,
  ]) {
    assert.ok(Number.isFinite(n) && n >= 0, String(n));
  }
  const table = formatAllocatorBenchTable(r);
  assert.match(table, /allocations per second/);
  assert.doesNotThrow(() => JSON.parse(JSON.stringify(r)));
});
