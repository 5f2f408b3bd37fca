// The one place that turns a request into bytes on the wire. Everything above it (the typed client, informers)
// talks to this interface, so unit tests substitute a scripted transport and no test needs a socket.

import { readFileSync } from 'node:fs';
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { httpModule } from './http-module.ts';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { type ConnectionConfig, needsClientNode } from './kubeconfig.ts';

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

export function buildUrl(server: string, path: string, query?: HttpRequest['query']): string {
  return server.replace(/\/+$/, '') + path + queryString(query);
}

function queryString(query: HttpRequest['query']): string {
  let qs = '';
  if (query) {
    for (const key in query) {
      const value = query[key];
      if (value === undefined) continue;
      qs += `${qs ? '&' : '?'}${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`;
    }
  }
  return qs;
}

export interface TransportOptions {
  /** Deadline for non-streaming requests. Default 30 s. */
  timeoutMs?: number;
}

/** How often a token file is read again (client-go and @kubernetes/client-node: once a minute). */
const TOKEN_FILE_TTL_MS = 60_000;

/**
 * The transport for a kubeconfig connection. Server certificate, client certificate and key are read once (a
 * client certificate rotated on disk needs a restart); a token file is read again once a minute, so projected
 * service-account tokens rotate. Users with exec or auth-provider plugins, and clusters behind a proxy-url, go
 * through @kubernetes/client-node, which is loaded only then.
 */
export function connectionTransport(conn: ConnectionConfig, options: TransportOptions = {}): Transport {
  if (needsClientNode(conn)) return pluginTransport(conn, options);
  return nodeHttpTransport(conn, options);
}

function pluginTransport(conn: ConnectionConfig, options: TransportOptions): Transport {
  let inner: Promise<Transport> | undefined;
  return {
    server: conn.cluster.server,
    async request(req: HttpRequest): Promise<HttpResponse> {
      inner ??= import('./client-node-transport.ts').then((m) => m.clientNodeTransport(conn, options));
      return (await inner).request(req);
    },
  };
}

function fileOrData(file: string | undefined, data: string | undefined): Buffer | undefined {
  if (file) return readFileSync(file);
  if (data) return Buffer.from(data, 'base64');
  return undefined;
}

function timeoutError(ms: number): Error {
  return Object.assign(new Error(`no complete answer within ${ms} ms`), { code: 'ETIMEDOUT' });
}

function connectionReset(): Error {
  return Object.assign(new Error('the connection closed before the response was complete'), { code: 'ECONNRESET' });
}

/**
 * A keep-alive pool for one server with one set of TLS options. node:https names a pool by concatenating every
 * connection option, the CA and client certificate included, three times per request; with a 1-2 KB CA that was
 * about a seventh of all the memory a cold start allocated. Every request of a transport connects the same way, so
 * the first name is the name.
 */
class OneServerAgent extends HttpsAgent {
  #name: string | undefined;

  override getName(options?: Parameters<HttpsAgent['getName']>[0]): string {
    return (this.#name ??= super.getName(options));
  }
}

/** node:http(s) over one keep-alive pool: about a third of the CPU per request of WHATWG fetch (bench/transport.ts). */
export function nodeHttpTransport(conn: ConnectionConfig, options: TransportOptions = {}): Transport {
  const { cluster, user } = conn;
  const url = new URL(cluster.server);
  const secure = url.protocol === 'https:';
  if (!secure && url.protocol !== 'http:') throw new Error(`cluster ${cluster.name}: unsupported server URL ${cluster.server}`);
  const basePath = url.pathname.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 30_000;
  const agent = secure
    ? new OneServerAgent({
        keepAlive: true,
        ca: fileOrData(cluster.caFile, cluster.caData),
        cert: fileOrData(user.certFile, user.certData),
        key: fileOrData(user.keyFile, user.keyData),
        ...(cluster.skipTLSVerify ? { rejectUnauthorized: false } : {}),
        ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
      })
    : new (httpModule().Agent)({ keepAlive: true });
  const send = secure ? httpsRequest : httpModule().request;

  const fixed: Record<string, string> = { Accept: 'application/json' };
  if (user.impersonateUser) fixed['Impersonate-User'] = user.impersonateUser;
  if (user.username) fixed.Authorization = `Basic ${Buffer.from(`${user.username}:${user.password ?? ''}`).toString('base64')}`;
  if (user.token) fixed.Authorization = `Bearer ${user.token}`;
  let fileToken: { value: string; readAt: number } | undefined;
  const authorization = (): string | undefined => {
    if (!user.tokenFile || user.token) return undefined;
    const now = Date.now();
    if (!fileToken || now - fileToken.readAt > TOKEN_FILE_TTL_MS) fileToken = { value: readFileSync(user.tokenFile, 'utf8').trim(), readAt: now };
    return `Bearer ${fileToken.value}`;
  };

  return {
    server: cluster.server,
    request(req: HttpRequest): Promise<HttpResponse> {
      const signal = req.signal;
      if (signal?.aborted) return Promise.reject(signal.reason);
      const headers: OutgoingHttpHeaders = { ...fixed, ...req.headers };
      const bearer = authorization();
      if (bearer) headers.Authorization = bearer;
      if (req.body !== undefined) headers['Content-Length'] = Buffer.byteLength(req.body);
      return new Promise<HttpResponse>((resolve, reject) => {
        let settledBody = false;
        let timer: NodeJS.Timeout | undefined;
        const r = send({
          protocol: url.protocol,
          hostname: url.hostname.replace(/^\[|\]$/g, ''),
          port: url.port || (secure ? 443 : 80),
          path: basePath + req.path + queryString(req.query),
          method: req.method,
          headers,
          agent,
        });
        const onAbort = (): void => void r.destroy(signal?.reason as Error);
        const done = (): void => {
          if (timer) clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        };
        if (!req.streaming) timer = setTimeout(() => r.destroy(timeoutError(timeoutMs)), timeoutMs);
        signal?.addEventListener('abort', onAbort, { once: true });
        r.on('error', (err) => {
          done();
          reject(err);
        });
        r.on('response', (res: IncomingMessage) => {
          const flat: Record<string, string> = {};
          for (const key in res.headers) {
            const v = res.headers[key];
            if (v !== undefined) flat[key] = Array.isArray(v) ? v.join(', ') : v;
          }
          res.on('close', done);
          let consumed = false;
          resolve({
            status: res.statusCode ?? 0,
            headers: flat,
            text: () => {
              if (consumed) return Promise.reject(new Error('response body already consumed'));
              consumed = true;
              return new Promise<string>((ok, fail) => {
                const chunks: Buffer[] = [];
                res.on('data', (c: Buffer) => chunks.push(c));
                res.on('end', () => {
                  settledBody = true;
                  ok(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8'));
                });
                res.on('error', fail);
                res.on('close', () => {
                  if (!settledBody) fail(r.destroyed && signal?.aborted ? signal.reason : connectionReset());
                });
              });
            },
            stream: () => {
              if (consumed) return null;
              consumed = true;
              return res;
            },
          });
        });
        if (req.body !== undefined) r.end(req.body);
        else r.end();
      });
    },
  };
}
