// One copy of each string that thousands of cached objects repeat. JSON.parse gives every object its own copy of
// "kubevirt.io/v1", of its namespace, its finalizer, its network names; at 10,000 VMs those copies are megabytes.
// Only low-cardinality fields are interned (never names or uids, which are unique), and the table is bounded so that
// an unusual cluster (say, thousands of namespaces) costs at most the table, never an unbounded leak: past the bound
// a string is simply kept as it came.

export const INTERN_MAX_ENTRIES = 16_384;
const table = new Map<string, string>();

export function intern(s: string): string;
export function intern(s: string | undefined): string | undefined;
export function intern(s: string | undefined): string | undefined {
  if (s === undefined) return undefined;
  const known = table.get(s);
  if (known !== undefined) return known;
  if (table.size < INTERN_MAX_ENTRIES) table.set(s, s);
  return s;
}

/** For tests: how many distinct strings are held. */
export function internedCount(): number {
  return table.size;
}

export const SHARED_MAX_ENTRIES = 2_048;
const shared = new Map<string, object>();

/** Freezes a plain JSON value and everything in it; what is already frozen is taken as frozen throughout. */
export function deepFreeze<T>(x: T): T {
  if (x !== null && typeof x === 'object' && !Object.isFrozen(x)) {
    Object.freeze(x);
    for (const v of Object.values(x)) deepFreeze(v);
  }
  return x;
}

/**
 * The same, for small plain-JSON subtrees that many objects repeat whole: a VM's template networks and interfaces
 * are usually identical to its VMI's, and across VMs made from one template. The first object with a given content
 * is kept (deep-frozen, since others will share it) and returned for every later equal one. Bounded like intern();
 * past the bound an object is returned as it came.
 */
export function share<T extends object>(value: T): T {
  return shareIn(shared, SHARED_MAX_ENTRIES, 'keep', value);
}

/** The first value of each content in `table`; a full table is left as it is (`keep`) or emptied (`restart`). */
function shareIn<T extends object>(table: Map<string, object>, max: number, whenFull: 'keep' | 'restart', value: T): T {
  const key = JSON.stringify(value);
  const known = table.get(key);
  if (known !== undefined) return known as T;
  if (table.size >= max) {
    if (whenFull === 'keep') return value;
    table.clear();
  }
  table.set(key, deepFreeze(value));
  return value;
}

const RECENT_MAX_ENTRIES = 256;
const recent = new Map<string, object>();

/**
 * Like share(), for values that repeat in neighbours rather than everywhere: a VM's claims carry the same owner
 * reference list and the same label, and the informer meets them one after the other (they are created together,
 * and listed by name). A small table, emptied when full, catches those pairs without holding high-cardinality
 * values for long.
 */
export function shareRecent<T extends object>(value: T): T {
  return shareIn(recent, RECENT_MAX_ENTRIES, 'restart', value);
}
