// The "limit" client: a separate process that creates the given IPAMClaims as fast as it can, with the same
// concurrency and the same client-side QPS/burst (the project's own token bucket) as the controller. Nothing else:
// no informer, no list, no reconcile. The benchmark times it from spawn until its watch has seen every claim.
//
//   node bench/lib/limit-writer.ts JOB.json RESULT.json
//
// JOB: { server, token, caFile, concurrency, qps, burst, claims: [IPAMClaim bodies], client?, kubeconfig? }
//
// `client: "https"` (default): the tests' KubeHttp (node:https, HTTP/1.1 keep-alive, one connection per concurrent
// request).
// `client: "project"`: the controller's own KubeClient (src/kube: HTTP/2 through node:http2, or @kubernetes/client-node
// for the kubeconfig plugins), for a diagnostic: the same writes through the controller's transport, without the
// controller.
import { readFileSync, writeFileSync } from 'node:fs';
import { KubeHttp } from '../../e2e/harness/kubehttp.ts';
import { TokenBucket } from '../../src/kube/token-bucket.ts';

interface Job {
  server: string;
  token: string;
  caFile: string;
  concurrency: number;
  qps: number;
  burst: number;
  claims: { metadata: { name: string; namespace: string } }[];
  client?: 'https' | 'project';
  kubeconfig?: string;
}

const [jobFile, resultFile] = process.argv.slice(2);
if (!jobFile || !resultFile) {
  process.stderr.write('usage: limit-writer.ts JOB.json RESULT.json\n');
  process.exit(2);
}
const t0 = performance.now();
const job = JSON.parse(readFileSync(jobFile, 'utf8')) as Job;
const kube = new KubeHttp({ server: job.server, token: job.token, ca: readFileSync(job.caFile), maxSockets: job.concurrency, timeoutMs: 30_000 });
const bucket = new TokenBucket({ qps: job.qps, burst: job.burst });

const post = async (body: Job['claims'][number]): Promise<number> =>
  (await kube.request('POST', `/apis/k8s.cni.cncf.io/v1alpha1/namespaces/${body.metadata.namespace}/ipamclaims?fieldManager=persistent-ips`, body)).status;

let send: (body: Job['claims'][number]) => Promise<number> = post;
if (job.client === 'project') {
  const { KubeClient } = await import('../../src/kube/client.ts');
  const { loadKubeConfig } = await import('../../src/kube/load-kubeconfig.ts');
  const { resources } = await import('../../src/kube/resources.ts');
  const { KubeApiError } = await import('../../src/kube/errors.ts');
  const client = KubeClient.fromKubeConfig(loadKubeConfig({ path: job.kubeconfig! }).connection);
  send = async (body) => {
    try {
      await client.create(resources.ipamClaims, body);
      return 201;
    } catch (err) {
      if (err instanceof KubeApiError && err.code !== undefined) return err.code;
      throw err;
    }
  };
}

let next = 0;
let posted = 0;
const failures: string[] = [];
async function worker(): Promise<void> {
  while (next < job.claims.length) {
    const claim = job.claims[next++]!;
    for (let attempt = 1; ; attempt++) {
      await bucket.take();
      try {
        const status = await send(claim);
        if (status === 201) posted++;
        else if ((status === 429 || status >= 500) && attempt < 5) continue;
        else failures.push(`${claim.metadata.name}: HTTP ${status}`);
      } catch (err) {
        if (attempt < 5) continue;
        failures.push(`${claim.metadata.name}: ${(err as Error).message}`);
      }
      break;
    }
  }
}

await Promise.all(Array.from({ length: job.concurrency }, worker));
kube.close();
const cpu = process.cpuUsage();
writeFileSync(
  resultFile,
  JSON.stringify({ posted, failed: failures.length, failures: failures.slice(0, 5), ms: performance.now() - t0, cpuSeconds: (cpu.user + cpu.system) / 1e6 }),
);
process.exit(failures.length > 0 ? 1 : 0);
