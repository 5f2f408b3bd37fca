// EXPERIMENT, not the shipped controller: a drop-in replacement of dist/kube/transport.js (same exports, same
// HttpRequest/HttpResponse contract) that sends requests with node:https over keep-alive HTTP/1.1 connections and
// asks the KubeConfig for TLS material and headers once, instead of calling applySecurityAuthentication (which reads
// the CA file and builds a new undici Agent) and WHATWG fetch for every request. Used by
// `npm run bench -- --experiment https-transport` to measure what src/kube/transport.ts costs; see
// docs/benchmarks/README.md. Token rotation (exec/tokenFile auth) is out of scope here: headers are taken once.
import { Agent, request } from 'node:https';
import { Readable } from 'node:stream';

export function buildUrl(server, path, query) {
  const url = new URL(server.replace(/\/+$/, '') + path);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  return url.toString();
}

export function kubeConfigTransport(kubeConfig, options = {}) {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const server = cluster.server;
  const timeoutMs = options.timeoutMs ?? 30_000;
  let prepared;
  const prepare = async () => {
    const opts = {};
    await kubeConfig.applyToHTTPSOptions(opts);
    const tls = { keepAlive: true, ca: opts.ca, cert: opts.cert, key: opts.key, ...(opts.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}) };
    return {
      headers: opts.headers ?? {},
      // Short requests share a small pool; each watch holds its own connection for its whole life.
      agent: new Agent({ ...tls, maxSockets: 16 }),
      watchAgent: new Agent({ ...tls }),
    };
  };
  return {
    server,
    async request(req) {
      prepared ??= prepare();
      const { headers, agent, watchAgent } = await prepared;
      const url = buildUrl(server, req.path, req.query);
      const signals = [];
      if (req.signal) signals.push(req.signal);
      if (!req.streaming) signals.push(AbortSignal.timeout(timeoutMs));
      const signal = signals.length === 1 ? signals[0] : signals.length > 1 ? AbortSignal.any(signals) : undefined;
      return new Promise((resolve, reject) => {
        const r = request(
          url,
          {
            method: req.method,
            agent: req.streaming ? watchAgent : agent,
            headers: {
              ...headers,
              Accept: 'application/json',
              ...(req.headers ?? {}),
              ...(req.body !== undefined ? { 'Content-Length': Buffer.byteLength(req.body) } : {}),
            },
            ...(signal ? { signal } : {}),
          },
          (res) => {
            const flat = {};
            for (const [k, v] of Object.entries(res.headers)) flat[k] = Array.isArray(v) ? v.join(', ') : String(v);
            let consumed = false;
            resolve({
              status: res.statusCode ?? 0,
              headers: flat,
              text: () =>
                new Promise((ok, fail) => {
                  consumed = true;
                  const chunks = [];
                  res.on('data', (c) => chunks.push(c));
                  res.on('end', () => ok(Buffer.concat(chunks).toString('utf8')));
                  res.on('error', fail);
                }),
              stream: () => {
                if (consumed) return null;
                consumed = true;
                return Readable.toWeb(res);
              },
            });
          },
        );
        r.on('error', reject);
        if (req.body !== undefined) r.write(req.body);
        r.end();
      });
    },
  };
}
