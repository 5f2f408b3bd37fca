import assert from 'node:assert/strict';
import { request, type RequestOptions } from 'node:http';
import { describe, it } from 'node:test';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { createTelemetryServer, renderChecks, type TelemetryServer, type TelemetryServerOptions } from './server.ts';
import { request as httpsRequest } from 'node:https';
import { generateCa, generateServing } from '../webhook/certs.ts';
import { tlsProfile } from './tls-profile.ts';

const logger = createLogger('silent');

type Answer = { status: number; body: string; headers: Record<string, unknown> };

/** One request (HTTP or HTTPS), its status, body and headers. */
function send(requestOf: typeof request | typeof httpsRequest, options: RequestOptions & { ca?: string; servername?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = requestOf({ host: '127.0.0.1', agent: false, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

const get = (port: number, path: string, method = 'GET'): Promise<Answer> => send(request, { port, path, method });

/** A server on a free port (with a registry unless told otherwise), set up by `setup`, for the length of `body`. */
async function withServer(
  options: Partial<TelemetryServerOptions> & { setup?: (server: TelemetryServer) => void },
  body: (port: number) => Promise<void>,
): Promise<void> {
  const server = createTelemetryServer({ logger, port: 0, host: '127.0.0.1', registry: createMetrics({ defaultMetrics: false }).registry, ...options });
  options.setup?.(server);
  const { port } = await server.listen();
  try {
    await body(port);
  } finally {
    await server.close();
  }
}

describe('renderChecks', () => {
  const table = [
    { name: 'no checks', outcomes: [], verbose: false, status: 200, body: 'ok\n' },
    { name: 'all pass', outcomes: [{ name: 'a', ok: true }], verbose: false, status: 200, body: 'ok\n' },
    { name: 'all pass, verbose', outcomes: [{ name: 'a', ok: true }], verbose: true, status: 200, body: '[+]a ok\n/readyz check passed\n' },
    {
      name: 'one fails with a reason',
      outcomes: [
        { name: 'a', ok: true },
        { name: 'b', ok: false, message: 'not yet' },
      ],
      verbose: false,
      status: 503,
      body: '[+]a ok\n[-]b failed: not yet\n/readyz check failed\n',
    },
  ];
  for (const row of table) {
    it(row.name, () => {
      assert.deepEqual(renderChecks('/readyz', row.outcomes, row.verbose), { status: row.status, body: row.body });
    });
  }
});

describe('telemetry server', () => {
  it('answers /healthz with no checks registered', async () => {
    await withServer({}, async (port) => {
      const res = await get(port, '/healthz');
      assert.equal(res.status, 200);
      assert.equal(res.body, 'ok\n');
      assert.equal(res.headers['cache-control'], 'no-store');
    });
  });

  it('is ready only when every readiness check passes, and follows the checks live', async () => {
    let synced = false;
    const setup = (server: TelemetryServer) => {
      server.addReadinessCheck('caches-synced', () => synced);
      server.addReadinessCheck('webhook-certificate', async () => ({ ok: true }));
    };
    await withServer({ setup }, async (port) => {
      const before = await get(port, '/readyz');
      assert.equal(before.status, 503);
      assert.match(before.body, /\[-\]caches-synced failed/);
      assert.match(before.body, /\[\+\]webhook-certificate ok/);
      synced = true;
      const after = await get(port, '/readyz');
      assert.equal(after.status, 200);
      assert.equal(after.body, 'ok\n');
      const verbose = await get(port, '/readyz?verbose');
      assert.match(verbose.body, /\[\+\]caches-synced ok/);
    });
  });

  it('treats a throwing check as failed and reports its message', async () => {
    const setup = (server: TelemetryServer) => {
      server.addReadinessCheck('boom', () => {
        throw new Error('informer stopped');
      });
      server.addHealthCheck('loop', () => ({ ok: false, message: 'event loop stuck' }));
    };
    await withServer({ setup }, async (port) => {
      const ready = await get(port, '/readyz');
      assert.equal(ready.status, 503);
      assert.match(ready.body, /\[-\]boom failed: informer stopped/);
      const live = await get(port, '/healthz');
      assert.equal(live.status, 503);
      assert.match(live.body, /event loop stuck/);
    });
  });

  it('serves the prom-client registry in the exposition format', async () => {
    await withServer({}, async (port) => {
      const res = await get(port, '/metrics');
      assert.equal(res.status, 200);
      assert.match(String(res.headers['content-type']), /text\/plain/);
      assert.match(res.body, /# TYPE controller_runtime_reconcile_total counter/);
      assert.match(res.body, /# TYPE leader_election_master_status gauge/);
    });
  });

  it('answers 404 for /metrics without a registry and for unknown paths, 405 for other methods', async () => {
    await withServer({ registry: undefined }, async (port) => {
      assert.equal((await get(port, '/metrics')).status, 404);
      assert.equal((await get(port, '/nope')).status, 404);
      const post = await get(port, '/readyz', 'POST');
      assert.equal(post.status, 405);
      assert.equal(post.headers['allow'], 'GET, HEAD');
    });
  });

  it('a metrics-only server does not answer probes', async () => {
    await withServer({ health: false }, async (port) => {
      assert.equal((await get(port, '/healthz')).status, 404);
      assert.equal((await get(port, '/metrics')).status, 200);
    });
  });

  it('HEAD answers with the status and no body', async () => {
    await withServer({}, async (port) => {
      const res = await get(port, '/healthz', 'HEAD');
      assert.equal(res.status, 200);
      assert.equal(res.body, '');
    });
  });

  it('close() lets an in-flight request finish, then refuses new connections', async () => {
    const { promise: gate, resolve: release } = Promise.withResolvers<void>();
    const { promise: inCheck, resolve: entered } = Promise.withResolvers<void>();
    const server = createTelemetryServer({ logger, port: 0, host: '127.0.0.1' });
    server.addReadinessCheck('slow', async () => {
      entered();
      await gate;
      return true;
    });
    const { port } = await server.listen();
    const pending = get(port, '/readyz');
    await inCheck;
    const closed = server.close();
    release();
    const res = await pending;
    assert.equal(res.status, 200);
    await closed;
    await assert.rejects(get(port, '/healthz'), /ECONNREFUSED/);
  });

  it('close() on a server that never listened resolves', async () => {
    const server = createTelemetryServer({ logger, port: 0, host: '127.0.0.1' });
    await server.close();
  });
});

describe('secure metrics server', () => {
  const getTls = (port: number, ca: string, token?: string): Promise<Answer> =>
    send(httpsRequest, { port, path: '/metrics', ca, servername: 'localhost', headers: token ? { authorization: `Bearer ${token}` } : {} });

  it('serves /metrics over TLS only to callers the authoriser admits: 401 without a token, 403 without rights, 200 with', async () => {
    const now = Date.now();
    const ca = await generateCa(now, 3_600_000);
    const serving = await generateServing(ca, now, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], servingValidityMs: 3_600_000 });
    const asked: string[] = [];
    const authorize: TelemetryServerOptions['authorize'] = async (authorization, verb, path) => {
      asked.push(`${verb} ${path}`);
      if (!authorization) return { status: 401, message: 'Unauthorized: a bearer token is required' };
      return authorization === 'Bearer reader' ? { status: 200, user: 'reader' } : { status: 403, message: 'Forbidden: user "other" may not get /metrics' };
    };
    await withServer({ health: false, tls: tlsProfile(), authorize, setup: (server) => server.setCertificate(serving) }, async (port) => {
      const anonymous = await getTls(port, ca.certPem);
      assert.equal(anonymous.status, 401);
      assert.equal(anonymous.headers['www-authenticate'], 'Bearer');
      assert.doesNotMatch(anonymous.body, /controller_runtime/);
      const other = await getTls(port, ca.certPem, 'other');
      assert.equal(other.status, 403);
      assert.match(other.body, /may not get \/metrics/);
      const reader = await getTls(port, ca.certPem, 'reader');
      assert.equal(reader.status, 200);
      assert.match(reader.body, /# TYPE controller_runtime_reconcile_total counter/);
      assert.deepEqual(asked, ['get /metrics', 'get /metrics', 'get /metrics']);
      await assert.rejects(get(port, '/metrics'), 'plain HTTP is not answered');
    });
  });
});
