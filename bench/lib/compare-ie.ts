// The side-by-side mode (`--compare-ie PATH`): kubevirt/ipam-extensions' manager (built from its source by
// bench/ipam-extensions/build.sh) cold-starts against a fresh control plane holding the same VMs and NADs as this
// project's cold start of the same size, measured the same way (VmHWM, steady VmRSS, CPU from /proc, spawn → all
// claims seen on a watch). It runs as its own Deployment would, with its defaults: no leader election (one replica),
// controller-runtime's client limit (QPS 20, burst 30, which it does not expose as a flag), its webhook on :9443 and
// metrics on :8080 (fixed in its main.go: both ports must be free on this machine).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateCa, generateServing } from '../../src/webhook/certs.ts';
import { ClaimWatch } from './claim-watch.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { procCpuSeconds, procMemory } from './proc.ts';
import { spawnTracked, stopTracked } from './processes.ts';
import { round } from './stats.ts';
import { freePort } from '../../e2e/harness/index.ts';
import type { BenchContext } from './scenarios.ts';

export type IeResult = Awaited<ReturnType<typeof ieColdStart>>;

/** Its manager (`binary`) started against the context's control plane, whose `namespace` holds `vms` VMs. */
export async function ieColdStart(ctx: BenchContext, binary: string, namespace: string, vms: number) {
  const probePort = await freePort();
  const certDir = join(ctx.dir, `ie-certs-${vms}`);
  mkdirSync(certDir, { recursive: true });
  const now = Date.now();
  const ca = await generateCa(now, 24 * 3600 * 1000, 'ie-bench-ca');
  const serving = await generateServing(ca, now, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], servingValidityMs: 24 * 3600 * 1000 });
  writeFileSync(join(certDir, 'tls.crt'), serving.certPem);
  writeFileSync(join(certDir, 'tls.key'), serving.keyPem);
  const claims = vms * 2;
  const watch = new ClaimWatch(ctx.kube, namespace);
  await watch.start();
  const spawnAt = performance.now();
  const p = spawnTracked(
    `ipam-extensions-${vms}`,
    binary,
    [`--kubeconfig=${ctx.cp.kubeconfigPath}`, `--certificates-dir=${certDir}`, `--health-probe-bind-address=127.0.0.1:${probePort}`],
    join(ctx.dir, `ipam-extensions-${vms}.log`),
  );
  const rss: { t: number; kb: number }[] = [];
  let hwmKb = 0;
  const sampler = setInterval(() => {
    const m = procMemory(p.pid);
    if (!m) return;
    hwmKb = Math.max(hwmKb, m.hwmKb);
    rss.push({ t: performance.now(), kb: m.rssKb });
  }, 500);
  try {
    // Its client is held to 20 writes a second: 2 claims per VM take about vms/10 seconds, plus slack.
    const doneAt = await watch.waitForCount(claims, Math.max(120_000, (claims / 15) * 1000));
    const cpuSeconds = procCpuSeconds(p.pid) ?? NaN;
    const spawnToAllClaimsS = (doneAt - spawnAt) / 1000;
    ctx.log(`ipam-extensions ${vms}: all ${claims} claims after ${round(spawnToAllClaimsS, 1)} s; settling 30 s`);
    await sleep(30_000);
    const since = performance.now() - 15_000;
    const tail = rss
      .filter((s) => s.t >= since)
      .map((s) => s.kb / 1024)
      .sort((a, b) => a - b);
    return {
      vms,
      claims,
      peakRssMiB: round(Math.max(hwmKb, procMemory(p.pid)?.hwmKb ?? 0) / 1024, 1),
      steadyRssMiB: round(tail[tail.length >> 1] ?? NaN, 1),
      spawnToAllClaimsS: round(spawnToAllClaimsS, 2),
      cpuSeconds: round(cpuSeconds, 2),
      cpuPerClaimMs: round((1000 * cpuSeconds) / claims, 3),
      exited: p.hasExited(),
    };
  } finally {
    clearInterval(sampler);
    watch.stop();
    await stopTracked(p);
  }
}
