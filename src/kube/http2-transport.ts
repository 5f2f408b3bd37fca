// HTTP/2 to the API server, as client-go speaks it by default: every request and watch of the process is a stream
// on one TLS connection. A cold start's writes leave in groups (the token bucket releases on a 50 ms grid); over
// HTTP/1.1 each request of a group needs its own socket, TLS record and read, while here a group shares them:
// 0.295 against 0.364 ms of client CPU per paced POST (docs/benchmarks/transport-paced-grid).
//
// A server that does not offer h2 (a TLS-terminating proxy speaking only HTTP/1.1) is detected from the handshake
// and the transport falls back to node:https for good; DISABLE_HTTP2 (client-go's switch) skips HTTP/2 altogether.

import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { Logger } from 'pino';
import type { HttpRequest, HttpResponse, Transport } from './transport.ts';
import { type ConnectionAuth, type TlsMaterial, connectionReset, queryString, timeoutError } from './wire.ts';

export interface Http2TransportOptions {
  /** `https://host:port`, optionally with a path prefix. */
  server: string;
  tls: TlsMaterial;
  auth: ConnectionAuth;
  /** Deadline for non-streaming requests. */
  timeoutMs: number;
  /** Where every request goes once the server turned out not to speak HTTP/2. Called at most once. */
  fallback: () => Transport;
  /** How often the connection is pinged (client-go pings after 30 s without a frame read: ReadIdleTimeout). */
  pingEveryMs?: number;
  /** ...and closed if the ping is not answered within this (client-go: PingTimeout 15 s). */
  pingTimeoutMs?: number;
  logger?: Pick<Logger, 'info' | 'debug'>;
}

/** Flow-control credit of one stream: a watch whose reader stalls buffers at most this much. */
const STREAM_WINDOW = 1 << 20;
/** Credit of the whole connection, above the sum of a few stalled streams so that one stall never blocks the rest. */
const CONNECTION_WINDOW = 32 << 20;

/** One TLS connection and the number of streams open on it (the process may exit only while it has none). */
interface Connection {
  session: ClientHttp2Session;
  open: number;
}

type Http2Module = typeof import('node:http2');

/** Loaded on first use, so that a process that never connects (tests, --help) does not load it. */
function http2Module(): Http2Module {
  return process.getBuiltinModule('node:http2') as Http2Module;
}

export function http2Transport(options: Http2TransportOptions): Transport {
  return new Http2Transport(options);
}

class Http2Transport implements Transport {
  readonly server: string;
  readonly #o: Http2TransportOptions;
  readonly #origin: string;
  readonly #basePath: string;
  #live: Connection | undefined;
  #connecting: Promise<Connection | Transport> | undefined;
  #fallback: Transport | undefined;

  constructor(options: Http2TransportOptions) {
    this.#o = options;
    this.server = options.server;
    const url = new URL(options.server);
    this.#origin = url.origin;
    this.#basePath = url.pathname.replace(/\/+$/, '');
  }

  request(req: HttpRequest): Promise<HttpResponse> {
    if (this.#fallback) return this.#fallback.request(req);
    if (req.signal?.aborted) return Promise.reject(req.signal.reason);
    const conn = this.#live;
    if (conn && usable(conn.session)) return this.#send(conn, req, true);
    return this.#connect().then((c) => ('request' in c ? c.request(req) : this.#send(c, req, true)));
  }

  /** The connection being opened, or a new one; resolves to the fallback when the server has no HTTP/2. */
  #connect(): Promise<Connection | Transport> {
    if (this.#connecting) return this.#connecting;
    const attempt = new Promise<Connection | Transport>((resolve, reject) => {
      const session = http2Module().connect(this.#origin, {
        ...this.#o.tls,
        settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
      });
      const conn: Connection = { session, open: 0 };
      let settled = false;
      // A request's own deadline starts once it is sent; this one covers the connection it waits for.
      const connectDeadline = setTimeout(() => session.destroy(timeoutError(this.#o.timeoutMs)), this.#o.timeoutMs);
      connectDeadline.unref();
      const settle = (): void => {
        settled = true;
        clearTimeout(connectDeadline);
      };
      const fallBack = (why: string): void => {
        settle();
        session.destroy();
        this.#o.logger?.info({ server: this.server, why }, 'the API server does not offer HTTP/2; using HTTP/1.1');
        this.#fallback ??= this.#o.fallback();
        resolve(this.#fallback);
      };
      session.on('error', (err: Error & { code?: string }) => {
        if (settled) return; // the streams carry it to their callers; 'close' retires the connection
        if (err.code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL') return fallBack('the TLS handshake refused h2');
        settle();
        reject(err);
      });
      session.once('connect', () => {
        // A server without h2 in its ALPN list may still complete the handshake, then never answer a frame.
        if (session.alpnProtocol !== 'h2') return fallBack(`the TLS handshake agreed on ${session.alpnProtocol || 'no protocol'}`);
        settle();
        this.#o.logger?.debug({ server: this.server }, 'connected to the API server over HTTP/2');
        session.setLocalWindowSize(CONNECTION_WINDOW);
        session.unref();
        this.#live = conn;
        resolve(conn);
      });
      // Once the server says goodbye (shutdown, or its --goaway-chance) new requests go to a new connection; the
      // streams already open finish on this one.
      const retire = (): void => {
        if (this.#live === conn) this.#live = undefined;
      };
      session.on('goaway', (code: number) => {
        this.#o.logger?.debug({ server: this.server, code }, 'the API server closes this HTTP/2 connection (GOAWAY)');
        retire();
      });
      session.on('close', () => {
        retire();
        // Destroyed before it connected (by the deadline above, or closed without an error): nothing else answers.
        if (!settled) {
          settle();
          reject(connectionReset());
        }
      });
      this.#watchHealth(session);
    });
    this.#connecting = attempt;
    const clear = (): void => {
      if (this.#connecting === attempt) this.#connecting = undefined;
    };
    attempt.then(clear, clear);
    return attempt;
  }

  /**
   * The connection is pinged every `pingEveryMs` and closed if a ping is not answered within `pingTimeoutMs`, failing
   * its streams so that watches reopen elsewhere. client-go pings only after a quiet spell of reads; Node measures
   * quiet spells over reads and writes together, so a controller that keeps renewing its lease over a dead path would
   * never see one. A ping every 30 s is one small frame each way.
   */
  #watchHealth(session: ClientHttp2Session): void {
    const every = this.#o.pingEveryMs ?? 30_000;
    const patience = this.#o.pingTimeoutMs ?? 15_000;
    let waiting = false;
    const tick = setInterval(() => {
      if (waiting || session.connecting || session.destroyed || session.closed) return;
      const deadline = setTimeout(() => {
        const err = Object.assign(new Error(`no answer to an HTTP/2 ping within ${patience} ms`), { code: 'ETIMEDOUT' });
        session.destroy(err);
      }, patience);
      deadline.unref();
      waiting = session.ping((err) => {
        waiting = false;
        clearTimeout(deadline);
        if (err && !session.destroyed) session.destroy(err);
      });
      if (!waiting) clearTimeout(deadline);
    }, every);
    tick.unref();
    session.once('close', () => clearInterval(tick));
  }

  #send(conn: Connection, req: HttpRequest, mayRetry: boolean): Promise<HttpResponse> {
    const { session } = conn;
    const signal = req.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const headers: OutgoingHttpHeaders = {
      ':method': req.method,
      ':path': this.#basePath + req.path + queryString(req.query),
      ...this.#o.auth.fixed,
    };
    if (req.headers) for (const name in req.headers) headers[name.toLowerCase()] = req.headers[name];
    const bearer = this.#o.auth.authorization();
    if (bearer) headers.authorization = bearer;
    if (req.body !== undefined) headers['content-length'] = Buffer.byteLength(req.body);

    const { constants } = http2Module();
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(headers, { endStream: req.body === undefined });
    } catch (err) {
      // The connection went away between the check and the request (GOAWAY, closed, out of stream ids): nothing
      // was sent, so one more try on a fresh connection is safe even for a POST.
      if (this.#live === conn) this.#live = undefined;
      if (!mayRetry) return Promise.reject(err);
      return this.#connect().then((c) => ('request' in c ? c.request(req) : this.#send(c, req, false)));
    }
    if (conn.open++ === 0) session.ref();
    const timeoutMs = this.#o.timeoutMs;

    return new Promise<HttpResponse>((resolve, reject) => {
      let responded = false;
      let failure: unknown;
      let timer: NodeJS.Timeout | undefined;
      // CANCEL, not the INTERNAL_ERROR a destroy(err) would send: the server should see a client that left.
      const cancel = (why: unknown): void => {
        failure ??= why;
        stream.close(constants.NGHTTP2_CANCEL);
        // ...and a reader of the body learns why, as from an aborted HTTP/1.1 response.
        stream.destroy(why instanceof Error ? why : new Error(String(why)));
      };
      const onAbort = (): void => cancel(signal?.reason);
      stream.once('close', () => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (--conn.open === 0 && !session.destroyed) session.unref();
        if (!responded) reject(failure ?? connectionReset());
      });
      stream.on('error', (err) => {
        failure ??= err;
      });
      if (!req.streaming) timer = setTimeout(() => cancel(timeoutError(timeoutMs)), timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });

      stream.once('response', (h: IncomingHttpHeaders) => {
        responded = true;
        const flat: Record<string, string> = {};
        for (const key in h) {
          if (key.charCodeAt(0) === 58 /* ':' */) continue;
          const v = h[key];
          if (v !== undefined) flat[key] = Array.isArray(v) ? v.join(', ') : v;
        }
        let consumed = false;
        resolve({
          status: Number(h[':status'] ?? 0),
          headers: flat,
          text: () => {
            if (consumed) return Promise.reject(new Error('response body already consumed'));
            consumed = true;
            return new Promise<string>((ok, fail) => {
              const chunks: Buffer[] = [];
              let ended = false;
              stream.on('data', (c: Buffer) => chunks.push(c));
              stream.once('end', () => {
                ended = true;
                ok(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8'));
              });
              stream.once('close', () => {
                if (!ended) fail(failure ?? connectionReset());
              });
            });
          },
          stream: () => {
            if (consumed) return null;
            consumed = true;
            return stream;
          },
        });
      });
      if (req.body !== undefined) stream.end(req.body);
    });
  }
}

function usable(session: ClientHttp2Session): boolean {
  return !session.closed && !session.destroyed;
}
