import assert from 'node:assert/strict';
import type { ClientRequest } from 'node:http';
import { Agent, request } from 'node:https';
import { connect, type ConnectionOptions } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { createLogger } from '../telemetry/logger.ts';
import { reviewResponse, type PodAdmissionHandler } from './admission.ts';
import { generateCa, generateServing } from './certs.ts';
import type { CertKeyPair } from '../telemetry/tls-profile.ts';
import { createWebhookMetrics } from './metrics.ts';
import { createWebhookServer, MUTATE_POD_PATH, type WebhookServer, type WebhookServerOptions } from './server.ts';
import { tlsProfile } from '../telemetry/tls-profile.ts';

const logger = createLogger('silent');
const names = { dnsNames: ['persistent-ips-webhook.persistent-ips-system.svc'], ipAddresses: ['127.0.0.1'], servingValidityMs: 3_600_000 };

let ca1: CertKeyPair;
let ca2: CertKeyPair;
let serving1: CertKeyPair;
let serving2: CertKeyPair;

before(async () => {
  const now = Date.now();
  ca1 = await generateCa(now, 7_200_000);
  ca2 = await generateCa(now, 7_200_000);
  serving1 = await generateServing(ca1, now, names);
  serving2 = await generateServing(ca2, now, names);
});

interface Reply {
  status: number;
  body: string;
}

type RequestOptions = { ca: string | string[]; agent?: Agent; path?: string; method?: string; contentType?: string };

/** One HTTPS request to the server, its body written by `write`; resolves with the reply. */
function send(port: number, options: RequestOptions, write: (req: ClientRequest) => void): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: options.path ?? MUTATE_POD_PATH,
        method: options.method ?? 'POST',
        ca: options.ca,
        agent: options.agent ?? false,
        headers: { 'content-type': options.contentType ?? 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    write(req);
  });
}

const post = (port: number, body: string, options: RequestOptions): Promise<Reply> => send(port, options, (req) => req.end(body));

/** A TLS handshake with the server; resolves with the protocol and cipher agreed. */
const handshake = (port: number, client: Omit<ConnectionOptions, 'host' | 'port'>): Promise<{ version: string | null; cipher: string }> =>
  new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca: ca1.certPem, servername: 'persistent-ips-webhook.persistent-ips-system.svc', ...client }, () => {
      const result = { version: socket.getProtocol(), cipher: socket.getCipher().standardName };
      socket.end();
      resolve(result);
    });
    socket.on('error', reject);
  });

/** A server on a free port with the first serving certificate, for the length of `fn`. */
async function withServer(options: Partial<WebhookServerOptions>, fn: (port: number, server: WebhookServer) => Promise<void>): Promise<void> {
  const server = createWebhookServer({ logger, port: 0, host: '127.0.0.1', mutatePod: stubHandler, ...options });
  server.setCertificate(serving1);
  const { port } = await server.listen();
  try {
    await fn(port, server);
  } finally {
    await server.close();
  }
}

const reviewBody = (uid = 'u-1'): string =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object: { metadata: { name: 'p' } } },
  });

/** A stand-in handler: a fixed patch; while `gate` is set, it waits for it (a request held in flight). */
const held: { gate?: Promise<void>; open?: () => void; entered?: Promise<void>; enter?: () => void } = {};
function holdRequests(): void {
  held.gate = new Promise((resolve) => (held.open = resolve));
  held.entered = new Promise((resolve) => (held.enter = resolve));
}
function releaseRequests(): void {
  held.gate = undefined;
  held.open?.();
}
const stubHandler: PodAdmissionHandler = async (body) => {
  held.enter?.();
  await held.gate;
  const uid = (body as { request: { uid: string } }).request.uid;
  const patch = Buffer.from(JSON.stringify([{ op: 'add', path: '/metadata/annotations/x', value: 'y' }])).toString('base64');
  return reviewResponse({ uid, allowed: true, patchType: 'JSONPatch', patch });
};

describe('webhook server', () => {
  let server: WebhookServer;
  let port: number;
  const registry = new Registry();

  before(async () => {
    server = createWebhookServer({ logger, port: 0, host: '127.0.0.1', metrics: createWebhookMetrics(registry), mutatePod: stubHandler });
    ({ port } = await server.listen());
  });
  after(async () => {
    await server.close();
  });

  it('has no certificate before one is set: handshakes fail, not ready', async () => {
    assert.equal(server.hasCertificate(), false);
    await assert.rejects(post(port, reviewBody(), { ca: ca1.certPem }));
  });

  it("answers an AdmissionReview with the handler's response over TLS 1.2+", async () => {
    server.setCertificate(serving1);
    assert.equal(server.hasCertificate(), true);
    const reply = await post(port, reviewBody('abc'), { ca: ca1.certPem });
    assert.equal(reply.status, 200);
    const out = JSON.parse(reply.body);
    assert.equal(out.response.uid, 'abc');
    assert.equal(out.response.patchType, 'JSONPatch');
    assert.deepEqual(JSON.parse(Buffer.from(out.response.patch, 'base64').toString()), [{ op: 'add', path: '/metadata/annotations/x', value: 'y' }]);
    assert.match(await registry.metrics(), /controller_runtime_webhook_requests_total\{webhook="\/mutate-v1-pod",code="200"\} \d/);
  });

  it('refuses TLS 1.1', async () => {
    await assert.rejects(handshake(port, { maxVersion: 'TLSv1.1', minVersion: 'TLSv1' }));
  });

  it('answers 404, 405, 415, 400 for what is not an admission request', async () => {
    assert.equal((await post(port, reviewBody(), { ca: ca1.certPem, path: '/other' })).status, 404);
    assert.equal((await post(port, '', { ca: ca1.certPem, method: 'GET' })).status, 405);
    assert.equal((await post(port, reviewBody(), { ca: ca1.certPem, contentType: 'text/plain' })).status, 415);
    assert.equal((await post(port, '{not json', { ca: ca1.certPem })).status, 400);
  });

  it('rejects an invalid certificate pair and keeps serving the current one', async () => {
    assert.throws(() => server.setCertificate({ certPem: serving2.certPem, keyPem: serving1.keyPem }));
    assert.equal((await post(port, reviewBody(), { ca: ca1.certPem })).status, 200);
  });

  it('rotation: new connections get the new certificate; an in-flight request and a kept-alive connection carry on', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // A kept-alive connection established with the first certificate.
      assert.equal((await post(port, reviewBody('before'), { ca: ca1.certPem, agent })).status, 200);
      // A request in flight while the certificate changes.
      holdRequests();
      const inFlight = post(port, reviewBody('in-flight'), { ca: ca1.certPem });
      await held.entered;
      server.setCertificate(serving2);
      releaseRequests();
      const reply = await inFlight;
      assert.equal(reply.status, 200);
      assert.equal(JSON.parse(reply.body).response.uid, 'in-flight');
      // The kept-alive connection still works (its handshake is done).
      assert.equal((await post(port, reviewBody('kept-alive'), { ca: ca1.certPem, agent })).status, 200);
      // New connections present the new certificate: trusted with the new CA, not with the old one alone.
      assert.equal((await post(port, reviewBody('new'), { ca: ca2.certPem })).status, 200);
      await assert.rejects(post(port, reviewBody('old-ca-only'), { ca: ca1.certPem }), /self-signed|unable to verify|certificate/i);
      // During a CA overlap the API server trusts both: either certificate verifies.
      assert.equal((await post(port, reviewBody('bundle'), { ca: [ca1.certPem, ca2.certPem] })).status, 200);
    } finally {
      agent.destroy();
    }
  });
});

describe('webhook server shutdown', () => {
  it('close() lets an admission in flight finish, then refuses connections', async () => {
    await withServer({}, async (port, server) => {
      holdRequests();
      const inFlight = post(port, reviewBody('last'), { ca: ca1.certPem });
      await held.entered;
      const closed = server.close();
      releaseRequests();
      assert.equal((await inFlight).status, 200);
      await closed;
      await assert.rejects(post(port, reviewBody(), { ca: ca1.certPem }), /ECONNREFUSED/);
    });
  });
});

describe('webhook server TLS settings', () => {
  it('by default: TLS 1.3, or TLS 1.2 with an AEAD suite; a CBC or SHA-1 suite is refused', async () => {
    await withServer({}, async (port) => {
      assert.equal((await handshake(port, {})).version, 'TLSv1.3');
      const tls12 = await handshake(port, { maxVersion: 'TLSv1.2' });
      assert.equal(tls12.version, 'TLSv1.2');
      assert.match(tls12.cipher, /^TLS_ECDHE_ECDSA_WITH_(AES_\d+_GCM|CHACHA20_POLY1305)/);
      for (const ciphers of ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-ECDSA-AES128-SHA256']) {
        await assert.rejects(handshake(port, { maxVersion: 'TLSv1.2', ciphers }), Error, ciphers);
      }
    });
  });

  it('--tls-min-version VersionTLS13 refuses TLS 1.2 clients', async () => {
    await withServer({ tls: tlsProfile('VersionTLS13') }, async (port) => {
      assert.equal((await handshake(port, {})).version, 'TLSv1.3');
      await assert.rejects(handshake(port, { maxVersion: 'TLSv1.2' }));
    });
  });

  it('--tls-cipher-suites offers exactly the named TLS 1.2 suites', async () => {
    const tls = tlsProfile('VersionTLS12', ['TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA']);
    await withServer({ tls }, async (port) => {
      assert.equal((await handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA' })).cipher, 'TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA');
      assert.equal((await handshake(port, { maxVersion: 'TLSv1.2' })).cipher, 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384');
      await assert.rejects(handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' }));
    });
  });
});

describe('webhook server body limit', () => {
  /** POSTs `total` bytes in 64 KiB chunks with Transfer-Encoding: chunked (no Content-Length). */
  const postChunked = (port: number, total: number): Promise<Reply> =>
    send(port, { ca: ca1.certPem }, (req) => {
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const pump = (): void => {
        while (sent < total) {
          sent += chunk.length;
          if (!req.write(chunk)) {
            req.once('drain', pump);
            return;
          }
        }
        req.end();
      };
      pump();
    });

  for (const [what, total, maxBodyBytes] of [
    ['a chunked 10 MiB body over an 8 MiB limit', 10 * 1024 * 1024, 8 * 1024 * 1024],
    ['a chunked body of many times the limit', 6 * 1024 * 1024, 1024 * 1024],
  ] as const) {
    it(`${what} without Content-Length is answered 413`, async () => {
      await withServer({ maxBodyBytes }, async (port) => {
        const reply = await postChunked(port, total);
        assert.equal(reply.status, 413);
        assert.match(reply.body, /body larger than/);
      });
    });
  }
});
