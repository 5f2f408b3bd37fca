// The transports that speak to an API server named by a kubeconfig connection: HTTP/2 (http2-transport.ts) with
// HTTP/1.1 as its fallback, or @kubernetes/client-node for what only it supports. They implement the interface of
// transport.ts, which imports none of them.

import type { IncomingMessage } from 'node:http';
import { httpModule } from './http-module.ts';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { type ConnectionConfig, needsClientNode } from './kubeconfig.ts';
import { http2Transport } from './http2-transport.ts';
import type { HttpRequest, HttpResponse, Transport, TransportOptions } from './transport.ts';
import { connectionAuth, connectionReset, guardRequest, queryString, requestHeaders, responseOnce, tlsMaterial, utf8Body } from './wire.ts';

/**
 * The transport for a kubeconfig connection. Server certificate, client certificate and key are read once (a
 * client certificate rotated on disk needs a restart); a token file is read again once a minute, so projected
 * service-account tokens rotate. An https server gets HTTP/2 (src/kube/http2-transport.ts), falling back to
 * HTTP/1.1 if it does not offer it. Users with exec or auth-provider plugins, and clusters behind a proxy-url, go
 * through @kubernetes/client-node, which is loaded only then.
 */
export function connectionTransport(conn: ConnectionConfig, options: TransportOptions = {}): Transport {
  if (needsClientNode(conn)) return pluginTransport(conn, options);
  // HTTP/2 when the server offers it, unless DISABLE_HTTP2 is set, as for client-go.
  if (process.env.DISABLE_HTTP2 || !conn.cluster.server.startsWith('https:')) return nodeHttpTransport(conn, options);
  return http2Transport({
    server: conn.cluster.server,
    tls: tlsMaterial(conn),
    auth: connectionAuth(conn.user),
    timeoutMs: options.timeoutMs ?? 30_000,
    fallback: () => nodeHttpTransport(conn, options),
    logger: options.logger,
  });
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

/**
 * A keep-alive pool for one server with one set of TLS options. node:https names a pool by concatenating every
 * connection option, the CA and client certificate included, three times per request: with a CA of a kilobyte or two,
 * a large share of all the memory a cold start allocates. Every request of a transport connects the same way, so the
 * first name is the name.
 */
class OneServerAgent extends HttpsAgent {
  #name: string | undefined;

  override getName(options?: Parameters<HttpsAgent['getName']>[0]): string {
    return (this.#name ??= super.getName(options));
  }
}

/** node:http(s) over one keep-alive pool: far less CPU per request than WHATWG fetch (measured by the since removed bench/transport.ts, commit 75b041a). */
export function nodeHttpTransport(conn: ConnectionConfig, options: TransportOptions = {}): Transport {
  const { cluster } = conn;
  const url = new URL(cluster.server);
  const secure = url.protocol === 'https:';
  if (!secure && url.protocol !== 'http:') throw new Error(`cluster ${cluster.name}: unsupported server URL ${cluster.server}`);
  const basePath = url.pathname.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 30_000;
  const agent = secure ? new OneServerAgent({ keepAlive: true, ...tlsMaterial(conn) }) : new (httpModule().Agent)({ keepAlive: true });
  const send = secure ? httpsRequest : httpModule().request;
  const auth = connectionAuth(conn.user);

  return {
    server: cluster.server,
    request(req: HttpRequest): Promise<HttpResponse> {
      const signal = req.signal;
      if (signal?.aborted) return Promise.reject(signal.reason);
      const headers = requestHeaders(auth, req);
      return new Promise<HttpResponse>((resolve, reject) => {
        let settledBody = false;
        const r = send({
          protocol: url.protocol,
          hostname: url.hostname.replace(/^\[|\]$/g, ''),
          port: url.port || (secure ? 443 : 80),
          path: basePath + req.path + queryString(req.query),
          method: req.method,
          headers,
          agent,
        });
        const done = guardRequest(req, timeoutMs, (why) => r.destroy(why as Error));
        r.on('error', (err) => {
          done();
          reject(err);
        });
        r.on('response', (res: IncomingMessage) => {
          res.on('close', done);
          const text = (): Promise<string> =>
            new Promise<string>((ok, fail) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('end', () => {
                settledBody = true;
                ok(utf8Body(chunks));
              });
              res.on('error', fail);
              res.on('close', () => {
                if (!settledBody) fail(r.destroyed && signal?.aborted ? signal.reason : connectionReset());
              });
            });
          resolve(responseOnce(res.statusCode ?? 0, res.headers, { text, chunks: () => res }));
        });
        r.end(req.body);
      });
    },
  };
}
