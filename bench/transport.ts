// What one API request costs the client, by HTTP stack: the same POSTs of IPAMClaims (no owners, so the garbage
// collector stays out of it) into fresh namespaces of a local control plane, with the same concurrency, each stack
// in its own child process so that its CPU time is its own. A diagnostic for the cold-start ratio: the controller
// writes through src/kube (KubeClient → node:http2, node:https where the server has no HTTP/2; @kubernetes/client-node
// only for kubeconfig plugins).
//
//   node bench/transport.ts [--claims 2000] [--rounds 3] [--concurrency 4] [--out docs/benchmarks/transport]
//                           [--stacks https,http2,...] [--qps Q --burst B [--release-quantum MS]]
//
// --qps paces every stack through the project's token bucket (src/kube/token-bucket.ts) as the controller is paced
// at a cold start; --release-quantum is the bucket's grid (default its own, 50 ms; 0 releases each request when its
// token is due, one wake-up per request).
//
// Stacks:
//   https            node:https, HTTP/1.1 keep-alive (what the benchmark's limit client uses)
//   http2            node:http2, one session (streams multiplexed on one TLS connection)
//   undici-request   undici.request (undici's own API; HTTP/2 when the server offers it, as undici 8 does)
//   fetch-h1         undici fetch, HTTP/1.1 only (allowH2: false)
//   fetch-h2         undici fetch with undici 8's default Agent (HTTP/2 negotiated)
//   clientnode-fetch @kubernetes/client-node's IsomorphicFetchHttpLibrary with one fixed dispatcher and the headers
//                    set once (what src/kube/transport.ts does, minus applySecurityAuthentication per request)
//   kubeclient       the controller's own KubeClient.fromKubeConfig (src/kube/client.ts), as the controller runs it
//   kubeclient-h1    the same with DISABLE_HTTP2=1: its HTTP/1.1 transport (src/kube/transport.ts)
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent as HttpsAgent, request } from 'node:https';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './lib/stats.ts';

const STACKS = ['https', 'http2', 'undici-request', 'fetch-h1', 'fetch-h2', 'clientnode-fetch', 'kubeclient', 'kubeclient-h1'] as const;
type Stack = (typeof STACKS)[number];

interface Job {
  server: string;
  token: string;
  caFile: string;
  kubeconfig: string;
  namespace: string;
  claims: number;
  concurrency: number;
  /** Pacing through the project's token bucket; absent: as fast as the concurrency allows. */
  pace?: { qps: number; burst: number; releaseQuantumMs?: number };
}

interface ChildResult {
  stack: Stack;
  wallS: number;
  cpuS: number;
  failed: number;
  /** Time to load the stack's modules, ms. */
  importMs: number;
}

async function child(stack: Stack, jobFile: string): Promise<void> {
  const job = JSON.parse(readFileSync(jobFile, 'utf8')) as Job;
  const ca = readFileSync(job.caFile);
  const path = `/apis/k8s.cni.cncf.io/v1alpha1/namespaces/${job.namespace}/ipamclaims?fieldManager=persistent-ips`;
  const url = job.server + path;
  const headers = { Authorization: `Bearer ${job.token}`, Accept: 'application/json', 'Content-Type': 'application/json' };
  const body = (
    i: number,
  ): {
    apiVersion: string;
    kind: string;
    metadata: { name: string; namespace: string; labels: Record<string, string> };
    spec: { network: string; interface: string };
  } => ({
    apiVersion: 'k8s.cni.cncf.io/v1alpha1',
    kind: 'IPAMClaim',
    metadata: { name: `vm-${i}.net-a`, namespace: job.namespace, labels: { 'kubevirt.io/vm': `vm-${i}` } },
    spec: { network: 'bench-net-a', interface: 'pod16477688c0e' },
  });
  const t0 = performance.now();
  let post: (i: number) => Promise<number>;
  switch (stack) {
    case 'https': {
      const base = new URL(job.server);
      const agent = new HttpsAgent({ keepAlive: true, maxSockets: job.concurrency, ca });
      post = (i) =>
        new Promise((res, rej) => {
          const payload = JSON.stringify(body(i));
          const req = request(
            { host: base.hostname, port: base.port, method: 'POST', path, agent, headers: { ...headers, 'Content-Length': Buffer.byteLength(payload) } },
            (r) => {
              r.resume();
              r.on('end', () => res(r.statusCode ?? 0));
            },
          );
          req.on('error', rej);
          req.end(payload);
        });
      break;
    }
    case 'http2': {
      const { connect } = await import('node:http2');
      const session = connect(job.server, { ca });
      session.on('error', () => undefined);
      post = (i) =>
        new Promise((res, rej) => {
          const payload = JSON.stringify(body(i));
          const req = session.request({ ':method': 'POST', ':path': path, ...headers, 'content-length': Buffer.byteLength(payload) });
          let status = 0;
          req.on('response', (h) => (status = Number(h[':status'])));
          req.resume();
          req.on('end', () => res(status));
          req.on('error', rej);
          req.end(payload);
        });
      break;
    }
    case 'undici-request': {
      const { Agent, request: undiciRequest } = await import('undici');
      const dispatcher = new Agent({ connect: { ca } });
      post = async (i) => {
        const r = await undiciRequest(url, { method: 'POST', headers, body: JSON.stringify(body(i)), dispatcher });
        await r.body.text();
        return r.statusCode;
      };
      break;
    }
    case 'fetch-h1':
    case 'fetch-h2': {
      const { Agent, fetch } = await import('undici');
      const dispatcher = stack === 'fetch-h1' ? new Agent({ connect: { ca }, allowH2: false, connections: job.concurrency }) : new Agent({ connect: { ca } });
      post = async (i) => {
        const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body(i)), dispatcher });
        await r.text();
        return r.status;
      };
      break;
    }
    case 'clientnode-fetch': {
      const { IsomorphicFetchHttpLibrary, RequestContext, HttpMethod } = await import('@kubernetes/client-node');
      const { Agent } = await import('undici');
      const http = new IsomorphicFetchHttpLibrary();
      const dispatcher = new Agent({ connect: { ca, keepAlive: true } });
      post = async (i) => {
        const ctx = new RequestContext(url, HttpMethod.POST);
        ctx.setDispatcher(dispatcher as never);
        for (const [k, v] of Object.entries(headers)) ctx.setHeaderParam(k, v);
        ctx.setBody(JSON.stringify(body(i)));
        ctx.setSignal(AbortSignal.timeout(30_000));
        const r = await http.send(ctx).toPromise();
        await r.body.text();
        return r.httpStatusCode;
      };
      break;
    }
    case 'kubeclient':
    case 'kubeclient-h1': {
      if (stack === 'kubeclient-h1') process.env.DISABLE_HTTP2 = '1';
      const { KubeClient } = await import('../src/kube/client.ts');
      const { loadKubeConfig } = await import('../src/kube/load-kubeconfig.ts');
      const { resources } = await import('../src/kube/resources.ts');
      const client = KubeClient.fromKubeConfig(loadKubeConfig({ path: job.kubeconfig }).connection);
      post = async (i) => {
        try {
          await client.create(resources.ipamClaims, body(i));
          return 201;
        } catch (err) {
          return (err as { code?: number }).code ?? 0;
        }
      };
      break;
    }
  }
  const importMs = performance.now() - t0;
  if (job.pace) {
    const { TokenBucket } = await import('../src/kube/token-bucket.ts');
    const bucket = new TokenBucket(job.pace);
    const unpaced = post;
    post = async (i) => {
      await bucket.take();
      return unpaced(i);
    };
  }
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  let next = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      while (next < job.claims) {
        const i = next++;
        if ((await post(i)) !== 201) failed++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  const result: ChildResult = { stack, wallS: (performance.now() - w0) / 1000, cpuS: (cpu.user + cpu.system) / 1e6, failed, importMs };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      child: { type: 'string' },
      job: { type: 'string' },
      claims: { type: 'string' },
      rounds: { type: 'string' },
      concurrency: { type: 'string' },
      out: { type: 'string' },
      stacks: { type: 'string' },
      qps: { type: 'string' },
      burst: { type: 'string' },
      'release-quantum': { type: 'string' },
    },
  });
  if (values.child) return child(values.child as Stack, values.job!);

  const repo = resolve(new URL('..', import.meta.url).pathname);
  const claims = Number(values.claims ?? 2000);
  const rounds = Number(values.rounds ?? 3);
  const concurrency = Number(values.concurrency ?? 4);
  const stacks = (values.stacks?.split(',') ?? [...STACKS]) as Stack[];
  const unknown = stacks.filter((st) => !(STACKS as readonly string[]).includes(st));
  if (unknown.length > 0) throw new Error(`unknown stack(s) ${unknown.join(', ')}; known: ${STACKS.join(', ')}`);
  const pace: Job['pace'] = values.qps
    ? {
        qps: Number(values.qps),
        burst: Number(values.burst ?? 400),
        ...(values['release-quantum'] !== undefined ? { releaseQuantumMs: Number(values['release-quantum']) } : {}),
      }
    : undefined;
  const out = resolve(repo, values.out ?? 'docs/benchmarks/transport');
  const { startControlPlane } = await import('../e2e/harness/index.ts');
  const { KubeHttp } = await import('../e2e/harness/kubehttp.ts');
  const { killAllSync, stopAll, spawnTracked } = await import('./lib/processes.ts');
  const tmp = mkdtempSync(join(tmpdir(), 'persistent-ips-transport-'));
  const cp = await startControlPlane({ dir: join(tmp, 'cp'), onLog: (l) => process.stderr.write(`[control plane] ${l}\n`) });
  process.on('exit', killAllSync);
  const loadStart = loadavg().map((x) => Math.round(x * 100) / 100);
  const results: ChildResult[] = [];
  try {
    const kube = new KubeHttp({ server: cp.server, token: cp.token, ca: readFileSync(cp.caFile), maxSockets: 32, timeoutMs: 120_000 });
    for (let r = 0; r < rounds; r++) {
      // Interleaved, so that a change of the machine's load hits every stack alike.
      for (const stack of stacks) {
        const namespace = `transport-${stack}-${r}`;
        await kube.json('POST', '/api/v1/namespaces', [201], { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
        const jobFile = join(tmp, `${namespace}.json`);
        writeFileSync(
          jobFile,
          JSON.stringify({
            server: cp.server,
            token: cp.token,
            caFile: cp.caFile,
            kubeconfig: cp.kubeconfigPath,
            namespace,
            claims,
            concurrency,
            ...(pace ? { pace } : {}),
          } satisfies Job),
          { mode: 0o600 },
        );
        const logFile = join(tmp, `${namespace}.log`);
        const p = spawnTracked(`transport-${stack}`, process.execPath, [new URL(import.meta.url).pathname, '--child', stack, '--job', jobFile], logFile);
        const code = await p.exited;
        const line = readFileSync(logFile, 'utf8').trim().split('\n').at(-1) ?? '';
        if (code !== 0) throw new Error(`${stack} exited with ${code}: ${line}`);
        const res = JSON.parse(line) as ChildResult;
        if (res.failed > 0) throw new Error(`${stack}: ${res.failed} requests failed`);
        results.push(res);
        process.stderr.write(`round ${r + 1}/${rounds} ${stack.padEnd(16)} ${res.wallS.toFixed(2)} s, CPU ${res.cpuS.toFixed(2)} s\n`);
      }
    }
    kube.close();
  } finally {
    await stopAll();
    await cp.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  const loadEnd = loadavg().map((x) => Math.round(x * 100) / 100);
  const rows = stacks.map((stack) => {
    const rs = results.filter((r) => r.stack === stack);
    const wall = median(rs.map((r) => r.wallS));
    const cpu = median(rs.map((r) => r.cpuS));
    return {
      stack,
      medianWallS: Math.round(wall * 100) / 100,
      requestsPerSecond: Math.round(claims / wall),
      cpuMsPerRequest: Math.round((1000 * cpu * 1000) / claims) / 1000,
      importMs: Math.round(median(rs.map((r) => r.importMs))),
    };
  });
  const https = rows.find((r) => r.stack === 'https');
  const table = [
    `${'stack'.padEnd(18)}${'median wall'.padStart(12)}${'req/s'.padStart(8)}${'CPU ms/req'.padStart(12)}${'× https CPU'.padStart(13)}${'import ms'.padStart(11)}`,
    ...rows.map(
      (r) =>
        `${r.stack.padEnd(18)}${`${r.medianWallS.toFixed(2)} s`.padStart(12)}${String(r.requestsPerSecond).padStart(8)}${r.cpuMsPerRequest.toFixed(3).padStart(12)}${(https ? (r.cpuMsPerRequest / https.cpuMsPerRequest).toFixed(2) : '').padStart(13)}${String(r.importMs).padStart(11)}`,
    ),
  ].join('\n');
  const commit = (() => {
    try {
      return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repo, encoding: 'utf8' }).trim();
    } catch {
      return '';
    }
  })();
  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    kubernetes: cp.version,
    cpus: cpus().length,
    loadavgStart: loadStart,
    loadavgEnd: loadEnd,
    claimsPerRun: claims,
    rounds,
    concurrency,
    pace: pace ?? null,
    commit,
  };
  const paced = pace
    ? `, paced by the token bucket at --qps ${pace.qps} --burst ${pace.burst}, release quantum ${pace.releaseQuantumMs ?? 'default (50)'} ms`
    : '';
  process.stdout.write(
    `\nPOST of ${claims} IPAMClaims, concurrency ${concurrency}${paced}, median of ${rounds} rounds (load ${loadStart.join('/')} → ${loadEnd.join('/')})\n${table}\n`,
  );
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'transport.json'), `${JSON.stringify({ meta, results: rows, runs: results }, null, 2)}\n`);
  writeFileSync(
    join(out, 'transport.md'),
    [
      '# Client cost of one API request, by HTTP stack',
      '',
      `Generated by \`node bench/transport.ts ${process.argv.slice(2).join(' ')}\` on ${meta.date}: ${claims} POSTs of an IPAMClaim per run, concurrency ${concurrency}${paced}, each stack in its own process, median of ${rounds} interleaved rounds. ${meta.cpus} CPUs, load average ${loadStart.join(' / ')} → ${loadEnd.join(' / ')}, Node ${meta.node}, Kubernetes ${meta.kubernetes}, commit ${commit}.`,
      '',
      '| stack | median wall | requests/s | client CPU per request | × node:https | module load |',
      '|---|---|---|---|---|---|',
      ...rows.map(
        (r) =>
          `| ${r.stack} | ${r.medianWallS.toFixed(2)} s | ${r.requestsPerSecond} | ${r.cpuMsPerRequest.toFixed(3)} ms | ${https ? (r.cpuMsPerRequest / https.cpuMsPerRequest).toFixed(2) : ''} | ${r.importMs} ms |`,
      ),
      '',
      "See the header of bench/transport.ts for what each stack is. `kubeclient` is the controller's own client as it runs in production.",
      '',
    ].join('\n'),
  );
  process.stdout.write(`wrote ${relative(repo, join(out, 'transport.md'))} and transport.json\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
