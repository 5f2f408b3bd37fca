// A burst of launcher-pod admissions straight at the controller's webhook (POST /mutate-v1-pod over HTTPS, as the API
// server sends them), for VMs whose VMI and claims are in the controller's caches: server-side latency from the
// webhook's own histogram, client-side latency per request, and what the webhook read from the API server meanwhile
// (its lookup counters), which in this steady state must be nothing.
import { Agent, request } from 'node:https';
import { loadavg } from 'node:os';
import { renderLauncherPod, launcherPodName, type Vmi } from '../../e2e/kubevirt/launcher-fixture.ts';
import type { ControllerProcess } from './controller.ts';
import type { KubeHttp } from '../../e2e/harness/kubehttp.ts';
import { paths } from '../../e2e/suite/kube.ts';
import { bucketDelta, buckets, countBy, histogramQuantile } from './prom.ts';
import { percentile, round } from './stats.ts';

export type WebhookBurstResult = Awaited<ReturnType<typeof webhookBurst>>;

const HIST = 'controller_runtime_webhook_latency_seconds';

function delta(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

export async function webhookBurst(kube: KubeHttp, controller: ControllerProcess, namespace: string, pods: number) {
  const list = await kube.json<{ items: Vmi[] }>('GET', `${paths.vmis(namespace)}?limit=${pods}`, [200]);
  const vmis = list.items.slice(0, pods);
  if (vmis.length < pods) throw new Error(`webhook burst: only ${vmis.length} VMIs in ${namespace}, ${pods} wanted`);
  const bodies = vmis.map((vmi, i) => {
    const pod = renderLauncherPod(vmi, { name: launcherPodName(vmi.metadata.name, vmi.metadata.uid!, 'burst') });
    return JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: `burst-${i}`,
        kind: { group: '', version: 'v1', kind: 'Pod' },
        resource: { group: '', version: 'v1', resource: 'pods' },
        namespace,
        operation: 'CREATE',
        object: pod,
      },
    });
  });
  const before = await controller.metrics();
  const loadavgBefore = loadavg()[0]!;
  // The serving certificate is the controller's own (self-signed CA in its Secret); the API server would check it
  // against the caBundle, which is not what is measured here.
  const agent = new Agent({ keepAlive: true, maxSockets: pods, rejectUnauthorized: false });
  const url = new URL(controller.webhookUrl);
  const clientMs: number[] = [];
  const t0 = performance.now();
  try {
    await Promise.all(
      bodies.map(
        (body) =>
          new Promise<void>((resolve, reject) => {
            const start = performance.now();
            const r = request(
              {
                hostname: url.hostname,
                port: url.port,
                path: url.pathname,
                method: 'POST',
                agent,
                headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
              },
              (res) => {
                const chunks: Buffer[] = [];
                res.on('data', (c: Buffer) => chunks.push(c));
                res.on('end', () => {
                  clientMs.push(performance.now() - start);
                  if (res.statusCode !== 200) reject(new Error(`webhook answered ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 200)}`));
                  else resolve();
                });
                res.on('error', reject);
              },
            );
            r.on('error', reject);
            r.end(body);
          }),
      ),
    );
  } finally {
    agent.destroy();
  }
  const seconds = (performance.now() - t0) / 1000;
  const after = await controller.metrics();
  const hist = bucketDelta(buckets(after, HIST), buckets(before, HIST));
  // A counter's increase over the burst by one of its labels.
  const counted = (name: string, label: string) =>
    delta(
      countBy(after, name, (l) => l[label] ?? ''),
      countBy(before, name, (l) => l[label] ?? ''),
    );
  const apiSources = (name: string) =>
    Object.entries(counted(name, 'source'))
      .filter(([k]) => k.startsWith('api'))
      .reduce((a, [, v]) => a + v, 0);
  clientMs.sort((a, b) => a - b);
  return {
    pods,
    /** controller_runtime_webhook_latency_seconds over the burst, interpolated in its buckets. */
    serverMs: { p50: round(1000 * histogramQuantile(0.5, hist), 2), p99: round(1000 * histogramQuantile(0.99, hist), 2) },
    /** Request sent → answer read, as the sender saw it. */
    clientMs: { p50: round(percentile(clientMs, 50), 2), p99: round(percentile(clientMs, 99), 2), max: round(clientMs[clientMs.length - 1] ?? NaN, 2) },
    outcomes: counted('persistent_ips_webhook_admissions_total', 'result'),
    /** VMI and claim reads that went to the API server during the burst (cache hits are not counted here). */
    apiReads: { vmi: apiSources('persistent_ips_webhook_vmi_lookups_total'), claim: apiSources('persistent_ips_webhook_claim_lookups_total') },
    seconds: round(seconds, 2),
    loadavgBefore: round(loadavgBefore, 2),
  };
}
