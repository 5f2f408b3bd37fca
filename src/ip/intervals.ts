// A set of BigInts stored as sorted, disjoint, non-adjacent closed intervals [start, end].
//
// Membership is a binary search (O(log n) in the number of intervals); the lowest member is O(1); adding or
// removing one value touches one interval and at most splices the arrays (O(#intervals) element moves in the
// worst case, which are memmoves of a few thousand slots at most in practice). Nothing here ever walks a range
// address by address, so a /64 costs the same as a /30.

export interface Interval {
  start: bigint;
  end: bigint;
}

export class IntervalSet {
  // Parallel arrays: starts[i] <= ends[i] < starts[i + 1] - 1 (disjoint and never adjacent).
  #starts: bigint[] = [];
  #ends: bigint[] = [];
  #size = 0n;

  /** Builds a set from intervals in any order, overlapping or adjacent; empty intervals (end < start) are ignored. */
  static from(intervals: Iterable<Interval>): IntervalSet {
    const list = [...intervals].filter((i) => i.start <= i.end).sort((a, b) => cmp(a.start, b.start));
    const set = new IntervalSet();
    for (const { start, end } of list) {
      const last = set.#ends.length - 1;
      if (last >= 0 && start <= set.#ends[last]! + 1n) {
        if (end > set.#ends[last]!) set.#ends[last] = end;
      } else {
        set.#starts.push(start);
        set.#ends.push(end);
      }
    }
    set.#recount();
    return set;
  }

  get size(): bigint {
    return this.#size;
  }

  get intervalCount(): number {
    return this.#starts.length;
  }

  /** The lowest member, or undefined when empty. */
  first(): bigint | undefined {
    return this.#starts[0];
  }

  has(x: bigint): boolean {
    return this.#find(x) >= 0;
  }

  /** Removes x; returns whether it was a member. */
  delete(x: bigint): boolean {
    const i = this.#find(x);
    if (i < 0) return false;
    const s = this.#starts[i]!;
    const e = this.#ends[i]!;
    if (s === e) {
      this.#starts.splice(i, 1);
      this.#ends.splice(i, 1);
    } else if (x === s) {
      this.#starts[i] = s + 1n;
    } else if (x === e) {
      this.#ends[i] = e - 1n;
    } else {
      this.#ends[i] = x - 1n;
      this.#starts.splice(i + 1, 0, x + 1n);
      this.#ends.splice(i + 1, 0, e);
    }
    this.#size -= 1n;
    return true;
  }

  /** Adds x; returns whether it was absent. Merges with neighbouring intervals. */
  add(x: bigint): boolean {
    const i = this.#floor(x); // last interval starting at or before x, or -1
    if (i >= 0 && x <= this.#ends[i]!) return false;
    const joinsLeft = i >= 0 && this.#ends[i]! + 1n === x;
    const joinsRight = i + 1 < this.#starts.length && this.#starts[i + 1]! - 1n === x;
    if (joinsLeft && joinsRight) {
      this.#ends[i] = this.#ends[i + 1]!;
      this.#starts.splice(i + 1, 1);
      this.#ends.splice(i + 1, 1);
    } else if (joinsLeft) {
      this.#ends[i] = x;
    } else if (joinsRight) {
      this.#starts[i + 1] = x;
    } else {
      this.#starts.splice(i + 1, 0, x);
      this.#ends.splice(i + 1, 0, x);
    }
    this.#size += 1n;
    return true;
  }

  /** A new set: this minus the given values, which must be sorted ascending (duplicates allowed). Linear. */
  withoutSorted(points: readonly bigint[]): IntervalSet {
    const removed = new IntervalSet(); // single values, sorted: all minus needs (adjacent ones need no merging)
    for (const x of points) {
      if (removed.#ends.at(-1) === x) continue;
      removed.#starts.push(x);
      removed.#ends.push(x);
    }
    return this.minus(removed);
  }

  /** A new set: this minus every interval of `other`. Linear in both. */
  minus(other: IntervalSet): IntervalSet {
    const out = new IntervalSet();
    let j = 0;
    for (let i = 0; i < this.#starts.length; i++) {
      let s = this.#starts[i]!;
      const e = this.#ends[i]!;
      while (j < other.#starts.length && other.#ends[j]! < s) j++;
      let k = j;
      while (s <= e && k < other.#starts.length && other.#starts[k]! <= e) {
        if (other.#starts[k]! > s) {
          out.#starts.push(s);
          out.#ends.push(other.#starts[k]! - 1n);
        }
        s = other.#ends[k]! + 1n > s ? other.#ends[k]! + 1n : s;
        k++;
      }
      if (s <= e) {
        out.#starts.push(s);
        out.#ends.push(e);
      }
    }
    out.#recount();
    return out;
  }

  clone(): IntervalSet {
    const out = new IntervalSet();
    out.#starts = [...this.#starts];
    out.#ends = [...this.#ends];
    out.#size = this.#size;
    return out;
  }

  *intervals(): IterableIterator<Interval> {
    for (let i = 0; i < this.#starts.length; i++) yield { start: this.#starts[i]!, end: this.#ends[i]! };
  }

  /** Index of the interval containing x, or -1. */
  #find(x: bigint): number {
    const i = this.#floor(x);
    return i >= 0 && x <= this.#ends[i]! ? i : -1;
  }

  /** Index of the last interval with start <= x, or -1. */
  #floor(x: bigint): number {
    let lo = 0;
    let hi = this.#starts.length - 1;
    let ans = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#starts[mid]! <= x) {
        ans = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    return ans;
  }

  #recount(): void {
    let n = 0n;
    for (let i = 0; i < this.#starts.length; i++) n += this.#ends[i]! - this.#starts[i]! + 1n;
    this.#size = n;
  }
}

/** Ascending order of bigints (addresses) or strings (keys, timestamps). */
export function cmp<T extends bigint | string>(a: T, b: T): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
