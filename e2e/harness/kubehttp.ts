// A minimal HTTPS client for the harness's own calls to the apiserver (bearer token + the apiserver's CA). The
// controller talks to the API server through its own client (src/kube); the harness stays independent of it so that
// the tests check that client's behaviour instead of relying on it.
import { request } from 'node:https';

export interface KubeResponse {
  status: number;
  body: string;
  json<T = unknown>(): T;
}

export interface KubeHttpOptions {
  server: string;
  /** Bearer token (the harness's admin); or a client certificate below. */
  token?: string;
  /** CA bundle to verify the server with; default: the system's. */
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** insecure-skip-tls-verify (only for an existing cluster's kubeconfig that asks for it). */
  insecure?: boolean;
}

export class KubeHttp {
  readonly server: string;
  readonly #opts: KubeHttpOptions;

  constructor(opts: KubeHttpOptions) {
    this.server = opts.server;
    this.#opts = opts;
  }

  request(method: string, path: string, body?: unknown, contentType = 'application/json', timeoutMs = 10_000): Promise<KubeResponse> {
    const url = new URL(this.server.replace(/\/+$/, '') + path);
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        {
          method,
          ...(this.#opts.ca ? { ca: this.#opts.ca } : {}),
          ...(this.#opts.cert ? { cert: this.#opts.cert } : {}),
          ...(this.#opts.key ? { key: this.#opts.key } : {}),
          rejectUnauthorized: this.#opts.insecure !== true,
          headers: {
            ...(this.#opts.token ? { Authorization: `Bearer ${this.#opts.token}` } : {}),
            Accept: 'application/json',
            ...(payload === undefined ? {} : { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) }),
          },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({ status: res.statusCode ?? 0, body: text, json: <T>() => JSON.parse(text) as T });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${url.pathname}: no answer in ${timeoutMs} ms`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  get(path: string): Promise<KubeResponse> {
    return this.request('GET', path);
  }

  /** Like request(), but throws unless the status is one of `ok`. */
  async expect(method: string, path: string, ok: number[], body?: unknown, contentType?: string): Promise<KubeResponse> {
    const res = await this.request(method, path, body, contentType);
    if (!ok.includes(res.status)) {
      throw new Error(`${method} ${path}: HTTP ${res.status}: ${res.body.slice(0, 500)}`);
    }
    return res;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Calls `probe` every `intervalMs` until it returns a value other than undefined, or throws after `timeoutMs` with
 * the last error. `abort` (when given) is checked between tries, to stop waiting for a process that died.
 */
export async function poll<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
  opts: { intervalMs?: number; abort?: () => string | undefined } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  for (;;) {
    const reason = opts.abort?.();
    if (reason) throw new Error(`${what}: ${reason}`);
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) throw new Error(`${what}: not done after ${timeoutMs} ms (last: ${last})`);
    await sleep(opts.intervalMs ?? 200);
  }
}
