// Health and metrics: /healthz (the process answers), /readyz (every registered readiness check passes: caches
// synced, webhook certificate loaded, ...) and /metrics (the prom-client registry). The controller runs one server
// for probes (plain HTTP, for the kubelet) and another for metrics: HTTPS with every /metrics request authenticated
// and authorised by the cluster (metrics-auth.ts), or plain HTTP when asked for (--metrics-secure=false).

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TlsProfile } from './tls-profile.ts';
import type { MetricsAuthorizer } from './metrics-auth.ts';
import type { Registry } from 'prom-client';
import type { Logger } from './logger.ts';
import { createServerShell, type Serving } from './server-shell.ts';

/** A check passes with `true` or `{ ok: true }`; a failure may say why. A check that throws has failed. */
export type CheckResult = boolean | { ok: boolean; message?: string };
export type Check = () => CheckResult | Promise<CheckResult>;

export interface TelemetryServerOptions {
  logger: Logger;
  /** Port to listen on; 0 picks a free one (tests). */
  port: number;
  /** Default '0.0.0.0' (all IPv4 interfaces); tests use '127.0.0.1'. */
  host?: string;
  /** Serve /metrics from this registry; without it /metrics answers 404. */
  registry?: Registry;
  /** Serve /healthz and /readyz (default true). A metrics-only server sets false. */
  health?: boolean;
  /** Serve HTTPS with these settings; the certificate comes through setCertificate(). */
  tls?: TlsProfile;
  /** Decides every /metrics request (401/403 when it says no). Without it, /metrics is open. */
  authorize?: MetricsAuthorizer;
}

/** close() lets in-flight requests finish for up to 5 s; setCertificate() needs `tls`. */
export interface TelemetryServer extends Serving {
  /** Register a readiness check: /readyz answers 200 only when every one passes. */
  addReadinessCheck(name: string, check: Check): void;
  /** Register a liveness check: /healthz answers 200 only when every one passes (none by default: alive = answers). */
  addHealthCheck(name: string, check: Check): void;
}

interface NamedCheck {
  name: string;
  check: Check;
}

interface CheckOutcome {
  name: string;
  ok: boolean;
  message?: string;
}

async function runCheck({ name, check }: NamedCheck): Promise<CheckOutcome> {
  try {
    const result = await check();
    if (typeof result === 'boolean') return { name, ok: result };
    return result.message === undefined ? { name, ok: result.ok } : { name, ok: result.ok, message: result.message };
  } catch (error) {
    return { name, ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * Body in the style of the Kubernetes components' `/readyz?verbose`: one `[+]name ok` / `[-]name failed: why` line
 * per check. The short form (`ok`) is used on success unless `verbose` is asked for; a failure always says which
 * check failed, because a probe's body ends up in the pod's events.
 */
export function renderChecks(path: string, outcomes: readonly CheckOutcome[], verbose: boolean): { status: number; body: string } {
  const failed = outcomes.filter((o) => !o.ok);
  const status = failed.length === 0 ? 200 : 503;
  if (status === 200 && !verbose) return { status, body: 'ok\n' };
  const lines = outcomes.map((o) => (o.ok ? `[+]${o.name} ok` : `[-]${o.name} failed${o.message ? `: ${o.message}` : ''}`));
  lines.push(status === 200 ? `${path} check passed` : `${path} check failed`);
  return { status, body: `${lines.join('\n')}\n` };
}

export function createTelemetryServer(options: TelemetryServerOptions): TelemetryServer {
  const log = options.logger.child({ server: 'telemetry' });
  const readiness: NamedCheck[] = [];
  const liveness: NamedCheck[] = [];
  const serveHealth = options.health ?? true;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      reply(res, 405, 'method not allowed\n');
      return;
    }
    const probe = url.pathname === '/readyz' ? readiness : url.pathname === '/healthz' || url.pathname === '/livez' ? liveness : undefined;
    if (serveHealth && probe) {
      const outcomes = await Promise.all(probe.map(runCheck));
      const { status, body } = renderChecks(url.pathname, outcomes, url.searchParams.has('verbose'));
      if (status !== 200 && probe === readiness) log.debug({ failed: outcomes.filter((o) => !o.ok) }, 'readiness check failed');
      reply(res, status, body);
      return;
    }
    if (options.registry && url.pathname === '/metrics') {
      const decision = await options.authorize?.(req.headers.authorization, 'get', '/metrics');
      if (decision && decision.status !== 200) {
        if (decision.status === 500) log.warn({ reason: decision.message }, 'could not authorise a metrics request');
        else log.debug({ status: decision.status, reason: decision.message }, 'metrics request refused');
        if (decision.status === 401) res.setHeader('www-authenticate', 'Bearer');
        reply(res, decision.status, `${decision.status === 500 ? 'Internal Server Error' : decision.message}\n`);
        return;
      }
      reply(res, 200, await options.registry.metrics(), options.registry.contentType);
      return;
    }
    reply(res, 404, 'not found\n');
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((error: unknown) => {
      log.error({ err: error, path: req.url }, 'telemetry request failed');
      if (!res.headersSent) reply(res, 500, 'internal error\n');
      else res.destroy();
    });
  };
  const { server, ...serving } = createServerShell({ ...options, name: 'telemetry', log, closeTimeoutMs: 5000 }, onRequest);
  // Probes come from the kubelet every few seconds: keep-alive sockets are fine, but never let one linger forever.
  server.keepAliveTimeout = 5000;
  server.requestTimeout = 10_000;

  return {
    addReadinessCheck(name, check) {
      readiness.push({ name, check });
    },
    addHealthCheck(name, check) {
      liveness.push({ name, check });
    },
    ...serving,
  };
}

function reply(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
