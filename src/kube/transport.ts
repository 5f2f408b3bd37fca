// The interface of the one place that turns a request into bytes on the wire. Everything above it (the typed client,
// informers) talks to this interface, so their unit tests substitute a scripted transport; only the transports' own
// tests (src/kube/http2-transport.test.ts) open sockets, to a local server. The implementations
// (connection-transport.ts, http2-transport.ts, client-node-transport.ts) import this file; it imports none of them.

import type { Logger } from 'pino';

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
  /** The body as it arrives; abandoning the iteration closes it. */
  stream(): AsyncIterable<Uint8Array> | null;
}

export interface Transport {
  /** The API server URL, for logs and errors. */
  readonly server: string;
  request(req: HttpRequest): Promise<HttpResponse>;
}

export interface TransportOptions {
  /** Deadline for non-streaming requests. Default 30 s. */
  timeoutMs?: number;
  /** Told which protocol the connection speaks (a fallback to HTTP/1.1 at info). */
  logger?: Pick<Logger, 'info' | 'debug'>;
}
