// The suite's own access to the API server: plain REST through the harness's KubeHttp (independent of the
// controller's client), watches that record every event in order (for "nothing changed" windows and for ordering
// assertions), Events, and the API server's request counters.
import type { Cluster, KubeHttp } from '../harness/index.ts';
import type { IPAMClaim, KubeObject, NetworkAttachmentDefinition } from '../../src/kube/types.ts';
import { parsePrometheus, type Sample } from '../local/controller-process.ts';

export type { IPAMClaim, KubeObject, NetworkAttachmentDefinition, Sample };

const ns = (namespace: string) => `/namespaces/${encodeURIComponent(namespace)}`;
const tail = (name?: string) => (name === undefined ? '' : `/${encodeURIComponent(name)}`);

/** REST paths of the kinds the suite reads and writes. */
export const paths = {
  namespaces: (name?: string) => `/api/v1/namespaces${tail(name)}`,
  configMaps: (namespace: string, name?: string) => `/api/v1${ns(namespace)}/configmaps${tail(name)}`,
  pods: (namespace: string, name?: string) => `/api/v1${ns(namespace)}/pods${tail(name)}`,
  events: (namespace: string) => `/api/v1${ns(namespace)}/events`,
  claims: (namespace: string, name?: string) => `/apis/k8s.cni.cncf.io/v1alpha1${ns(namespace)}/ipamclaims${tail(name)}`,
  nads: (namespace: string, name?: string) => `/apis/k8s.cni.cncf.io/v1${ns(namespace)}/network-attachment-definitions${tail(name)}`,
  vms: (namespace: string, name?: string) => `/apis/kubevirt.io/v1${ns(namespace)}/virtualmachines${tail(name)}`,
  vmis: (namespace: string, name?: string) => `/apis/kubevirt.io/v1${ns(namespace)}/virtualmachineinstances${tail(name)}`,
  kubeVirts: (namespace: string, name?: string) => `/apis/kubevirt.io/v1${ns(namespace)}/kubevirts${tail(name)}`,
  secrets: (namespace: string, name?: string) => `/api/v1${ns(namespace)}/secrets${tail(name)}`,
  leases: (namespace: string, name?: string) => `/apis/coordination.k8s.io/v1${ns(namespace)}/leases${tail(name)}`,
  webhookConfigurations: (name?: string) => `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations${tail(name)}`,
};

export type JsonPatch = ({ op: 'add' | 'replace' | 'test'; path: string; value: unknown } | { op: 'remove'; path: string })[];

/** Thin typed REST over KubeHttp: 404 on reads is `undefined`; any other unexpected status throws with the body. */
export class Api {
  readonly http: KubeHttp;

  constructor(http: KubeHttp) {
    this.http = http;
  }

  async get<T>(path: string): Promise<T | undefined> {
    const res = await this.http.get(path);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}: ${res.body.slice(0, 400)}`);
    return res.json<T>();
  }

  async list<T>(path: string): Promise<{ items: T[]; resourceVersion: string }> {
    const res = await this.http.expect('GET', path, [200]);
    const body = res.json<{ items?: T[]; metadata?: { resourceVersion?: string } }>();
    return { items: body.items ?? [], resourceVersion: body.metadata?.resourceVersion ?? '' };
  }

  async create<T>(path: string, body: unknown): Promise<T> {
    return (await this.http.expect('POST', path, [201], body)).json<T>();
  }

  async mergePatch<T>(path: string, body: unknown): Promise<T> {
    return (await this.http.expect('PATCH', path, [200], body, 'application/merge-patch+json')).json<T>();
  }

  async jsonPatch<T>(path: string, ops: JsonPatch): Promise<T> {
    return (await this.http.expect('PATCH', path, [200], ops, 'application/json-patch+json')).json<T>();
  }

  /** Deletes; false when it was already gone. */
  async delete(path: string, opts: { propagationPolicy?: 'Foreground' | 'Background' | 'Orphan' } = {}): Promise<boolean> {
    const body = opts.propagationPolicy ? { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: opts.propagationPolicy } : undefined;
    const res = await this.http.request('DELETE', path, body);
    if (res.status === 404) return false;
    if (res.status !== 200 && res.status !== 202) throw new Error(`DELETE ${path}: HTTP ${res.status}: ${res.body.slice(0, 400)}`);
    return true;
  }

  claims(namespace: string): Promise<IPAMClaim[]> {
    return this.list<IPAMClaim>(paths.claims(namespace)).then((l) => l.items);
  }

  claim(namespace: string, name: string): Promise<IPAMClaim | undefined> {
    return this.get<IPAMClaim>(paths.claims(namespace, name));
  }
}

/** A recorded watch event; `rv` is the object's resourceVersion as a number (see WatchLog). */
export interface Recorded<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  obj: T;
  rv: number;
}

/**
 * Every ADDED/MODIFIED/DELETED event of one collection from the moment start() listed it, in order, with no gap:
 * the watch begins at the list's resourceVersion and resumes from the last one seen when the connection ends.
 *
 * Ordering assertions compare resourceVersions as numbers. The API treats them as opaque strings; on this suite's
 * single etcd they are etcd revisions, which grow with every write to any object, so "a < b" means "a was written
 * before b" (for a DELETED event, the object carries the revision of its deletion).
 */
export class WatchLog<T extends KubeObject = KubeObject> {
  readonly path: string;
  readonly events: Recorded<T>[] = [];
  /** The objects as the initial list returned them, by name: the state before the first recorded event. */
  readonly initial: Map<string, T>;
  #rv: string;
  #http: KubeHttp;
  #stop: (() => void) | undefined;
  #stopped = false;
  #error: string | undefined;

  private constructor(http: KubeHttp, path: string, rv: string, initial: T[]) {
    this.path = path;
    this.initial = new Map(initial.map((o) => [o.metadata.name, o]));
    this.#rv = rv;
    this.#http = http;
  }

  static async start<T extends KubeObject>(api: Api, path: string): Promise<WatchLog<T>> {
    const { items, resourceVersion } = await api.list<T>(path);
    const log = new WatchLog<T>(api.http, path, resourceVersion, items);
    await log.#connect();
    return log;
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    const query = `watch=true&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(this.#rv)}`;
    const watch = await this.#http.watch(`${this.path}${this.path.includes('?') ? '&' : '?'}${query}`, ({ type, object }) => {
      const obj = object as T & { code?: number; message?: string };
      if (type === 'BOOKMARK') {
        this.#rv = obj.metadata?.resourceVersion ?? this.#rv;
        return;
      }
      if (type === 'ERROR') {
        this.#error = `watch of ${this.path} failed: ${obj.code ?? ''} ${obj.message ?? ''}`;
        return;
      }
      const rv = obj.metadata.resourceVersion ?? this.#rv;
      this.#rv = rv;
      this.events.push({ type: type as Recorded<T>['type'], obj, rv: Number(rv) });
    });
    this.#stop = watch.stop;
    // The server ended the watch (timeout) or the connection dropped: resume from the last resourceVersion seen, so no
    // event is lost (an expired one comes back as an ERROR event, recorded above).
    void watch.done.then(() => {
      if (this.#stopped || this.#error) return;
      setTimeout(() => void this.#connect().catch((e: unknown) => (this.#error = `watch of ${this.path}: ${String(e)}`)), 20);
    });
  }

  /** Throws if the watch could not keep up (an ERROR event, e.g. 410 Gone): its record would have a gap. */
  check(): void {
    if (this.#error) throw new Error(this.#error);
  }

  of(name: string): Recorded<T>[] {
    return this.events.filter((e) => e.obj.metadata.name === name);
  }

  stop(): void {
    this.#stopped = true;
    this.#stop?.();
  }
}

/** One Event of the core API, as much as the suite looks at. */
export interface CoreEvent {
  metadata: { name: string; namespace: string };
  involvedObject: { kind: string; name: string; uid: string; apiVersion?: string };
  reason: string;
  message: string;
  type: string;
  count?: number;
  reportingComponent?: string;
}

/** Events about the object `uid` with `reason`, read with kubectl (an independent client). */
export async function eventsFor(cluster: Cluster, namespace: string, uid: string, reason: string): Promise<CoreEvent[]> {
  const out = await cluster.kubectl(['get', 'events', '-n', namespace, '--field-selector', `involvedObject.uid=${uid},reason=${reason}`, '-o', 'json']);
  return (JSON.parse(out.stdout) as { items: CoreEvent[] }).items;
}

/** All Events of a namespace (for diagnostics and for "no Event" checks). */
export async function namespaceEvents(cluster: Cluster, namespace: string): Promise<CoreEvent[]> {
  const out = await cluster.kubectl(['get', 'events', '-n', namespace, '-o', 'json']);
  return (JSON.parse(out.stdout) as { items: CoreEvent[] }).items;
}

export const WRITE_VERBS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * Writes on ipamclaims the API server has served since it started, from its own `/metrics`
 * (`apiserver_request_total{resource="ipamclaims",verb=~"POST|PUT|PATCH|DELETE"}`, every code and subresource),
 * read with `kubectl get --raw /metrics`. Returns the total and the series, for messages.
 */
export async function apiserverClaimWrites(cluster: Cluster): Promise<{ total: number; series: Sample[] }> {
  const out = await cluster.kubectl(['get', '--raw', '/metrics'], { timeoutMs: 60_000 });
  const series = parsePrometheus(out.stdout).filter(
    (s) => s.name === 'apiserver_request_total' && s.labels['resource'] === 'ipamclaims' && (WRITE_VERBS as readonly string[]).includes(s.labels['verb'] ?? ''),
  );
  return { total: series.reduce((n, s) => n + s.value, 0), series };
}
