// Read-your-writes over the claims cache, for both loops. The informer's cache lags behind our own writes by one
// watch event. A claims reconcile that ran in that gap would see the claim it just created as missing and create it
// again; an allocator pass would see the address it just recorded as free and hand it out again, the one thing it
// must never do. client-go controllers solve this with "expectations"; this is the same idea, keyed by claim: keep
// the newest state we know of that the cache may not show yet, and answer with it until the cache has caught up.
//
// Three kinds of entries:
// - written: a write the API server accepted; `after` is its answer (null: the claim is gone).
// - seeded (allocator): a claim read with a consistent (quorum) list when this replica became the leader, newer than
//   the cache: the previous leader's last writes, which this replica's cache may not have received yet.
// - pending (allocator): a status write whose outcome is unknown (timeout, connection lost, 5xx): it may have been
//   applied. The claim is taken to hold the addresses we tried to give it until the write is retried to a definite
//   answer, or the cache shows the claim changed (which, with the resourceVersion precondition, settles it).
//
// The one rule for "the cache has caught up" (caughtUp below): the cache shows another incarnation (other uid); or,
// for a claim that is gone or a write of unknown outcome, any state past the one the write was made against; or,
// for a known answer, the answer's resourceVersion or a newer one. resourceVersions are compared as integers, which
// they are with etcd (Kubernetes calls them opaque; a non-numeric one falls back to "other than the version the
// write was made against"). Comparing, rather than waiting for an exact match, keeps an entry while the cache
// replays older events, and keeps our answer over someone else's intermediate change. A claim the cache does not
// show ends nothing but a delete's entry: its add may be on its way, and a delete event ends the entry.

import type { IPAMClaim } from '../kube/types.ts';
import { trimIPAMClaim } from '../sources/trim.ts';

type EntryKind = 'written' | 'seeded' | 'pending';

interface Entry {
  kind: EntryKind;
  /** What the entries are grouped by: the allocator's network ('' for the claims loop). */
  group: string;
  /** The resourceVersion the write was made against, or the cache showed (undefined: the claim was absent). */
  before: string | undefined;
  /** What we know the claim to be (null: gone; pending: as we tried to write it). */
  after: IPAMClaim | null;
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

/**
 * true/false when both are integers; undefined otherwise. Compared as digit strings (etcd writes no leading zeros),
 * so a claim event costs no allocation.
 */
export function resourceVersionAtLeast(a: string | undefined, b: string | undefined): boolean | undefined {
  if (a === undefined || b === undefined || !NUMERIC.test(a) || !NUMERIC.test(b)) return undefined;
  return a.length !== b.length ? a.length > b.length : a >= b;
}

/** Whether `cached` is a state after `before`. */
function past(cached: string | undefined, before: string | undefined): boolean {
  const atLeast = resourceVersionAtLeast(cached, before);
  return atLeast !== undefined ? atLeast && cached !== before : cached !== before;
}

function caughtUp(entry: Entry, cached: IPAMClaim | undefined): boolean {
  if (cached === undefined) return entry.after === null;
  const uid = entry.after?.metadata.uid;
  if (uid && cached.metadata.uid && uid !== cached.metadata.uid) return true;
  const version = cached.metadata.resourceVersion;
  if (entry.after === null || entry.kind === 'pending') return past(version, entry.before);
  return resourceVersionAtLeast(version, entry.after.metadata.resourceVersion) ?? version !== entry.before;
}

/** A terminating claim whose last finalizer a write removed is deleted by the API server with that write. */
const goneBy = (answer: IPAMClaim | null): boolean =>
  answer === null || (answer.metadata.deletionTimestamp !== undefined && (answer.metadata.finalizers?.length ?? 0) === 0);

export class WriteOverlay {
  readonly #entries = new Map<string, Entry>();
  /** Creates in flight, by claim key; and the uid the informer showed for such a key before the create returned. */
  readonly #creating = new Map<string, number>();
  readonly #addedWhileCreating = new Map<string, string | undefined>();

  get size(): number {
    return this.#entries.size;
  }

  /**
   * Records a write to claim `key` (`namespace/name`) made against resourceVersion `before`; `group` is the
   * allocator's network. The answer is kept trimmed like the cache's objects: the full object (managedFields and
   * all) is not needed and, until the watch event comes, would be held once per claim written.
   */
  record(key: string, before: string | undefined, answer: IPAMClaim | null, group = ''): void {
    this.#entries.set(key, { kind: 'written', group, before, after: goneBy(answer) ? null : trimIPAMClaim(answer!) });
  }

  /** A claim read from the API that the cache (at `cachedVersion`) does not show yet. */
  seed(key: string, network: string, cachedVersion: string | undefined, fresh: IPAMClaim): void {
    const existing = this.#entries.get(key);
    if (existing?.after && existing.kind !== 'seeded' && resourceVersionAtLeast(existing.after.metadata.resourceVersion, fresh.metadata.resourceVersion))
      return;
    this.#entries.set(key, { kind: 'seeded', group: network, before: cachedVersion, after: fresh });
  }

  /** A status write that may or may not have been applied: `attempted` is the claim as the write would leave it. */
  recordPending(key: string, network: string, before: string, attempted: IPAMClaim): void {
    this.#entries.set(key, { kind: 'pending', group: network, before, after: attempted });
  }

  /**
   * A create of claim `key` is about to be sent. The API server often announces the new claim on the watch before
   * it answers the POST; without this, that announcement would look like someone else's change and run the VM's
   * reconcile a second time.
   */
  beginCreate(key: string): void {
    this.#creating.set(key, (this.#creating.get(key) ?? 0) + 1);
  }

  /**
   * The create of `key` returned: `created` is the server's answer, null when it failed. True when the informer
   * showed a claim under this key meanwhile and was told it was our echo: after a failed create that claim is
   * someone else's, and the caller must look again (observeUpdated did not let it run the reconcile).
   */
  endCreate(key: string, created: IPAMClaim | null): boolean {
    const left = (this.#creating.get(key) ?? 1) - 1;
    const seenUid = this.#addedWhileCreating.get(key);
    if (left > 0) {
      this.#creating.set(key, left);
    } else {
      this.#creating.delete(key);
      this.#addedWhileCreating.delete(key);
    }
    if (created === null) return seenUid !== undefined;
    // The informer already showed this very object: the cache is as new as the answer, nothing to bridge.
    if (seenUid !== undefined && seenUid === created.metadata.uid) return false;
    this.record(key, undefined, created);
    return seenUid !== undefined;
  }

  /**
   * Called with each added or updated claim the informer delivers (`added`: the informer had no claim under this
   * key). True when it is the echo of our own write (the very state the write answered): the reconcile that wrote
   * already acted on that state, so it needs no new one. A state the cache has caught up with ends the entry.
   *
   * A claim added while our create of that name is in flight counts as the echo too: the reconcile that sends the
   * create is still running and learns from the answer whether the claim is its own (success) or someone else's
   * (AlreadyExists, which makes it look again). A later update of it is never taken for an echo that way.
   */
  observeUpdated(key: string, cached: IPAMClaim, added = false): boolean {
    const entry = this.#entries.get(key);
    if (!entry && added && this.#creating.has(key) && !this.#addedWhileCreating.has(key)) {
      this.#addedWhileCreating.set(key, cached.metadata.uid);
      return true;
    }
    if (!entry || !caughtUp(entry, cached)) return false;
    this.#entries.delete(key);
    return entry.after !== null && entry.after.metadata.uid === cached.metadata.uid && entry.after.metadata.resourceVersion === cached.metadata.resourceVersion;
  }

  /** The claim as it is, given the cached one: ours while the cache has not caught up yet. */
  view(key: string, cached: IPAMClaim | undefined): IPAMClaim | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return cached;
    if (!caughtUp(entry, cached)) return entry.after ?? undefined;
    this.#entries.delete(key);
    return cached;
  }

  /** A delete seen by the informer ends what we knew of that incarnation (or of a claim we saw go). */
  observeDeleted(key: string, uid: string | undefined): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    const ours = entry.after?.metadata.uid;
    if (entry.after === null || !uid || !ours || ours === uid) this.#entries.delete(key);
  }

  /** Forgets an entry (e.g. a pending write that the API said did not happen). */
  forget(key: string): void {
    this.#entries.delete(key);
  }

  /** Claims of `network` with an entry (some may not be in the cache yet). */
  keysOf(network: string): string[] {
    const out: string[] = [];
    for (const [key, entry] of this.#entries) if (entry.group === network) out.push(key);
    return out;
  }

  /** Writes of `network` whose outcome is unknown, to retry. */
  pendingOf(network: string): PendingWrite[] {
    const out: PendingWrite[] = [];
    for (const [key, entry] of this.#entries) {
      const status = entry.after?.status;
      if (entry.kind !== 'pending' || entry.group !== network || entry.before === undefined || !status) continue;
      out.push({ key, network, resourceVersion: entry.before, uid: entry.after?.metadata.uid, status });
    }
    return out;
  }

  /** The networks with an entry. */
  networks(): Set<string> {
    const out = new Set<string>();
    for (const entry of this.#entries.values()) if (entry.group !== '') out.add(entry.group);
    return out;
  }
}
