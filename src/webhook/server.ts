// The admission webhook's HTTPS server: POST /mutate-v1-pod, AdmissionReview v1 in and out, TLS 1.2 or newer with
// AEAD suites only unless configured otherwise (telemetry/tls-profile.ts).
//
// Every replica serves it, leader or not: the handler only reads caches (and the API as a fallback) and returns a
// patch; it never writes. Certificate rotation leaves connections the API server keeps alive undisturbed
// (telemetry/server-shell.ts). Until a certificate is set, handshakes fail and hasCertificate() is false (readiness:
// "webhook certificate loaded"), so the Service does not route to this replica yet.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../telemetry/logger.ts';
import { BadAdmissionReviewError, type PodAdmissionHandler } from './admission.ts';
import type { CertKeyPair } from '../telemetry/tls-profile.ts';
import type { WebhookMetrics } from './metrics.ts';
import { tlsProfile, type TlsProfile } from '../telemetry/tls-profile.ts';
import { createServerShell, type Serving } from '../telemetry/server-shell.ts';

export const MUTATE_POD_PATH = '/mutate-v1-pod';
/** How long close() lets in-flight admissions finish before cutting their connections. */
const CLOSE_TIMEOUT_MS = 10_000;

export interface WebhookServerOptions {
  logger: Logger;
  /** Port to listen on (9443 in the Deployment); 0 picks a free one (tests). */
  port: number;
  /** Default '0.0.0.0'. */
  host?: string;
  /** Handles POST /mutate-v1-pod bodies (createPodAdmissionHandler). */
  mutatePod: PodAdmissionHandler;
  metrics?: WebhookMetrics;
  /** Largest accepted body; an AdmissionReview carries the pod (and on UPDATE the old pod too). Default 8 MiB. */
  maxBodyBytes?: number;
  /** Minimum TLS version and cipher suites (default: TLS 1.2 with ECDHE and AEAD suites only, and TLS 1.3). */
  tls?: TlsProfile;
}

export interface WebhookServer extends Serving {
  hasCertificate(): boolean;
}

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * Reads the body up to `limit` bytes. A larger body is answered 413, also when it comes chunked without a
 * Content-Length: the rest is read and discarded (up to four times the limit) so that the client, still sending, gets
 * the answer instead of a reset connection; beyond that the connection is closed after the answer.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const drainLimit = 4 * limit;
  return new Promise((resolve, reject) => {
    const tooLarge = () => new HttpError(413, `body larger than ${limit} bytes`);
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      chunks.length = 0;
      if (size > drainLimit && !settled) {
        settled = true;
        req.off('data', onData);
        req.pause();
        reject(tooLarge());
      }
    };
    req.on('data', onData);
    req.on('end', () => {
      if (settled) return;
      settled = true;
      if (size > limit) reject(tooLarge());
      else resolve(Buffer.concat(chunks));
    });
    req.on('error', (error) => {
      if (settled) return;
      settled = true;
      reject(error);
    });
  });
}

export function createWebhookServer(options: WebhookServerOptions): WebhookServer {
  const log = options.logger.child({ server: 'webhook' });
  const maxBodyBytes = options.maxBodyBytes ?? 8 * 1024 * 1024;
  const metrics = options.metrics;
  let certificate: CertKeyPair | undefined;

  const shellOptions = { ...options, name: 'webhook', log, tls: options.tls ?? tlsProfile(), closeTimeoutMs: CLOSE_TIMEOUT_MS };
  const shell = createServerShell({ ...shellOptions, fields: { path: MUTATE_POD_PATH } }, (req, res) => {
    const started = process.hrtime.bigint();
    metrics?.inFlight.inc({ webhook: MUTATE_POD_PATH });
    const done = (status: number): void => {
      metrics?.inFlight.dec({ webhook: MUTATE_POD_PATH });
      metrics?.requests.inc({ webhook: MUTATE_POD_PATH, code: String(status) });
      metrics?.latency.observe({ webhook: MUTATE_POD_PATH }, Number(process.hrtime.bigint() - started) / 1e9);
    };
    handle(req, res, options, maxBodyBytes).then(done, (error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      if (status === 500) log.error({ err: error, path: req.url }, 'admission request failed');
      else log.warn({ status, reason: (error as Error).message, path: req.url }, 'rejected admission request');
      // A request whose body was not read to the end leaves the connection unusable for the next one.
      if (status === 413 && !res.headersSent) res.setHeader('connection', 'close');
      if (!res.headersSent) send(res, status, status === 500 ? 'internal error' : (error as Error).message);
      else res.destroy();
      done(status);
    });
  });
  shell.server.headersTimeout = 30_000;
  shell.server.requestTimeout = 60_000;

  return {
    setCertificate(pair) {
      shell.setCertificate(pair);
      const first = certificate === undefined;
      certificate = pair;
      log.info(first ? 'webhook certificate loaded' : 'webhook certificate rotated; new connections use it');
    },
    hasCertificate: () => certificate !== undefined,
    listen: shell.listen,
    close: shell.close,
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? `${body}\n` : JSON.stringify(body);
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json' });
  res.end(text);
}

/** One AdmissionReview request: checks the path, method, content type and body, then asks the handler. */
async function handle(req: IncomingMessage, res: ServerResponse, options: WebhookServerOptions, maxBodyBytes: number): Promise<number> {
  const path = new URL(req.url ?? '/', 'https://localhost').pathname;
  if (path !== MUTATE_POD_PATH) throw new HttpError(404, 'not found');
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    throw new HttpError(405, 'method not allowed');
  }
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) throw new HttpError(415, `expected application/json, got ${type || 'no content type'}`);
  const raw = await readBody(req, maxBodyBytes);
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (error) {
    throw new HttpError(400, `body is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  // Aborts the API fallbacks if the API server gives up on us (closed connection).
  const aborter = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) aborter.abort(new Error('the client closed the connection'));
  };
  res.on('close', onClose);
  try {
    const review = await options.mutatePod(body, aborter.signal);
    send(res, 200, review);
    return 200;
  } catch (error) {
    if (error instanceof BadAdmissionReviewError) throw new HttpError(400, error.message);
    throw error;
  } finally {
    res.off('close', onClose);
  }
}
