// Connection setup and a small typed REST layer: exactly the verbs this project uses, each returning parsed JSON or
// throwing a classified KubeApiError that names the object concerned.

import { pino, type Logger } from 'pino';
import { type Clock, realClock } from './clock.ts';
import { type ClassifyContext, KubeApiError, type ObjectRef, errorFromException, errorFromResponse } from './errors.ts';
import { type ListPage, type PageRequest, listAllPages } from './pager.ts';
import type { JsonPatchOp } from './patch.ts';
import { type ResourceDescriptor, resourcePath, resources } from './resources.ts';
import { TokenBucket } from './token-bucket.ts';
import type { ConnectionConfig } from './kubeconfig.ts';
import { ClusterUnreachableError } from './load-kubeconfig.ts';
import type { HttpRequest, HttpResponse, Transport, TransportOptions } from './transport.ts';
import { connectionTransport } from './connection-transport.ts';
import { type WatchEvent, parseWatchStream } from './watch-stream.ts';

/** Which objects of a collection: those of one namespace (undefined = all namespaces) matching the label selector. */
export interface Selection {
  namespace?: string;
  labelSelector?: string;
}

export interface ListOptions extends Selection {
  limit?: number;
  continue?: string;
  /** Unset: a consistent (quorum) read. '0': any cached version. */
  resourceVersion?: string;
  signal?: AbortSignal;
}

export interface WatchOptions extends Selection {
  resourceVersion?: string;
  /** Server-side duration of the watch; the stream then ends normally. */
  timeoutSeconds?: number;
  /** Default true: bookmarks keep the resume point fresh on quiet resources. */
  allowWatchBookmarks?: boolean;
  signal?: AbortSignal;
}

export interface WriteOptions {
  signal?: AbortSignal;
}

export interface PatchOptions extends WriteOptions {
  /** e.g. 'status' */
  subresource?: string;
}

export interface DeleteOptions {
  /** The delete only happens if the object still has this uid / resourceVersion (409 otherwise). */
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
  signal?: AbortSignal;
}

/** A core/v1 Event as this project writes it (compatible with the controller's recorder). */
export interface EventInput {
  metadata: { namespace: string; name?: string; generateName?: string };
  involvedObject: {
    apiVersion?: string;
    kind: string;
    namespace?: string;
    name: string;
    uid?: string;
    resourceVersion?: string;
    fieldPath?: string;
  };
  reason: string;
  message: string;
  type: string;
  source?: { component?: string; host?: string };
  reportingComponent?: string;
  reportingInstance?: string;
  firstTimestamp?: string;
  lastTimestamp?: string;
  count?: number;
  action?: string;
}

export interface VersionInfo {
  major: string;
  minor: string;
  gitVersion: string;
  [key: string]: unknown;
}

export interface KubeClientOptions {
  /** Client-side throttling like client-go's QPS/burst. Default: none. */
  rateLimit?: { qps: number; burst: number };
  /** Sent as `fieldManager` on writes. Default 'persistent-ips'. */
  fieldManager?: string;
  clock?: Clock;
  logger?: Logger;
  /** Called once per request with the verb, the resource plural and the HTTP code (or 'error'), for metrics. */
  onRequest?: (verb: string, resource: string, code: string) => void;
}

type Query = HttpRequest['query'];

const JSON_PATCH = 'application/json-patch+json';
const WRITE_METHODS = { create: 'POST', update: 'PUT', patch: 'PATCH' } as const;

export class KubeClient {
  readonly transport: Transport;
  readonly #bucket: TokenBucket | undefined;
  readonly #fieldManager: string;
  readonly #logger: Logger;
  readonly #onRequest: KubeClientOptions['onRequest'];

  constructor(transport: Transport, options: KubeClientOptions = {}) {
    this.transport = transport;
    this.#bucket = options.rateLimit
      ? new TokenBucket({ qps: options.rateLimit.qps, burst: options.rateLimit.burst, clock: options.clock ?? realClock })
      : undefined;
    this.#fieldManager = options.fieldManager ?? 'persistent-ips';
    this.#logger = options.logger ?? pino({ level: 'silent' });
    this.#onRequest = options.onRequest;
  }

  /** A client for a loaded kubeconfig's connection (see loadKubeConfig). */
  static fromKubeConfig(connection: ConnectionConfig, options: KubeClientOptions & Pick<TransportOptions, 'timeoutMs'> = {}): KubeClient {
    return new KubeClient(connectionTransport(connection, { timeoutMs: options.timeoutMs, logger: options.logger }), options);
  }

  get server(): string {
    return this.transport.server;
  }

  /** GET /version: proves the server answers. Throws ClusterUnreachableError when no answer arrives. */
  async version(signal?: AbortSignal): Promise<VersionInfo> {
    try {
      return await this.#json<VersionInfo>('get', { kind: 'APIServer', name: 'version' }, 'version', { method: 'GET', path: '/version', signal });
    } catch (err) {
      if (err instanceof KubeApiError && err.code === undefined && !signal?.aborted) throw new ClusterUnreachableError(this.server, { cause: err });
      throw err;
    }
  }

  /** One page of a collection. */
  async list<T>(r: ResourceDescriptor, options: ListOptions = {}): Promise<ListPage<T>> {
    const query: Query = {
      labelSelector: options.labelSelector,
      limit: options.limit,
      continue: options.continue,
      // The server rejects a resourceVersion next to a continue token: the token already pins the snapshot.
      resourceVersion: options.continue ? undefined : options.resourceVersion,
    };
    const body = await this.#json<{ items?: T[] | null; metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number } }>(
      'list',
      { kind: r.kind, namespace: options.namespace },
      r.plural,
      { method: 'GET', path: resourcePath(r, options.namespace), query, signal: options.signal },
    );
    const page: ListPage<T> = { items: body.items ?? [], resourceVersion: body.metadata?.resourceVersion ?? '' };
    if (body.metadata?.continue) page.continue = body.metadata.continue;
    if (body.metadata?.remainingItemCount !== undefined) page.remainingItemCount = body.metadata.remainingItemCount;
    return page;
  }

  /** Every page of a collection, from one snapshot (falls back to an unpaginated list if a token expires). */
  listAll<T>(
    r: ResourceDescriptor,
    options: Omit<ListOptions, 'continue' | 'limit'> & { pageSize?: number } = {},
  ): Promise<{ items: T[]; resourceVersion: string }> {
    const { pageSize, ...rest } = options;
    return listAllPages<T>((req: PageRequest) => this.list<T>(r, { ...rest, limit: req.limit, continue: req.continue, signal: req.signal ?? rest.signal }), {
      pageSize,
      signal: options.signal,
    });
  }

  /**
   * Streams watch events until the server ends the watch (timeoutSeconds), the signal aborts, or the connection
   * fails (KubeApiError). ERROR events are yielded as they come: the caller decides (410 there means relist).
   */
  async *watch<T = unknown>(r: ResourceDescriptor, options: WatchOptions = {}): AsyncGenerator<WatchEvent<T>> {
    const ref: ObjectRef = { kind: r.kind, namespace: options.namespace };
    const query: Query = {
      watch: true,
      allowWatchBookmarks: options.allowWatchBookmarks ?? true,
      resourceVersion: options.resourceVersion,
      timeoutSeconds: options.timeoutSeconds,
      labelSelector: options.labelSelector,
    };
    const resp = await this.#send('watch', ref, r.plural, {
      method: 'GET',
      path: resourcePath(r, options.namespace),
      query,
      signal: options.signal,
      streaming: true,
    });
    if (resp.status !== 200) throw errorFromResponse(resp.status, await safeText(resp), ref, 'watch', resp.headers);
    const body = resp.stream();
    if (!body) return;
    try {
      yield* parseWatchStream(body) as AsyncGenerator<WatchEvent<T>>;
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason;
      // The connection was up, so whatever broke it (reset, corrupt frame, body timeout) is worth a reconnect.
      const e = errorFromException(err, ref, 'watch');
      throw e.reason === 'unknown' ? new KubeApiError({ reason: 'transient', object: ref, verb: 'watch', message: e.message, cause: err }) : e;
    }
  }

  get<T>(r: ResourceDescriptor, namespace: string | undefined, name: string, options: { signal?: AbortSignal } = {}): Promise<T> {
    return this.#json<T>('get', { kind: r.kind, namespace, name }, r.plural, {
      method: 'GET',
      path: resourcePath(r, namespace, name),
      signal: options.signal,
    });
  }

  /** Creates `object` in its metadata.namespace. */
  create<T extends { metadata?: { namespace?: string; name?: string; generateName?: string } }>(
    r: ResourceDescriptor,
    object: T,
    options: WriteOptions = {},
  ): Promise<T> {
    const { namespace, name, generateName } = object.metadata ?? {};
    return this.#write<T>('create', r, namespace, name ?? generateName, object, options);
  }

  /** PUT: a full replacement, guarded by the object's metadata.resourceVersion when it carries one. */
  replace<T extends { metadata: { namespace?: string; name: string } }>(r: ResourceDescriptor, object: T, options: PatchOptions = {}): Promise<T> {
    const { namespace, name } = object.metadata;
    return this.#write<T>('update', r, namespace, name, object, options);
  }

  /**
   * Deletes with optional preconditions. Resolves to what the server returns: a Status when the object is gone, or
   * the object itself when finalizers (or foreground deletion) keep it for now.
   */
  delete(r: ResourceDescriptor, namespace: string | undefined, name: string, options: DeleteOptions = {}): Promise<unknown> {
    // JSON.stringify leaves out what is undefined.
    const body = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: options.preconditions, propagationPolicy: options.propagationPolicy };
    return this.#json<unknown>('delete', { kind: r.kind, namespace, name }, r.plural, {
      method: 'DELETE',
      path: resourcePath(r, namespace, name),
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: options.signal,
    });
  }

  /** RFC 6902 JSON patch; a failed `test` operation surfaces as a `conflict`. */
  jsonPatch<T>(r: ResourceDescriptor, namespace: string | undefined, name: string, ops: readonly JsonPatchOp[], options: PatchOptions = {}): Promise<T> {
    return this.#write<T>('patch', r, namespace, name, ops, options, JSON_PATCH);
  }

  /** RFC 7386 merge patch (null deletes a key; arrays are replaced whole). */
  mergePatch<T>(r: ResourceDescriptor, namespace: string | undefined, name: string, patch: object, options: PatchOptions = {}): Promise<T> {
    return this.#write<T>('patch', r, namespace, name, patch, options, 'application/merge-patch+json');
  }

  /** Creates a core/v1 Event in the event's namespace. */
  createEvent(event: EventInput, options: { signal?: AbortSignal } = {}): Promise<unknown> {
    const metadata = { ...event.metadata };
    if (!metadata.name && !metadata.generateName) metadata.generateName = `${event.involvedObject.name}.`;
    return this.create(resources.events, { apiVersion: 'v1', kind: 'Event', ...event, metadata }, { signal: options.signal });
  }

  /** A write of `body` as JSON (to a collection for a create), by the client's field manager. */
  #write<T>(
    verb: keyof typeof WRITE_METHODS,
    r: ResourceDescriptor,
    namespace: string | undefined,
    name: string | undefined,
    body: unknown,
    options: PatchOptions,
    contentType = 'application/json',
  ): Promise<T> {
    let path = resourcePath(r, namespace, verb === 'create' ? undefined : name);
    if (options.subresource) path += `/${encodeURIComponent(options.subresource)}`;
    const query: Query = { fieldManager: this.#fieldManager };
    const headers = { 'Content-Type': contentType };
    const req: HttpRequest = { method: WRITE_METHODS[verb], path, query, headers, body: JSON.stringify(body), signal: options.signal };
    return this.#json<T>(verb, { kind: r.kind, namespace, name }, r.plural, req, { jsonPatch: contentType === JSON_PATCH });
  }

  async #json<T>(verb: string, ref: ObjectRef, resource: string, req: HttpRequest, ctx: ClassifyContext = {}): Promise<T> {
    const resp = await this.#send(verb, ref, resource, req);
    let text: string;
    try {
      text = await resp.text();
    } catch (err) {
      if (req.signal?.aborted) throw req.signal.reason;
      throw errorFromException(err, ref, verb);
    }
    if (resp.status < 200 || resp.status > 299) throw errorFromResponse(resp.status, text, ref, verb, resp.headers, ctx);
    try {
      return (text === '' ? undefined : JSON.parse(text)) as T;
    } catch (err) {
      throw new KubeApiError({ reason: 'unknown', object: ref, verb, code: resp.status, message: `response is not JSON: ${text.slice(0, 200)}`, cause: err });
    }
  }

  async #send(verb: string, ref: ObjectRef, resource: string, req: HttpRequest): Promise<HttpResponse> {
    if (this.#bucket) await this.#bucket.take(req.signal);
    let resp: HttpResponse;
    try {
      resp = await this.transport.request(req);
    } catch (err) {
      this.#onRequest?.(verb, resource, 'error');
      // Our own cancellation is not a failure of the server: hand the reason back untouched.
      if (req.signal?.aborted) throw req.signal.reason;
      const e = errorFromException(err, ref, verb);
      this.#logger.debug({ err: e, verb, resource }, 'request failed before a response');
      throw e;
    }
    this.#onRequest?.(verb, resource, String(resp.status));
    return resp;
  }
}

async function safeText(resp: HttpResponse): Promise<string> {
  try {
    return await resp.text();
  } catch {
    return '';
  }
}
