import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { IntervalSet } from './intervals.ts';

/** The members of a set, by walking its intervals (only for the small sets of these tests). */
function members(set: IntervalSet): bigint[] {
  const out: bigint[] = [];
  for (const { start, end } of set.intervals()) for (let x = start; x <= end; x++) out.push(x);
  return out;
}

function checkShape(set: IntervalSet): void {
  let prevEnd: bigint | undefined;
  let size = 0n;
  for (const { start, end } of set.intervals()) {
    assert.ok(start <= end, 'interval not empty');
    if (prevEnd !== undefined) assert.ok(start > prevEnd + 1n, 'intervals disjoint and not adjacent');
    prevEnd = end;
    size += end - start + 1n;
  }
  assert.equal(set.size, size);
}

const small = fc.bigInt({ min: 0n, max: 60n });
const interval = fc.tuple(small, fc.bigInt({ min: 0n, max: 8n })).map(([s, len]) => ({ start: s, end: s + len }));

test('from() normalises overlapping, adjacent and unordered intervals', () => {
  const set = IntervalSet.from([
    { start: 10n, end: 12n },
    { start: 1n, end: 3n },
    { start: 4n, end: 5n },
    { start: 11n, end: 20n },
    { start: 30n, end: 29n },
  ]);
  assert.deepEqual(
    [...set.intervals()],
    [
      { start: 1n, end: 5n },
      { start: 10n, end: 20n },
    ],
  );
  assert.equal(set.size, 16n);
  assert.equal(set.first(), 1n);
});

test('a /64-sized interval costs the same as a small one', () => {
  const set = IntervalSet.from([{ start: 0n, end: (1n << 64n) - 1n }]);
  assert.equal(set.size, 1n << 64n);
  assert.ok(set.delete(1n << 63n));
  assert.equal(set.intervalCount, 2);
  assert.equal(set.has(1n << 63n), false);
  assert.ok(set.add(1n << 63n));
  assert.equal(set.intervalCount, 1);
});

test('add/delete/has/first behave like a set of numbers', () => {
  const op = fc.oneof(fc.record({ kind: fc.constant('add' as const), x: small }), fc.record({ kind: fc.constant('delete' as const), x: small }));
  fc.assert(
    fc.property(fc.array(interval, { maxLength: 6 }), fc.array(op, { maxLength: 60 }), (initial, ops) => {
      const set = IntervalSet.from(initial);
      const model = new Set<bigint>();
      for (const i of initial) for (let x = i.start; x <= i.end; x++) model.add(x);
      for (const { kind, x } of ops) {
        if (kind === 'add') {
          assert.equal(set.add(x), !model.has(x));
          model.add(x);
        } else {
          assert.equal(set.delete(x), model.has(x));
          model.delete(x);
        }
        checkShape(set);
      }
      const sorted = [...model].sort((a, b) => (a < b ? -1 : 1));
      assert.deepEqual(members(set), sorted);
      assert.equal(set.first(), sorted[0]);
      for (let x = 0n; x <= 70n; x++) assert.equal(set.has(x), model.has(x));
    }),
  );
});

test('minus and withoutSorted agree with set difference', () => {
  fc.assert(
    fc.property(fc.array(interval, { maxLength: 6 }), fc.array(interval, { maxLength: 6 }), fc.array(small, { maxLength: 20 }), (a, b, points) => {
      const A = IntervalSet.from(a);
      const B = IntervalSet.from(b);
      const diff = A.minus(B);
      checkShape(diff);
      const inB = new Set(members(B));
      assert.deepEqual(
        members(diff),
        members(A).filter((x) => !inB.has(x)),
      );
      const without = A.withoutSorted([...points].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
      checkShape(without);
      const inP = new Set(points);
      assert.deepEqual(
        members(without),
        members(A).filter((x) => !inP.has(x)),
      );
      // Neither operation changes its inputs.
      assert.deepEqual([...A.intervals()], [...IntervalSet.from(a).intervals()]);
      assert.deepEqual([...B.intervals()], [...IntervalSet.from(b).intervals()]);
    }),
  );
});

test('clone is independent', () => {
  const a = IntervalSet.from([{ start: 1n, end: 5n }]);
  const b = a.clone();
  b.delete(3n);
  assert.equal(a.size, 5n);
  assert.equal(b.size, 4n);
});
