// An informer cache in memory, for the webhook's tests: what ObjectCache reads, and the events$ an informer delivers.
import { Subject } from '../src/streams/rx.ts';
import type { ObjectCache } from '../src/webhook/admission.ts';

export class FakeCache<T extends { metadata: { name: string; namespace?: string } }> implements ObjectCache<T> {
  readonly items: T[];
  /** What an informer's events$ delivers: every object added to the cache. */
  readonly events = new Subject<{ object: T }>();
  constructor(items: T[] = []) {
    this.items = items;
  }
  add(item: T): void {
    this.items.push(item);
    this.events.next({ object: item });
  }
  get(namespace: string | undefined, name: string): T | undefined {
    return this.items.find((i) => i.metadata.namespace === namespace && i.metadata.name === name);
  }
  list(namespace?: string): T[] {
    return this.items.filter((i) => namespace === undefined || i.metadata.namespace === namespace);
  }
}
