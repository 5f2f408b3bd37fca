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
