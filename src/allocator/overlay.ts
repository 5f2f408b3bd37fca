// The claims cache lags behind our own status writes by one watch event. The allocator rebuilds a network's pool
// from the cache on every pass, so a pass that ran in that gap would see the address it just recorded as free and
// hand it out again: the one thing it must never do. This overlay keeps, per claim, the newest state we know of
// that the cache may not show yet, and answers with it until the cache has caught up.
//
// Three kinds of entries:
// - written: a status write the API server accepted; `after` is its answer.
// - seeded: a claim read with a consistent (quorum) list when this replica became the leader, newer than the cache:
//   the previous leader's last writes, which this replica's cache may not have received yet.
// - pending: a status write whose outcome is unknown (timeout, connection lost, 5xx): it may have been applied. The
//   claim is taken to hold the addresses we tried to give it until the write is retried to a definite answer, or
//   the cache shows the claim changed (which, with the resourceVersion precondition, settles it either way).
//
// When the cache has caught up: for written and seeded entries, when the cached resourceVersion is at least the
// entry's. resourceVersions are compared as integers, which they are with etcd (Kubernetes calls them opaque; a
// non-numeric one falls back to "different from the one we wrote against"). Comparing, rather than waiting for an
// exact match, is what keeps an entry valid while the cache replays older events of the same claim. A deleted or
// re-created claim (other uid) ends its entry.

import type { IPAMClaim } from '../kube/types.ts';

type EntryKind = 'written' | 'seeded' | 'pending';

interface Entry {
  kind: EntryKind;
  network: string;
  /** The resourceVersion the write was made against (pending) or the cache showed (written, seeded). */
  before: string | undefined;
  /** What we know the claim to be (pending: as we tried to write it). */
  after: IPAMClaim;
  /** pending: the status we tried to write, to retry it as is. */
  status?: IPAMClaim['status'];
}

export interface PendingWrite {
  key: string;
  network: string;
  /** The resourceVersion precondition of the retry: the one the first attempt was made against. */
  resourceVersion: string;
  uid: string | undefined;
  status: NonNullable<IPAMClaim['status']>;
}

const NUMERIC = /^[0-9]+$/;

/** true/false when both are integers; undefined otherwise. */
export function resourceVersionAtLeast(a: string | undefined, b: string | undefined): boolean | undefined {
  if (a === undefined || b === undefined || !NUMERIC.test(a) || !NUMERIC.test(b)) return undefined;
  return BigInt(a) >= BigInt(b);
}

export class StatusOverlay {
  readonly #entries = new Map<string, Entry>();

  get size(): number {
    return this.#entries.size;
  }

  /** A status write of claim `key` accepted by the API server; `before` is the resourceVersion it was made against. */
  recordWrite(key: string, network: string, before: string | undefined, after: IPAMClaim): void {
    this.#entries.set(key, { kind: 'written', network, before, after });
  }

  /** A claim read from the API that the cache (at `cachedVersion`) does not show yet. */
  seed(key: string, network: string, cachedVersion: string | undefined, fresh: IPAMClaim): void {
    const existing = this.#entries.get(key);
    if (existing && existing.kind !== 'seeded' && resourceVersionAtLeast(existing.after.metadata.resourceVersion, fresh.metadata.resourceVersion)) return;
    this.#entries.set(key, { kind: 'seeded', network, before: cachedVersion, after: fresh });
  }

  /** A status write that may or may not have been applied: `attempted` is the claim as the write would leave it. */
  recordPending(key: string, network: string, before: string, attempted: IPAMClaim): void {
    this.#entries.set(key, { kind: 'pending', network, before, after: attempted, status: attempted.status });
  }

  /** The claim as it is, given the cached one. */
  view(key: string, cached: IPAMClaim | undefined): IPAMClaim | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return cached;
    if (cached === undefined) return entry.after;
    if (entry.after.metadata.uid && cached.metadata.uid && entry.after.metadata.uid !== cached.metadata.uid) {
      this.#entries.delete(key);
      return cached;
    }
    if (this.#caughtUp(entry, cached.metadata.resourceVersion)) {
      this.#entries.delete(key);
      return cached;
    }
    return entry.after;
  }

  #caughtUp(entry: Entry, cachedVersion: string | undefined): boolean {
    if (entry.kind === 'pending') {
      // Any change after the version the attempt was made against settles it: with the precondition, the attempt
      // either is that change or can no longer land. (The cache may still be older than that version, when the
      // attempt was made against a seeded or written entry.)
      const atLeast = resourceVersionAtLeast(cachedVersion, entry.before);
      return atLeast !== undefined ? atLeast && cachedVersion !== entry.before : cachedVersion !== entry.before;
    }
    const atLeast = resourceVersionAtLeast(cachedVersion, entry.after.metadata.resourceVersion);
    if (atLeast !== undefined) return atLeast;
    return cachedVersion !== entry.before;
  }

  /** The informer saw the claim deleted: whatever we knew about that incarnation is moot. */
  observeDeleted(key: string, uid: string | undefined): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    if (!uid || !entry.after.metadata.uid || entry.after.metadata.uid === uid) this.#entries.delete(key);
  }

  /** Claims of `network` with an entry (some may not be in the cache yet). */
  keysOf(network: string): string[] {
    const out: string[] = [];
    for (const [key, entry] of this.#entries) if (entry.network === network) out.push(key);
    return out;
  }

  /** Writes of `network` whose outcome is unknown, to retry. */
  pendingOf(network: string): PendingWrite[] {
    const out: PendingWrite[] = [];
    for (const [key, entry] of this.#entries) {
      if (entry.kind !== 'pending' || entry.network !== network || entry.before === undefined || !entry.status) continue;
      out.push({ key, network, resourceVersion: entry.before, uid: entry.after.metadata.uid, status: entry.status });
    }
    return out;
  }

  /** Forgets an entry (e.g. a pending write that the API said did not happen). */
  forget(key: string): void {
    this.#entries.delete(key);
  }

  networks(): Set<string> {
    return new Set([...this.#entries.values()].map((e) => e.network));
  }
}
