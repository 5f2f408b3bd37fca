// What every transport does the same way, whatever the HTTP version: query strings, the headers and token of a
// connection, its TLS material, response headers and bodies as the client sees them, and the errors a transport
// raises itself.

import { readFileSync } from 'node:fs';
import type { ConnectionConfig } from './kubeconfig.ts';
import type { HttpRequest, HttpResponse } from './transport.ts';

export function queryString(query: HttpRequest['query']): string {
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

/** How often a token file is read again (client-go and @kubernetes/client-node: once a minute). */
const TOKEN_FILE_TTL_MS = 60_000;

/** What every request of one connection carries: fixed headers, and a bearer token that may come from a file. */
export interface ConnectionAuth {
  /** Header names in lower case: HTTP/2 requires it, HTTP/1.1 does not care. */
  fixed: Record<string, string>;
  /** The Authorization value of a token file, read again once a minute; undefined without a token file. */
  authorization(): string | undefined;
}

export function connectionAuth(user: ConnectionConfig['user']): ConnectionAuth {
  const fixed: Record<string, string> = { accept: 'application/json' };
  if (user.impersonateUser) fixed['impersonate-user'] = user.impersonateUser;
  if (user.username) fixed.authorization = `Basic ${Buffer.from(`${user.username}:${user.password ?? ''}`).toString('base64')}`;
  if (user.token) fixed.authorization = `Bearer ${user.token}`;
  let fileToken: { value: string; readAt: number } | undefined;
  return {
    fixed,
    authorization(): string | undefined {
      if (!user.tokenFile || user.token) return undefined;
      const now = Date.now();
      if (!fileToken || now - fileToken.readAt > TOKEN_FILE_TTL_MS) fileToken = { value: readFileSync(user.tokenFile, 'utf8').trim(), readAt: now };
      return `Bearer ${fileToken.value}`;
    },
  };
}

export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized?: boolean;
  servername?: string;
}

/** Server certificate, client certificate and key, read once: a certificate rotated on disk needs a restart. */
export function tlsMaterial(conn: ConnectionConfig): TlsMaterial {
  const { cluster, user } = conn;
  const tls: TlsMaterial = {};
  const ca = fileOrData(cluster.caFile, cluster.caData);
  const cert = fileOrData(user.certFile, user.certData);
  const key = fileOrData(user.keyFile, user.keyData);
  if (ca) tls.ca = ca;
  if (cert) tls.cert = cert;
  if (key) tls.key = key;
  if (cluster.skipTLSVerify) tls.rejectUnauthorized = false;
  if (cluster.tlsServerName) tls.servername = cluster.tlsServerName;
  return tls;
}

function fileOrData(file: string | undefined, data: string | undefined): Buffer | undefined {
  if (file) return readFileSync(file);
  if (data) return Buffer.from(data, 'base64');
  return undefined;
}

/** The headers of one request: the connection's, the request's own (names in lower case), the current token, the body's length. */
export function requestHeaders(auth: ConnectionAuth, req: HttpRequest): Record<string, string | number> {
  const headers: Record<string, string | number> = { ...auth.fixed };
  if (req.headers) for (const name in req.headers) headers[name.toLowerCase()] = req.headers[name] as string;
  const bearer = auth.authorization();
  if (bearer) headers.authorization = bearer;
  if (req.body !== undefined) headers['content-length'] = Buffer.byteLength(req.body);
  return headers;
}

/**
 * Cancels a request when its signal aborts or, unless it streams (a watch), once `timeoutMs` passed; `onTimeout`
 * runs after such a cancel. Returns what disarms both, for when the exchange is over.
 */
export function guardRequest(req: HttpRequest, timeoutMs: number, cancel: (why: unknown) => void, onTimeout?: () => void): () => void {
  const signal = req.signal;
  const onAbort = (): void => cancel(signal?.reason);
  const timer = req.streaming
    ? undefined
    : setTimeout(() => {
        cancel(timeoutError(timeoutMs));
        onTimeout?.();
      }, timeoutMs);
  signal?.addEventListener('abort', onAbort, { once: true });
  return () => {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  };
}

/** The answer to one request; its body is read once, as text or as a stream. */
export function responseOnce(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  body: { text(): Promise<string>; chunks(): AsyncIterable<Uint8Array> },
): HttpResponse {
  let flat: Record<string, string> | undefined;
  let consumed = false;
  return {
    status,
    // Read for an error answer (Retry-After, the Status); a successful one never needs them flattened.
    get headers() {
      flat ??= flatHeaders(headers);
      return flat;
    },
    text: () => {
      if (consumed) return Promise.reject(new Error('response body already consumed'));
      consumed = true;
      return body.text();
    },
    stream: () => {
      if (consumed) return null;
      consumed = true;
      return body.chunks();
    },
  };
}

/** Response headers as one string each (repeated ones joined), without HTTP/2's pseudo-headers such as `:status`. */
function flatHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const key in headers) {
    if (key.charCodeAt(0) === 58 /* ':' */) continue;
    const v = headers[key];
    if (v !== undefined) flat[key] = Array.isArray(v) ? v.join(', ') : v;
  }
  return flat;
}

/** A body received in chunks, as text (most answers arrive in one chunk: no copy then). */
export function utf8Body(chunks: readonly Buffer[]): string {
  return chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8');
}

export function timeoutError(ms: number): Error {
  return Object.assign(new Error(`no complete answer within ${ms} ms`), { code: 'ETIMEDOUT' });
}

export function connectionReset(): Error {
  return Object.assign(new Error('the connection closed before the response was complete'), { code: 'ECONNRESET' });
}
