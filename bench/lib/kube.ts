// The benchmark's own API client: node:https with a keep-alive agent, bearer token and the apiserver's CA. It is
// deliberately independent of the controller's client (src/kube), so that what the benchmark measures is the
// controller, not the benchmark.
import { Agent, request } from 'node:https';
import type { IncomingMessage } from 'node:http';

export interface KubeCreds {
  server: string;
  token: string;
  ca: string | Buffer;
}

export interface Reply {
  status: number;
  body: string;
}

export class BenchKube {
  readonly creds: KubeCreds;
  readonly #agent: Agent;
  readonly #base: URL;

  constructor(creds: KubeCreds, options: { maxSockets?: number } = {}) {
    this.creds = creds;
    this.#base = new URL(creds.server);
    this.#agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 32, ca: creds.ca });
  }

  request(method: string, path: string, body?: unknown, contentType = 'application/json', timeoutMs = 120_000): Promise<Reply> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.#base.hostname,
          port: this.#base.port,
          path,
          method,
          agent: this.#agent,
          headers: {
            Authorization: `Bearer ${this.creds.token}`,
            Accept: 'application/json',
            ...(payload === undefined ? {} : { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) }),
          },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  /** Like request(), but parses JSON and throws unless the status is one of `ok`; retries 429/5xx a few times. */
  async json<T>(method: string, path: string, ok: number[], body?: unknown, contentType?: string): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const res = await this.request(method, path, body, contentType);
      if (ok.includes(res.status)) return (res.body === '' ? undefined : JSON.parse(res.body)) as T;
      if ((res.status === 429 || res.status >= 500) && attempt < 5) {
        await new Promise((r) => setTimeout(r, 200 * attempt));
        continue;
      }
      throw new Error(`${method} ${path}: HTTP ${res.status}: ${res.body.slice(0, 400)}`);
    }
  }

  /**
   * Opens a watch and calls `onEvent` for every event with its receipt time (performance.now()). Resolves once the
   * server answered 200 (the watch is established); `done` settles when the stream ends.
   */
  watch(path: string, onEvent: (event: { type: string; object: unknown }, receivedAt: number) => void): Promise<WatchHandle> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const req = request(
        {
          host: this.#base.hostname,
          port: this.#base.port,
          path,
          method: 'GET',
          // A dedicated connection: a watch must not hold one of the pooled sockets the writes use.
          agent: false,
          ca: this.creds.ca,
          headers: { Authorization: `Bearer ${this.creds.token}`, Accept: 'application/json' },
        },
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
              let nl: number;
              while ((nl = buffered.indexOf('\n')) >= 0) {
                const line = buffered.slice(0, nl);
                buffered = buffered.slice(nl + 1);
                if (line.trim() !== '') onEvent(JSON.parse(line) as { type: string; object: unknown }, at);
              }
            });
            res.on('end', () => resolveDone());
            res.on('error', () => resolveDone());
            res.on('close', () => resolveDone());
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

  close(): void {
    this.#agent.destroy();
  }
}

export interface WatchHandle {
  done: Promise<void>;
  stop(): void;
}

/** Runs `fn` over `items` with at most `concurrency` calls in flight; rejects on the first failure. */
export async function runPool<T>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: unknown;
  const worker = async (): Promise<void> => {
    while (failed === undefined && next < items.length) {
      const i = next++;
      try {
        await fn(items[i]!, i);
      } catch (err) {
        failed ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  if (failed !== undefined) throw failed;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
