// The synchronous cache behind an informer: objects by `namespace/name`, a namespace index, and named secondary
// indexes. Every mutation returns the events it implies, which is where event de-duplication (an update that does
// not change the trimmed content is no event) and relist diffing live. No I/O, no time: tests drive it directly.

import type { KubeObject } from '../kube/types.ts';
import { keyString } from '../kube/key.ts';

export type ChangeType = 'add' | 'update' | 'delete';

export interface ChangeEvent<T> {
  type: ChangeType;
  /** For add/update the new state; for delete the last state seen (the final one when the watch delivered it). */
  object: T;
  /** For update: the previous cached state. For delete: the cached state, when there was one. */
  old?: T;
  /**
   * Set on deletes found by a relist: the object vanished while we were disconnected, so `object` is the last state
   * we saw, not its final one (client-go's DeletedFinalStateUnknown).
   */
  finalStateUnknown?: true;
  /** Set on every event of a full list (the first one or a relist), as opposed to one the watch delivered. */
  fromList?: true;
}

export type IndexFn<T> = (obj: T) => readonly string[];

/**
 * Deep equality of plain JSON values, ignoring object members whose value is undefined. Key order does not matter;
 * array order does.
 */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    if (a.length !== bb.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], bb[i])) return false;
    return true;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  let na = 0;
  for (const k in ao) {
    if (ao[k] === undefined) continue;
    na++;
    if (!deepEqual(ao[k], bo[k])) return false;
  }
  let nb = 0;
  for (const k in bo) if (bo[k] !== undefined) nb++;
  return na === nb;
}

/**
 * Whether two states of one object differ in anything but bookkeeping. resourceVersion changes on every write and
 * generation on every spec write, including writes to fields the trim dropped, so neither counts.
 */
export function sameContent(a: KubeObject, b: KubeObject): boolean {
  const { resourceVersion: _ra, generation: _ga, ...ma } = a.metadata;
  const { resourceVersion: _rb, generation: _gb, ...mb } = b.metadata;
  if (!deepEqual(ma, mb)) return false;
  for (const k in a)
    if (k !== 'metadata' && !deepEqual((a as unknown as Record<string, unknown>)[k], (b as unknown as Record<string, unknown>)[k])) return false;
  for (const k in b) if (k !== 'metadata' && !(k in a) && (b as unknown as Record<string, unknown>)[k] !== undefined) return false;
  return true;
}

/** A different incarnation: same name, different uid (deleted and recreated). */
function reincarnated(a: KubeObject, b: KubeObject): boolean {
  return !!a.metadata.uid && !!b.metadata.uid && a.metadata.uid !== b.metadata.uid;
}

interface Index<T> {
  fn: IndexFn<T>;
  /**
   * index value → keys of the objects that produce it. Most values name one object, and nearly all the rest a
   * handful (a VM's claims by owner uid are its two or three), so one key is held as the string itself, up to
   * SMALL_INDEX_VALUE keys as an array of exactly that length, and only more in a Set: a Set per value costs several
   * times what a small array of the same keys does, and there are a few index values per cached object.
   */
  entries: Map<string, IndexEntry>;
}

type IndexEntry = string | readonly string[] | Set<string>;

const SMALL_INDEX_VALUE = 8;

function* keysIn(entry: IndexEntry | undefined): Iterable<string> {
  if (entry === undefined) return;
  if (typeof entry === 'string') yield entry;
  else yield* entry;
}

/** `entry` with `key` added (the same entry when it already holds it). */
function withKey(entry: IndexEntry | undefined, key: string): IndexEntry {
  if (entry === undefined) return key;
  if (typeof entry === 'string') return entry === key ? entry : [entry, key];
  if (entry instanceof Set) return entry.add(key);
  if (entry.includes(key)) return entry;
  // concat allocates exactly the length it needs; a push would leave a dozen spare slots in every array.
  return entry.length < SMALL_INDEX_VALUE ? entry.concat(key) : new Set([...entry, key]);
}

/** `entry` without `key`; undefined when nothing is left. */
function withoutKey(entry: IndexEntry, key: string): IndexEntry | undefined {
  if (typeof entry === 'string') return entry === key ? undefined : entry;
  if (entry instanceof Set) {
    entry.delete(key);
    return entry.size === 0 ? undefined : entry.size === 1 ? entry.values().next().value! : entry;
  }
  const at = entry.indexOf(key);
  if (at === -1) return entry;
  if (entry.length === 2) return entry[1 - at]!;
  return entry.slice(0, at).concat(entry.slice(at + 1));
}

export class Store<T extends KubeObject> {
  readonly #items = new Map<string, T>();
  readonly #byNamespace = new Map<string, Map<string, T>>();
  readonly #indexes = new Map<string, Index<T>>();

  get size(): number {
    return this.#items.size;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#items.get(keyString({ namespace, name }));
  }

  getByKey(key: string): T | undefined {
    return this.#items.get(key);
  }

  /** Every object, or those of one namespace (from the namespace index, not a scan). */
  list(namespace?: string): T[] {
    if (namespace === undefined) return [...this.#items.values()];
    return [...(this.#byNamespace.get(namespace)?.values() ?? [])];
  }

  keys(namespace?: string): string[] {
    if (namespace === undefined) return [...this.#items.keys()];
    return [...(this.#byNamespace.get(namespace)?.keys() ?? [])];
  }

  /** Registers an index; objects already cached are indexed at once. */
  addIndex(name: string, fn: IndexFn<T>): void {
    if (this.#indexes.has(name)) throw new Error(`index ${name} already exists`);
    const index: Index<T> = { fn, entries: new Map() };
    this.#indexes.set(name, index);
    for (const [key, obj] of this.#items) this.#indexAdd(index, key, obj);
  }

  /** Objects whose index function returned `value`. */
  byIndex(name: string, value: string): T[] {
    const out: T[] = [];
    for (const key of keysIn(this.#index(name).entries.get(value))) {
      const obj = this.#items.get(key);
      if (obj) out.push(obj);
    }
    return out;
  }

  /** Keys of the objects whose index function returned `value`. */
  indexKeys(name: string, value: string): string[] {
    return [...keysIn(this.#index(name).entries.get(value))];
  }

  /** Stores the object; returns add, update, delete+add (new uid) or nothing (same content). */
  upsert(obj: T): ChangeEvent<T>[] {
    const key = keyString(obj.metadata);
    const old = this.#items.get(key);
    if (!old) {
      this.#insert(key, obj);
      return [{ type: 'add', object: obj }];
    }
    if (reincarnated(old, obj)) {
      this.#remove(key, old);
      this.#insert(key, obj);
      return [
        { type: 'delete', object: old, finalStateUnknown: true },
        { type: 'add', object: obj },
      ];
    }
    if (sameContent(old, obj)) {
      // Only bookkeeping changed: keep the newest resourceVersion for preconditions, without an event. Index
      // functions read content, so the indexes are unaffected.
      this.#items.set(key, obj);
      this.#byNamespace.get(obj.metadata.namespace ?? '')?.set(key, obj);
      return [];
    }
    this.#remove(key, old);
    this.#insert(key, obj);
    return [{ type: 'update', object: obj, old }];
  }

  /** Removes the object. A delete is always an event, even for an object that was never cached. */
  delete(obj: T): ChangeEvent<T>[] {
    const key = keyString(obj.metadata);
    const old = this.#items.get(key);
    if (old) this.#remove(key, old);
    return [old ? { type: 'delete', object: obj, old } : { type: 'delete', object: obj }];
  }

  /**
   * Makes the cache equal to a fresh list and returns the difference as events: deletes (with finalStateUnknown)
   * for objects that vanished, adds for new ones, updates for changed ones, and delete+add for recreated ones.
   */
  replace(objects: readonly T[]): ChangeEvent<T>[] {
    const fresh = new Map<string, T>();
    for (const obj of objects) fresh.set(keyString(obj.metadata), obj);
    const events: ChangeEvent<T>[] = [];
    for (const [key, old] of [...this.#items]) {
      if (!fresh.has(key)) {
        this.#remove(key, old);
        events.push({ type: 'delete', object: old, finalStateUnknown: true });
      }
    }
    for (const obj of fresh.values()) for (const e of this.upsert(obj)) events.push(e);
    return events;
  }

  #index(name: string): Index<T> {
    const index = this.#indexes.get(name);
    if (!index) throw new Error(`no index named ${name}`);
    return index;
  }

  #insert(key: string, obj: T): void {
    this.#items.set(key, obj);
    const ns = obj.metadata.namespace ?? '';
    let m = this.#byNamespace.get(ns);
    if (!m) this.#byNamespace.set(ns, (m = new Map()));
    m.set(key, obj);
    for (const index of this.#indexes.values()) this.#indexAdd(index, key, obj);
  }

  #remove(key: string, obj: T): void {
    this.#items.delete(key);
    const ns = obj.metadata.namespace ?? '';
    const m = this.#byNamespace.get(ns);
    m?.delete(key);
    if (m?.size === 0) this.#byNamespace.delete(ns);
    for (const index of this.#indexes.values()) {
      for (const value of new Set(index.fn(obj))) {
        const keys = index.entries.get(value);
        if (keys === undefined) continue;
        const left = withoutKey(keys, key);
        if (left === undefined) index.entries.delete(value);
        else if (left !== keys) index.entries.set(value, left);
      }
    }
  }

  #indexAdd(index: Index<T>, key: string, obj: T): void {
    for (const value of index.fn(obj)) {
      const keys = index.entries.get(value);
      const next = withKey(keys, key);
      if (next !== keys) index.entries.set(value, next);
    }
  }
}
