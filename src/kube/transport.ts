// The one place that turns a request into bytes on the wire. Everything above it (the typed client, informers)
// talks to this interface, so unit tests substitute a scripted transport and no test needs a socket.

import { type KubeConfig, IsomorphicFetchHttpLibrary, RequestContext } from '@kubernetes/client-node';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface HttpRequest {
  method: HttpMethod;
  /** Path below the server URL, e.g. `/apis/kubevirt.io/v1/namespaces/ns/virtualmachines`. */
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** A long-lived response (watch): no client-side request timeout applies. */
  streaming?: boolean;
}

export interface HttpResponse {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  text(): Promise<string>;
  stream(): ReadableStream<Uint8Array> | null;
}

export interface Transport {
  /** The API server URL, for logs and errors. */
  readonly server: string;
  request(req: HttpRequest): Promise<HttpResponse>;
}

export function buildUrl(server: string, path: string, query?: HttpRequest['query']): string {
  const url = new URL(server.replace(/\/+$/, '') + path);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  return url.toString();
}

export interface KubeConfigTransportOptions {
  /** Deadline for non-streaming requests. Default 30 s. */
  timeoutMs?: number;
}

/**
 * Sends requests with @kubernetes/client-node's own fetch (undici) and its authentication: every request asks the
 * KubeConfig for headers (so rotated tokens and exec credentials are picked up), but the TLS dispatcher made for
 * the first request is reused. The library builds a new connection pool per call, which would mean a TLS handshake
 * per request; the trade-off is that a client certificate rotated on disk needs a restart.
 */
export function kubeConfigTransport(kubeConfig: KubeConfig, options: KubeConfigTransportOptions = {}): Transport {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const server = cluster.server;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const http = new IsomorphicFetchHttpLibrary();
  let dispatcher: ReturnType<RequestContext['getDispatcher']>;
  let dispatcherChosen = false;

  return {
    server,
    async request(req: HttpRequest): Promise<HttpResponse> {
      const ctx = new RequestContext(buildUrl(server, req.path, req.query), req.method);
      await kubeConfig.applySecurityAuthentication(ctx);
      if (!dispatcherChosen) {
        dispatcher = ctx.getDispatcher();
        dispatcherChosen = true;
      } else if (dispatcher !== undefined) {
        ctx.setDispatcher(dispatcher);
      }
      ctx.setHeaderParam('Accept', 'application/json');
      for (const [key, value] of Object.entries(req.headers ?? {})) ctx.setHeaderParam(key, value);
      if (req.body !== undefined) ctx.setBody(req.body);
      const signals: AbortSignal[] = [];
      if (req.signal) signals.push(req.signal);
      if (!req.streaming) signals.push(AbortSignal.timeout(timeoutMs));
      if (signals.length > 0) ctx.setSignal(signals.length === 1 ? (signals[0] as AbortSignal) : AbortSignal.any(signals));
      const resp = await http.send(ctx).toPromise();
      return {
        status: resp.httpStatusCode,
        headers: resp.headers,
        text: () => resp.body.text(),
        stream: () => resp.body.stream(),
      };
    },
  };
}
