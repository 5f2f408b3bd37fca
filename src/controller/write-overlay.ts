// The informer's cache lags behind our own writes by one watch event. A reconcile that runs in that gap (a VMI
// status update, a resync) would see the claim it just created as missing and create it again: a wasted write and
// an AlreadyExists error per claim. client-go controllers solve this with "expectations"; this is the same idea,
// keyed by claim: remember the result of each write until the cache shows a newer state of that claim.

import type { IPAMClaim } from '../kube/types.ts';
import { trimIPAMClaim } from '../sources/trim.ts';

interface Entry {
  /** The resourceVersion the cache showed when we wrote (undefined: the claim was absent). */
  before: string | undefined;
  /** What the API server answered (null: the claim is gone). */
  after: IPAMClaim | null;
  at: number;
}

export class WriteOverlay {
  readonly #entries = new Map<string, Entry>();
  /** Creates in flight, by claim key; and the uid the informer showed for such a key before the create returned. */
  readonly #creating = new Map<string, number>();
  readonly #addedWhileCreating = new Map<string, string | undefined>();
  readonly #ttlMs: number;
  readonly #now: () => number;

  /** `ttlMs` bounds how long a write can mask the cache if its watch event never comes (e.g. a relist). */
  constructor(options: { ttlMs?: number; now?: () => number } = {}) {
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * Records a write to claim `key` (`namespace/name`) made against the cached resourceVersion `before`. The answer
   * is kept trimmed like the cache's objects: the full object (managedFields and all) is not needed and, until the
   * watch event comes, would be held once per claim written.
   */
  record(key: string, before: string | undefined, after: IPAMClaim | null): void {
    this.#entries.set(key, { before, after: after === null ? null : trimIPAMClaim(after), at: this.#now() });
  }

  /**
   * A create of claim `key` is about to be sent. The API server often announces the new claim on the watch before
   * it answers the POST; without this, that announcement would look like someone else's change and run the VM's
   * reconcile a second time (a third of a cold start's reconciles were such reruns).
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
   * already acted on that state, so it needs no new one. Any state past the write's `before` ends the expectation.
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
    if (!entry || cached.metadata.resourceVersion === entry.before) return false;
    this.#entries.delete(key);
    return entry.after !== null && entry.after.metadata.uid === cached.metadata.uid && entry.after.metadata.resourceVersion === cached.metadata.resourceVersion;
  }

  /** The claim as it is, given the cached one: the write's result while the cache has not caught up yet. */
  view(key: string, cached: IPAMClaim | undefined): IPAMClaim | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return cached;
    const stale = cached?.metadata.resourceVersion === entry.before && this.#now() - entry.at < this.#ttlMs;
    if (stale) return entry.after ?? undefined;
    this.#entries.delete(key);
    return cached;
  }

  /** A delete seen by the informer ends any expectation about that object (it was created and removed meanwhile). */
  observeDeleted(key: string, uid: string | undefined): void {
    const entry = this.#entries.get(key);
    if (entry && (entry.after === null || entry.after.metadata.uid === uid)) this.#entries.delete(key);
  }

  /** Keys written recently, so a reconcile can also consider claims the cache does not list yet. */
  keys(): IterableIterator<string> {
    return this.#entries.keys();
  }
}
