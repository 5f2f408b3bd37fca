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
   * Called with each added or updated claim the informer delivers. True when it is the echo of our own write (the
   * very state the write answered): the reconcile that wrote already acted on that state, so it needs no new one.
   * Any state past the write's `before` ends the expectation.
   */
  observeUpdated(key: string, cached: IPAMClaim): boolean {
    const entry = this.#entries.get(key);
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
