// Watches the IPAMClaims of one namespace and records when each was first seen (the watch event's receipt time,
// performance.now()). A watch, not a polling loop: the measurement costs the API server one long request.
import type { KubeHttp, WatchHandle } from '../../e2e/harness/kubehttp.ts';
import { paths } from '../../e2e/suite/kube.ts';

interface WatchedObject {
  metadata?: { name?: string; resourceVersion?: string };
}

export class ClaimWatch {
  readonly namespace: string;
  /** Claim name → first time it was seen. */
  readonly added = new Map<string, number>();
  readonly #kube: KubeHttp;
  #rv = '';
  #handle: WatchHandle | undefined;
  #stopped = false;
  #waiters: { count: number; resolve: (t: number) => void; timer: NodeJS.Timeout; reject: (e: Error) => void }[] = [];

  constructor(kube: KubeHttp, namespace: string) {
    this.#kube = kube;
    this.namespace = namespace;
  }

  /** Lists (to learn the current claims and the resourceVersion), then watches from there. */
  async start(): Promise<void> {
    const list = await this.#kube.json<{ items: WatchedObject[]; metadata: { resourceVersion: string } }>('GET', paths.claims(this.namespace), [200]);
    const now = performance.now();
    for (const item of list.items) if (item.metadata?.name) this.added.set(item.metadata.name, now);
    this.#rv = list.metadata.resourceVersion;
    await this.#open();
  }

  async #open(): Promise<void> {
    const path = `${paths.claims(this.namespace)}?watch=1&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion=${this.#rv}`;
    this.#handle = await this.#kube.watch(path, (event, at) => this.#onEvent(event, at));
    void this.#handle.done.then(async () => {
      if (this.#stopped) return;
      // The server ended the watch (timeout, restart): resume from the last resourceVersion seen.
      for (let attempt = 1; !this.#stopped; attempt++) {
        try {
          await this.#open();
          return;
        } catch {
          await new Promise((r) => setTimeout(r, Math.min(2000, 100 * attempt)));
        }
      }
    });
  }

  #onEvent(event: { type: string; object: unknown }, at: number): void {
    const obj = event.object as WatchedObject;
    if (obj?.metadata?.resourceVersion) this.#rv = obj.metadata.resourceVersion;
    // ERROR (410 Gone or similar): the next open lists nothing new; relisting is not needed for a create-only count.
    if (event.type === 'ERROR' || event.type === 'BOOKMARK') return;
    const name = obj?.metadata?.name;
    if (event.type === 'ADDED' && name && !this.added.has(name)) {
      this.added.set(name, at);
      if (this.#waiters.length > 0) {
        const n = this.added.size;
        this.#waiters = this.#waiters.filter((w) => {
          if (n >= w.count) {
            w.resolve(at);
            return false;
          }
          return true;
        });
      }
    }
  }

  /** Resolves with the receipt time of the event that brought the count of claims to `count`. */
  waitForCount(count: number, timeoutMs: number): Promise<number> {
    if (this.added.size >= count) return Promise.resolve(Math.max(...this.added.values()));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w.resolve !== done);
        reject(new Error(`only ${this.added.size} of ${count} claims in ${this.namespace} after ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
      const done = (t: number): void => {
        clearTimeout(timer);
        resolve(t);
      };
      this.#waiters.push({ count, resolve: done, timer, reject });
    });
  }

  stop(): void {
    this.#stopped = true;
    this.#handle?.stop();
    for (const w of this.#waiters) {
      clearTimeout(w.timer);
      w.reject(new Error(`watch of claims in ${this.namespace} stopped`));
    }
    this.#waiters = [];
  }
}
