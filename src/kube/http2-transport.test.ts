import assert from 'node:assert/strict';
import { type Server as HttpServer, createServer as createHttpServer } from 'node:http';
import { type Http2SecureServer, type Http2Session, type ServerHttp2Stream, type Settings, constants, createSecureServer } from 'node:http2';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, type Server as NetServer, type Socket, connect as netConnect, createServer as createNetServer } from 'node:net';
import { before, describe, it } from 'node:test';
import { createServer as createTlsServer } from 'node:tls';
import { generateCa, generateServing } from '../webhook/certs.ts';
import { errorFromException } from './errors.ts';
import { http2Transport } from './http2-transport.ts';
import type { Transport } from './transport.ts';
import { connectionAuth } from './wire.ts';

let ca: string;
let key: string;
let cert: string;

before(async () => {
  const now = Date.now();
  const authority = await generateCa(now, 3_600_000);
  const serving = await generateServing(authority, now, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], servingValidityMs: 3_600_000 });
  ca = authority.certPem;
  key = serving.keyPem;
  cert = serving.certPem;
});

type Handler = (stream: ServerHttp2Stream, headers: Record<string, string | string[] | undefined>) => void;

/** An HTTP/2 peer that records every session and request it sees. */
class H2Peer {
  readonly sessions: Http2Session[] = [];
  readonly requests: Record<string, string | string[] | undefined>[] = [];
  readonly server: Http2SecureServer;
  handler: Handler = (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/json' });
    stream.end('{"ok":true}');
  };

  constructor(settings: Settings = {}) {
    this.server = createSecureServer({ key, cert, settings });
    this.server.on('session', (s) => this.sessions.push(s));
    this.server.on('stream', (stream, headers) => {
      stream.on('error', () => undefined); // a client's cancel arrives as an error here
      this.requests.push(headers);
      this.handler(stream, headers);
    });
  }

  listen(): Promise<number> {
    return listen(this.server);
  }

  async close(): Promise<void> {
    for (const s of this.sessions) s.destroy();
    await close(this.server);
  }
}

/** Runs `test` against a new peer (answering with `handler`, if given), and closes it afterwards whatever happens. */
async function withPeer(handler: Handler | undefined, test: (port: number, peer: H2Peer) => Promise<void>, settings?: Settings): Promise<void> {
  const peer = new H2Peer(settings);
  if (handler) peer.handler = handler;
  const port = await peer.listen();
  try {
    await test(port, peer);
  } finally {
    await peer.close();
  }
}

/** Handlers: one that never answers, and one that answers with headers only, as an open watch that stays quiet. */
const NEVER: Handler = () => undefined;
const QUIET: Handler = (stream) => stream.respond({ ':status': 200 });

/** A handler that answers every request with `status` and `body`. */
const answer =
  (status: number, body: string): Handler =>
  (stream) => {
    stream.respond({ ':status': status });
    stream.end(body);
  };

async function listen(server: NetServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

const close = (server: NetServer): Promise<void> => new Promise<void>((resolve) => server.close(() => resolve()));

/** Runs `test` against `server` on a free port, then closes it and every connection it accepted, whatever happens. */
async function serving(server: NetServer, test: (port: number) => Promise<void>): Promise<void> {
  const sockets: Socket[] = [];
  server.on('connection', (socket: Socket) => sockets.push(socket));
  const port = await listen(server);
  try {
    await test(port);
  } finally {
    for (const s of sockets) s.destroy();
    await close(server);
  }
}

/** A server that accepts connections and never answers. */
const silent = (test: (port: number) => Promise<void>): Promise<void> => serving(createNetServer(), test);

function transport(port: number, extra: Partial<Parameters<typeof http2Transport>[0]> = {}): Transport {
  return http2Transport({
    server: `https://127.0.0.1:${port}/prefix/`,
    tls: { ca: Buffer.from(ca) },
    auth: connectionAuth({ name: 'u', token: 'secret-token', impersonateUser: 'alice' }),
    timeoutMs: 5_000,
    fallback: () => {
      throw new Error('no fallback expected');
    },
    ...extra,
  });
}

/** What `p` rejects with; a test failure when it resolves. */
const rejection = (p: Promise<unknown>, why: string): Promise<unknown> =>
  p.then(
    (value) => assert.fail(`${why}: ${String(value)}`),
    (e: unknown) => e,
  );

describe('http2Transport', { timeout: 20_000 }, () => {
  it('multiplexes concurrent requests on one connection, with the connection headers, query and body', async () => {
    const echo: Handler = (stream, headers) => {
      let received = '';
      stream.setEncoding('utf8');
      stream.on('data', (c: string) => (received += c));
      stream.on('end', () => {
        stream.respond({ ':status': headers[':method'] === 'POST' ? 201 : 200, 'x-echo': 'yes' });
        stream.end(JSON.stringify({ path: headers[':path'], received }));
      });
    };
    await withPeer(echo, async (port, peer) => {
      const t = transport(port);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          t.request({
            method: 'POST',
            path: `/api/v1/things/${i}`,
            query: { fieldManager: 'me', dryRun: undefined, limit: 5 },
            headers: { 'Content-Type': 'application/json' },
            body: `{"n":${i}}`,
          }),
        ),
      );
      assert.equal(peer.sessions.length, 1, 'all requests share one connection');
      for (const [i, resp] of answers.entries()) {
        assert.equal(resp.status, 201);
        assert.equal(resp.headers['x-echo'], 'yes');
        assert.equal(resp.headers[':status'], undefined, 'pseudo-headers are not response headers');
        assert.deepEqual(JSON.parse(await resp.text()), { path: `/prefix/api/v1/things/${i}?fieldManager=me&limit=5`, received: `{"n":${i}}` });
      }
      const seen = peer.requests[0];
      assert.equal(seen?.authorization, 'Bearer secret-token');
      assert.equal(seen?.['impersonate-user'], 'alice');
      assert.equal(seen?.['content-type'], 'application/json');
      assert.equal(seen?.accept, 'application/json');
    });
  });

  it('streams a long response as it arrives, and an abort closes the stream on the server', async () => {
    await withPeer(undefined, async (port, peer) => {
      let serverStream: ServerHttp2Stream | undefined;
      const serverClosed = new Promise<void>((resolve) => {
        peer.handler = (stream) => {
          serverStream = stream;
          stream.on('close', () => resolve());
          stream.respond({ ':status': 200 });
          stream.write('{"type":"ADDED"}\n');
        };
      });
      const ac = new AbortController();
      const resp = await transport(port).request({ method: 'GET', path: '/watch', signal: ac.signal, streaming: true });
      const it = resp.stream()?.[Symbol.asyncIterator]();
      assert.ok(it);
      const first = await it.next();
      assert.equal(Buffer.from(first.value as Uint8Array).toString(), '{"type":"ADDED"}\n');
      serverStream?.write('{"type":"MODIFIED"}\n');
      const second = await it.next();
      assert.equal(Buffer.from(second.value as Uint8Array).toString(), '{"type":"MODIFIED"}\n');
      ac.abort(new Error('stop watching'));
      await assert.rejects(it.next(), /stop watching/);
      await serverClosed;
    });
  });

  it('gives up on a request with no answer after its deadline, with a retriable error', async () => {
    await withPeer(NEVER, async (port) => {
      const err = await rejection(transport(port, { timeoutMs: 50 }).request({ method: 'GET', path: '/slow' }), 'expected a timeout');
      assert.equal((err as { code?: string }).code, 'ETIMEDOUT');
      assert.equal(errorFromException(err, { kind: 'Thing' }, 'get').reason, 'transient');
    });
  });

  it('gives up on a connection whose handshake never completes, with a retriable error', async () => {
    await silent(async (port) => {
      const t = transport(port, { timeoutMs: 100 });
      const err = await rejection(t.request({ method: 'GET', path: '/watch', streaming: true }), 'expected the connection to time out');
      assert.equal((err as { code?: string }).code, 'ETIMEDOUT');
      assert.equal(errorFromException(err, { kind: 'Thing' }, 'watch').reason, 'transient');
    });
  });

  it('fails in-flight requests retriably when the connection drops, and the next request reconnects', async () => {
    await withPeer(undefined, async (port, peer) => {
      const t = transport(port);
      assert.equal((await t.request({ method: 'GET', path: '/one' })).status, 200);
      peer.handler = (stream) => stream.session?.destroy(); // the connection dies while this request waits
      const err = await rejection(t.request({ method: 'GET', path: '/two' }), 'expected a failure');
      assert.equal(errorFromException(err, { kind: 'Thing' }, 'get').reason, 'transient');
      peer.handler = answer(200, '{}');
      assert.equal((await t.request({ method: 'GET', path: '/three' })).status, 200);
      assert.equal(peer.sessions.length, 2, 'a new connection after the old one died');
    });
  });

  it('sends new requests on a new connection after GOAWAY, letting open streams finish on the old one', async () => {
    await withPeer(undefined, async (port, peer) => {
      let hold: ServerHttp2Stream | undefined;
      const held = new Promise<void>((resolve) => {
        peer.handler = (stream) => {
          hold = stream;
          stream.respond({ ':status': 200 });
          resolve();
        };
      });
      const t = transport(port);
      const slow = t.request({ method: 'GET', path: '/slow' });
      await held;
      const goawaySeen = new Promise<void>((resolve) => peer.sessions[0]?.once('close', () => resolve()));
      peer.sessions[0]?.goaway(0, hold?.id);
      peer.handler = answer(201, '{"fresh":true}');
      // Sent before or after the client reads the GOAWAY: either it goes to a new connection, or the old one refuses
      // it unprocessed and it is sent again there. Either way the caller sees one success, even for a POST.
      const fresh = await t.request({ method: 'POST', path: '/fresh', body: '{}' });
      assert.equal(fresh.status, 201);
      assert.equal(await fresh.text(), '{"fresh":true}');
      assert.equal(peer.sessions.length, 2);
      hold?.end('{"old":true}');
      assert.equal(await (await slow).text(), '{"old":true}', 'the stream open before GOAWAY completes');
      await goawaySeen;
    });
  });

  it('keeps pinging a healthy connection, and closes it once a ping goes unanswered, failing its streams retriably', async () => {
    await withPeer(QUIET, async (port, peer) => {
      let pings = 0;
      let pinged: () => void = () => undefined;
      const twoPings = new Promise<void>((resolve) => (pinged = () => void (++pings >= 2 && resolve())));
      peer.server.on('session', (s) => s.on('ping', () => pinged()));
      // A relay that can be told to swallow everything, like a network path that silently died.
      let blackhole = false;
      const relay = createNetServer((client) => {
        const upstream = netConnect(port, '127.0.0.1');
        client.on('close', () => upstream.destroy());
        client.on('data', (d) => void (blackhole || upstream.write(d)));
        upstream.on('data', (d) => void (blackhole || client.write(d)));
        client.on('error', () => undefined);
        upstream.on('error', () => undefined);
      });
      await serving(relay, async (relayPort) => {
        const t = transport(relayPort, { pingEveryMs: 100, pingTimeoutMs: 100 });
        const resp = await t.request({ method: 'GET', path: '/watch', streaming: true });
        await twoPings; // not only after the first quiet spell
        blackhole = true;
        const it = resp.stream()?.[Symbol.asyncIterator]();
        const err = await rejection(it!.next(), 'expected the stream to fail');
        assert.equal(errorFromException(err, { kind: 'Thing' }, 'watch').reason, 'transient');
      });
    });
  });

  it('rejects a body cut off by a lost connection or a reset, instead of returning it as complete', async () => {
    const halfThenCut: Handler = (stream, headers) => {
      stream.respond({ ':status': 200 });
      stream.write('{"items":[{"half":');
      // A killed API server, or a load balancer dropping its backend; or the server resetting the stream.
      setImmediate(() => (headers[':path'] === '/reset' ? stream.close(constants.NGHTTP2_CANCEL) : stream.session?.destroy()));
    };
    await withPeer(halfThenCut, async (port) => {
      const t = transport(port);
      for (const path of ['/lost', '/reset']) {
        const resp = await t.request({ method: 'GET', path });
        const err = await rejection(resp.text(), 'a cut-off body was returned as complete');
        assert.equal(errorFromException(err, { kind: 'Thing' }, 'get').reason, 'transient', path);
      }
      const watch = await t.request({ method: 'GET', path: '/lost', streaming: true });
      const chunks: string[] = [];
      const err = await rejection(
        (async () => {
          for await (const c of watch.stream() ?? []) chunks.push(Buffer.from(c).toString());
        })(),
        'a cut-off watch ended as if the server had closed it',
      );
      assert.equal(chunks.join(''), '{"items":[{"half":');
      assert.equal(errorFromException(err, { kind: 'Thing' }, 'watch').reason, 'transient');
    });
  });

  it('gives up waiting for a connection as soon as the request is aborted', async () => {
    await silent(async (port) => {
      // A connect deadline far beyond the suite's timeout: only the abort can end this request in time.
      const t = transport(port, { timeoutMs: 600_000 });
      const ac = new AbortController();
      const pending = t.request({ method: 'GET', path: '/version', signal: ac.signal });
      setImmediate(() => ac.abort(new Error('shutting down')));
      await assert.rejects(pending, /shutting down/);
    });
  });

  it('opens another connection when every open one is at the server limit of concurrent streams, and closes it when idle', async () => {
    const open: ServerHttp2Stream[] = [];
    const keepOpen: Handler = (stream) => {
      open.push(stream);
      stream.respond({ ':status': 200 });
    };
    await withPeer(
      keepOpen,
      async (port, peer) => {
        const t = transport(port, { spareIdleMs: 50 });
        // A cold burst: the limit is known only from the server's first SETTINGS, which arrive after the handshake.
        const watches = await Promise.all([1, 2, 3, 4, 5].map((i) => t.request({ method: 'GET', path: `/watch/${i}`, streaming: true })));
        assert.deepEqual(
          watches.map((w) => w.status),
          [200, 200, 200, 200, 200],
          'no stream waits for a slot, none is refused',
        );
        assert.equal(peer.sessions.length, 3, 'two streams a connection');
        const sparesClosed = Promise.all(peer.sessions.slice(1).map((s) => new Promise<void>((resolve) => s.once('close', () => resolve()))));
        for (const s of open) s.end();
        for (const w of watches) for await (const _ of w.stream() ?? []);
        await sparesClosed;
        assert.equal(peer.sessions[0]?.closed, false, 'the first connection stays');
      },
      { maxConcurrentStreams: 2 },
    );
  });

  it('hands over an empty body even when it is read after the stream closed', async () => {
    const noContent: Handler = (stream) => stream.respond({ ':status': 204 }, { endStream: true });
    await withPeer(noContent, async (port) => {
      const resp = await transport(port).request({ method: 'DELETE', path: '/things/a' });
      await new Promise((resolve) => setTimeout(resolve, 20)); // end and close have both happened by now
      assert.equal(resp.status, 204);
      assert.equal(await resp.text(), '');
    });
  });

  it('sends a request the server refused unprocessed once more, even a POST', async () => {
    let attempts = 0;
    const refuseFirst: Handler = (stream) => (++attempts === 1 ? stream.close(constants.NGHTTP2_REFUSED_STREAM) : answer(201, '{}')(stream, {}));
    await withPeer(refuseFirst, async (port) => {
      const resp = await transport(port).request({ method: 'POST', path: '/things', body: '{}' });
      assert.equal(resp.status, 201);
      assert.equal(attempts, 2);
    });
  });

  it('rejects a request HTTP/2 cannot carry without giving up its connection', async () => {
    await withPeer(undefined, async (port, peer) => {
      const t = transport(port);
      assert.equal((await t.request({ method: 'GET', path: '/one' })).status, 200);
      await assert.rejects(t.request({ method: 'GET', path: '/bad', headers: { Connection: 'keep-alive' } }), { code: 'ERR_HTTP2_INVALID_CONNECTION_HEADERS' });
      assert.equal((await t.request({ method: 'GET', path: '/two' })).status, 200);
      assert.equal(peer.sessions.length, 1);
    });
  });

  it('keeps a process alive while a request is in flight, and lets it exit once none is', async () => {
    const late: Handler = (stream) => {
      stream.respond({ ':status': 200 });
      setTimeout(() => stream.end('{"late":true}'), 200); // the child has nothing else to wait for meanwhile
    };
    await withPeer(late, async (port) => {
      const script = `
      const { http2Transport } = await import(${JSON.stringify(new URL('./http2-transport.ts', import.meta.url).href)});
      const { connectionAuth } = await import(${JSON.stringify(new URL('./wire.ts', import.meta.url).href)});
      const t = http2Transport({ server: 'https://127.0.0.1:${port}', tls: { ca: Buffer.from(process.env.CA) }, auth: connectionAuth({ name: 'u' }), timeoutMs: 60000, fallback: () => { throw new Error('no fallback'); } });
      const r = await t.request({ method: 'GET', path: '/x' });
      process.stdout.write(await r.text());`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, CA: ca }, stdio: ['ignore', 'pipe', 'inherit'] });
      // Only a guard against hanging the suite: the child is expected to exit by itself long before.
      const guard = setTimeout(() => child.kill('SIGKILL'), 15_000);
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const [code, sig] = (await once(child, 'exit')) as [number | null, string | null];
      clearTimeout(guard);
      assert.equal(out, '{"late":true}', 'the answer arrived before the process exited');
      assert.deepEqual([code, sig], [0, null], 'the process exited by itself once the request was done');
    });
  });

  it('falls back to HTTP/1.1 for good when the server refuses h2 in the handshake', async () => {
    const server = createHttpsServer({ key, cert }, (_req, res) => res.end('{"via":"http/1.1"}'));
    let fallbacks = 0;
    await serving(server, async (port) => {
      const fallback: Transport = {
        server: 'fallback',
        request: async () => ({ status: 299, headers: {}, text: async () => 'fallback', stream: () => null }),
      };
      const said: string[] = [];
      const t = transport(port, {
        fallback: () => {
          fallbacks++;
          return fallback;
        },
        logger: { info: (_o: unknown, msg?: string) => void said.push(String(msg)), debug: () => undefined } as never,
      });
      assert.equal((await t.request({ method: 'GET', path: '/a' })).status, 299);
      assert.equal((await t.request({ method: 'GET', path: '/b' })).status, 299);
      assert.equal(fallbacks, 1);
      assert.deepEqual(said, ['the API server does not offer HTTP/2; using HTTP/1.1'], 'an operator learns of the fallback once');
    });
  });

  it('falls back to HTTP/1.1 when the handshake completes without agreeing on a protocol', async () => {
    // TLS without ALPN in front of an HTTP/1.1 server: an h2 client would otherwise wait forever for a SETTINGS frame.
    const http: HttpServer = createHttpServer((_req, res) => res.end('{}'));
    const tls = createTlsServer({ key, cert }, (socket) => http.emit('connection', socket));
    let fellBack = false;
    await serving(tls, async (port) => {
      const t = transport(port, {
        fallback: () => {
          fellBack = true;
          return { server: 'fallback', request: async () => ({ status: 204, headers: {}, text: async () => '', stream: () => null }) };
        },
      });
      assert.equal((await t.request({ method: 'GET', path: '/a' })).status, 204);
      assert.ok(fellBack);
    });
  });

  it('does not retry a server certificate it cannot verify', async () => {
    await withPeer(undefined, async (port) => {
      const err = await rejection(transport(port, { tls: {} }).request({ method: 'GET', path: '/' }), 'expected a TLS failure');
      assert.equal(errorFromException(err, { kind: 'Thing' }, 'get').reason, 'unknown');
    });
  });
});
