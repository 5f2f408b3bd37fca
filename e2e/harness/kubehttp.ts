// The one API client of the tests and the benchmarks: node:https with a keep-alive agent, a bearer token or a client
// certificate, and the API server's CA. It is deliberately not the controller's client (src/kube): what a test checks
// and what a benchmark measures is the controller, so the tools doing the checking share none of its code.
import type { IncomingMessage } from 'node:http';
import { Agent, request } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

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
  /** Connections open to the server at once. Default: no limit. */
  maxSockets?: number;
  /** How long a request may wait for its answer. Default 10 s. */
  timeoutMs?: number;
}

export interface WatchHandle {
  /** Settles when the stream ends. */
  done: Promise<void>;
  stop(): void;
}

export class KubeHttp {
  readonly server: string;
  readonly #opts: KubeHttpOptions;
  readonly #agent: Agent;

  constructor(opts: KubeHttpOptions) {
    this.server = opts.server;
    this.#opts = opts;
    this.#agent = new Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? Infinity, ...this.#tls() });
  }

  #tls() {
    return {
      ...(this.#opts.ca ? { ca: this.#opts.ca } : {}),
      ...(this.#opts.cert ? { cert: this.#opts.cert } : {}),
      ...(this.#opts.key ? { key: this.#opts.key } : {}),
      rejectUnauthorized: this.#opts.insecure !== true,
    };
  }

  #headers(extra: Record<string, string | number> = {}): Record<string, string | number> {
    return { ...(this.#opts.token ? { Authorization: `Bearer ${this.#opts.token}` } : {}), Accept: 'application/json', ...extra };
  }

  #url(path: string): URL {
    return new URL(this.server.replace(/\/+$/, '') + path);
  }

  request(method: string, path: string, body?: unknown, contentType = 'application/json', timeoutMs = this.#opts.timeoutMs ?? 10_000): Promise<KubeResponse> {
    const url = this.#url(path);
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        {
          method,
          agent: this.#agent,
          headers: this.#headers(payload === undefined ? {} : { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) }),
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

  /**
   * Like expect(), but parses the body (undefined when empty) and retries 429 and 5xx a few times: a benchmark's
   * setup loads the API server on purpose, and its throttling is not what the run measures.
   */
  async json<T>(method: string, path: string, ok: number[], body?: unknown, contentType?: string): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const res = await this.request(method, path, body, contentType);
      if (ok.includes(res.status)) return (res.body === '' ? undefined : JSON.parse(res.body)) as T;
      if ((res.status === 429 || res.status >= 500) && attempt < 5) {
        await sleep(200 * attempt);
        continue;
      }
      throw new Error(`${method} ${path}: HTTP ${res.status}: ${res.body.slice(0, 400)}`);
    }
  }

  /**
   * Opens a watch and calls `onEvent` for every event with its receipt time (performance.now()). Resolves once the
   * server answered 200 (the watch is established).
   */
  watch(path: string, onEvent: (event: { type: string; object: unknown }, receivedAt: number) => void): Promise<WatchHandle> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const req = request(
        this.#url(path),
        // A connection of its own: a watch must not hold one of the pooled sockets the writes use.
        { method: 'GET', agent: false, ...this.#tls(), headers: this.#headers() },
        (res: IncomingMessage) => {
          if (res.statusCode !== 200) {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => reject(new Error(`watch ${path}: HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`)));
            return;
          }
          let buffered = '';
          const done = new Promise<void>((resolveDone) => {
            res.on('data', (chunk: Buffer) => {
              const at = performance.now();
              buffered += chunk.toString('utf8');
              for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
                const line = buffered.slice(0, nl);
                buffered = buffered.slice(nl + 1);
                if (line.trim() !== '') onEvent(JSON.parse(line) as { type: string; object: unknown }, at);
              }
            });
            for (const end of ['end', 'error', 'close'] as const) res.on(end, () => resolveDone());
          });
          settled = true;
          resolve({ done, stop: () => req.destroy() });
        },
      );
      req.on('error', (err) => {
        if (!settled) reject(err);
      });
      req.end();
    });
  }

  /** Closes the kept-open connections (a process that is done with the server exits without waiting for them). */
  close(): void {
    this.#agent.destroy();
  }
}

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
