// HTTP/2 to the API server, as client-go speaks it by default: every request and watch of the process is a stream
// on one TLS connection. A cold start's writes leave in groups (the token bucket releases them on a grid); over
// HTTP/1.1 each request of a group needs its own socket, TLS record and read, while here a group shares them, which
// costs the client less CPU per request (docs/architecture.md §7 compares the two).
//
// A server that does not offer h2 (a TLS-terminating proxy speaking only HTTP/1.1) is detected from the handshake
// and the transport falls back to node:https for good; DISABLE_HTTP2 (client-go's switch) skips HTTP/2 altogether.

import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { Logger } from 'pino';
import { abortable } from './clock.ts';
import type { HttpRequest, HttpResponse, Transport } from './transport.ts';
import {
  type ConnectionAuth,
  type TlsMaterial,
  connectionReset,
  guardRequest,
  queryString,
  requestHeaders,
  responseOnce,
  timeoutError,
  utf8Body,
} from './wire.ts';

export interface Http2TransportOptions {
  /** `https://host:port`, optionally with a path prefix. */
  server: string;
  tls: TlsMaterial;
  auth: ConnectionAuth;
  /** Deadline for non-streaming requests, and for opening a connection. */
  timeoutMs: number;
  /** Where every request goes once the server turned out not to speak HTTP/2. Called at most once. */
  fallback: () => Transport;
  /** How often each connection is pinged (client-go pings after 30 s without a frame read: ReadIdleTimeout). */
  pingEveryMs?: number;
  /** ...and closed if the ping is not answered within this (client-go: PingTimeout 15 s). */
  pingTimeoutMs?: number;
  /** How long an extra connection (opened at the server's stream limit) is kept without a stream. */
  spareIdleMs?: number;
  logger?: Pick<Logger, 'info' | 'debug'>;
}

/** Flow-control credit of one stream: a watch whose reader stalls buffers at most this much. */
const STREAM_WINDOW = 1 << 20;
/** Credit of the whole connection: what may be in flight on a link with latency (a large list's pages). */
const CONNECTION_WINDOW = 16 << 20;
/** Stream ids are odd numbers below 2^31: a connection this far along takes no new request (one per 2^30). */
const LAST_STREAM_ID = 2 ** 31 - 1025;

/** One TLS connection and the number of streams open on it (the process may exit only while it has none). */
interface Connection {
  session: ClientHttp2Session;
  open: number;
  /** No new streams: the server said GOAWAY, the connection failed, or it is spare and idle. */
  retired: boolean;
  /** Check the connection now (a request on it timed out). */
  ping: () => void;
  /** Closes a spare connection that stays without a stream. */
  idle?: NodeJS.Timeout;
}

type Http2Module = typeof import('node:http2');

/** Loaded on first use, so that a process that never connects (tests, --help) does not load it. */
function http2Module(): Http2Module {
  return process.getBuiltinModule('node:http2') as Http2Module;
}

export function http2Transport(options: Http2TransportOptions): Transport {
  return new Http2Transport(options);
}

/** Stream errors that mean the connection, not the request, was unusable: nothing was sent. */
const DEAD_CONNECTION_CODES = new Set(['ERR_HTTP2_INVALID_SESSION', 'ERR_HTTP2_GOAWAY_SESSION', 'ERR_HTTP2_OUT_OF_STREAMS']);

class Http2Transport implements Transport {
  readonly server: string;
  readonly #o: Http2TransportOptions;
  readonly #origin: string;
  readonly #authority: string;
  readonly #basePath: string;
  /**
   * Usually one connection. Another is opened only when every open one is at the server's limit of concurrent
   * streams (as client-go does), and such a spare is closed after `spareIdleMs` without a stream.
   */
  readonly #pool: Connection[] = [];
  #connecting: Promise<Connection | Transport> | undefined;
  #fallback: Transport | undefined;

  constructor(options: Http2TransportOptions) {
    this.#o = options;
    this.server = options.server;
    const url = new URL(options.server);
    this.#origin = url.origin;
    // The URL's host, as HTTP/1.1 and client-go send it; Node would derive it from a tls-server-name, and drop the
    // brackets of an IPv6 address.
    this.#authority = url.host;
    this.#basePath = url.pathname.replace(/\/+$/, '');
  }

  request(req: HttpRequest): Promise<HttpResponse> {
    return this.#request(req, true);
  }

  #request(req: HttpRequest, mayRetry: boolean): Promise<HttpResponse> {
    if (this.#fallback) return this.#fallback.request(req);
    const signal = req.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const conn = this.#pick();
    if (conn) return this.#send(conn, req, mayRetry);
    const connected = this.#connect();
    const next = (c: Connection | Transport): Promise<HttpResponse> => {
      if ('request' in c) return c.request(req);
      // A server that allows no stream at all would otherwise have us open connections in a loop.
      if (c.session.remoteSettings.maxConcurrentStreams === 0) {
        return Promise.reject(
          Object.assign(new Error('the API server allows no HTTP/2 stream (MAX_CONCURRENT_STREAMS 0)'), { code: 'ERR_HTTP2_STREAM_ERROR' }),
        );
      }
      return this.#request(req, mayRetry);
    };
    // An abort must not wait for a connection that is slow to open.
    return abortable(() => connected, signal).then(next);
  }

  /** A connection that can take one more stream now. */
  #pick(): Connection | undefined {
    for (const c of this.#pool) {
      const s = c.session;
      if (c.retired || s.closed || s.destroyed) continue;
      if (c.open < (s.remoteSettings.maxConcurrentStreams ?? Infinity)) return c;
    }
    return undefined;
  }

  #retire(conn: Connection, close: boolean): void {
    conn.retired = true;
    clearTimeout(conn.idle);
    const i = this.#pool.indexOf(conn);
    if (i >= 0) this.#pool.splice(i, 1);
    // A graceful close: streams already open finish, then the connection goes.
    if (close && !conn.session.closed && !conn.session.destroyed) conn.session.close();
  }

  /** The connection being opened, or a new one; resolves to the fallback when the server has no HTTP/2. */
  #connect(): Promise<Connection | Transport> {
    if (this.#connecting) return this.#connecting;
    const attempt = new Promise<Connection | Transport>((resolve, reject) => {
      const session = http2Module().connect(this.#origin, {
        ...this.#o.tls,
        settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
      });
      const conn: Connection = { session, open: 0, retired: false, ping: () => undefined };
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
        session.setLocalWindowSize(CONNECTION_WINDOW);
        // The server's limit of concurrent streams comes with its first SETTINGS, after 'connect' (until then nghttp2
        // assumes 100); waiters that pick connections by it must not see the placeholder.
        session.once('remoteSettings', () => {
          settle();
          this.#o.logger?.debug({ server: this.server, connections: this.#pool.length + 1 }, 'connected to the API server over HTTP/2');
          session.unref();
          this.#pool.push(conn);
          resolve(conn);
          // The waiters may all have found room elsewhere meanwhile, or been aborted.
          setImmediate(() => this.#idleSpare(conn));
        });
      });
      // After GOAWAY (the server shuts down, or its --goaway-chance) new requests go to a new connection; the streams
      // already open finish on this one.
      session.on('goaway', (code: number) => {
        this.#o.logger?.debug({ server: this.server, code }, 'the API server closes this HTTP/2 connection (GOAWAY)');
        this.#retire(conn, false);
      });
      session.on('close', () => {
        this.#retire(conn, false);
        // Destroyed before it connected (by the deadline above, or closed without an error): nothing else answers.
        if (!settled) {
          settle();
          reject(connectionReset());
        }
      });
      conn.ping = this.#watchHealth(session);
    });
    this.#connecting = attempt;
    const clear = (): void => {
      if (this.#connecting === attempt) this.#connecting = undefined;
    };
    attempt.then(clear, clear);
    return attempt;
  }

  /** A spare connection (not the first) with no stream is closed if it stays so for `spareIdleMs`. */
  #idleSpare(conn: Connection): void {
    if (conn.open > 0 || conn.retired || conn === this.#pool[0]) return;
    clearTimeout(conn.idle);
    conn.idle = setTimeout(() => {
      if (conn.open === 0 && conn !== this.#pool[0]) this.#retire(conn, true);
    }, this.#o.spareIdleMs ?? 60_000);
    conn.idle.unref();
  }

  /**
   * Each connection is pinged every `pingEveryMs` and closed if a ping is not answered within `pingTimeoutMs`,
   * failing its streams so that watches reopen elsewhere. client-go pings only after a quiet spell of reads; Node
   * measures quiet spells over reads and writes together, so a controller that keeps renewing its lease over a dead
   * path would never see one. A ping every 30 s is one small frame each way. A connection closing after GOAWAY is
   * not pinged (Node refuses); its watches end with the server's own watch timeout, or the informer's.
   * Returns a function that checks the connection at once.
   */
  #watchHealth(session: ClientHttp2Session): () => void {
    const every = this.#o.pingEveryMs ?? 30_000;
    const patience = this.#o.pingTimeoutMs ?? 15_000;
    let waiting = false;
    const check = (): void => {
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
    };
    const tick = setInterval(check, every);
    tick.unref();
    session.once('close', () => clearInterval(tick));
    return check;
  }

  /** HTTP/2's pseudo-headers, then the connection's fixed ones, the request's own, and the current bearer token. */
  #headers(req: HttpRequest): OutgoingHttpHeaders {
    return {
      ':method': req.method,
      ':authority': this.#authority,
      ':path': this.#basePath + req.path + queryString(req.query),
      ...requestHeaders(this.#o.auth, req),
    };
  }

  #send(conn: Connection, req: HttpRequest, mayRetry: boolean): Promise<HttpResponse> {
    const { session } = conn;
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(this.#headers(req), { endStream: req.body === undefined });
    } catch (err) {
      return Promise.reject(err); // e.g. a header HTTP/2 cannot carry: the request's fault, not the connection's
    }
    clearTimeout(conn.idle);
    if (conn.open++ === 0) session.ref();
    if ((stream.id ?? 0) > LAST_STREAM_ID) this.#retire(conn, true);

    return new Promise<HttpResponse>((resolve, reject) => {
      const exchange = new Exchange(stream);
      // A connection that died silently fails every request until it is found out: a timeout checks it.
      const disarm = guardRequest(
        req,
        this.#o.timeoutMs,
        (why) => exchange.cancel(why),
        () => conn.ping(),
      );
      stream.once('close', () => {
        exchange.closed = true;
        disarm();
        if (--conn.open === 0 && !session.destroyed) {
          session.unref();
          this.#idleSpare(conn);
        }
        if (exchange.responded) return;
        if (this.#unprocessed(conn, exchange) && mayRetry) this.#request(req, false).then(resolve, reject);
        else reject(exchange.failureOrReset());
      });
      stream.on('error', (err) => {
        exchange.failure ??= err;
      });
      stream.once('response', (h: IncomingHttpHeaders) => {
        exchange.responded = true;
        resolve(responseOnce(Number(h[':status'] ?? 0), h, exchange));
      });
      if (req.body !== undefined) stream.end(req.body);
    });
  }

  /**
   * Whether a stream closed without an answer was not processed by the server, so is safe to send again once, even
   * a POST, as Go's client does: refused (by the server, or after its GOAWAY; RFC 9113 §8.7), or never sent because
   * the connection was already closing (which is then retired). Our own cancel closes with CANCEL and is neither.
   */
  #unprocessed(conn: Connection, { stream, failure }: Exchange): boolean {
    const refused =
      stream.rstCode === http2Module().constants.NGHTTP2_REFUSED_STREAM && (failure === undefined || errorCode(failure) === 'ERR_HTTP2_STREAM_ERROR');
    const unsent = DEAD_CONNECTION_CODES.has(errorCode(failure));
    if (unsent) this.#retire(conn, true);
    return refused || unsent;
  }
}

/** One request's stream: whether it was answered, and how it ended, for the body readers that come after. */
class Exchange {
  readonly stream: ClientHttp2Stream;
  responded = false;
  closed = false;
  failure: unknown;

  constructor(stream: ClientHttp2Stream) {
    this.stream = stream;
  }

  // CANCEL, not the INTERNAL_ERROR a destroy(err) would send: the server should see a client that left.
  cancel(why: unknown): void {
    this.failure ??= why;
    this.stream.close(http2Module().constants.NGHTTP2_CANCEL);
    // ...and a reader of the body learns why, as from an aborted HTTP/1.1 response.
    this.stream.destroy(why instanceof Error ? why : new Error(String(why)));
  }

  /**
   * The body ended with END_STREAM; a reset or a lost connection also ends it, with a code other than 0. (A reset
   * with NO_ERROR before END_STREAM, which no conforming server sends mid-body, cannot be told apart; a declared
   * content-length that was not met is caught by nghttp2 itself.)
   */
  complete(): boolean {
    const code = this.stream.rstCode;
    return code === undefined || code === http2Module().constants.NGHTTP2_NO_ERROR;
  }

  failureOrReset(): unknown {
    return this.failure ?? connectionReset();
  }

  text(): Promise<string> {
    const { stream } = this;
    return new Promise<string>((ok, fail) => {
      const chunks: Buffer[] = [];
      let ended = false;
      const finish = (): void => {
        ended = true;
        ok(utf8Body(chunks));
      };
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.once('end', () => {
        if (this.complete()) finish(); // else cut off: 'close' says why
      });
      const onClose = (): void => {
        if (ended) return;
        // Closed before text() was called: an empty body had nothing to buffer, so it ended and closed at once.
        if (this.failure === undefined && stream.readableEnded && this.complete()) finish();
        else fail(this.failureOrReset());
      };
      if (this.closed) onClose();
      else stream.once('close', onClose);
    });
  }

  /** The body's chunks; a body cut off by a reset or a lost connection throws instead of ending as if complete. */
  async *chunks(): AsyncGenerator<Uint8Array> {
    for await (const chunk of this.stream) yield chunk as Uint8Array;
    if (!this.complete()) throw this.failureOrReset();
  }
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : '';
}
