// `npm run bench -- --scales 1000,3000,10000`: memory, CPU and log volume of the controller, started exactly as the
// shipped Deployment starts it, at several cluster sizes, each on a fresh control plane. See docs/benchmarks.
import { ControllerProcess } from './lib/controller.ts';
import type { Options } from './run.ts';
import { quantityMiB, shippedController } from './lib/deployment.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { atMost, fmtMsOf, fmtN, fmtS, verdict, type Row } from './lib/report.ts';
import { ClaimWatch } from './lib/claim-watch.ts';
import { createNamespace, createVmWithVmi, NETWORKS } from './lib/objects.ts';
import {
  churn,
  coldStart,
  createVms,
  gcRow,
  type BenchContext,
  type ChurnResult,
  type ColdStartResult,
  type Harness,
  type ModeRun,
  type SetupResult,
} from './lib/scenarios.ts';
import { round } from './lib/stats.ts';
import { webhookBurst, type WebhookBurstResult } from './lib/webhook-burst.ts';
import { ieColdStart, type IeResult } from './lib/compare-ie.ts';

/** Targets of issue 15 (docs/benchmarks/README.md), MiB of RSS. */
export const IDLE_TARGET_MIB = 80;
export function peakTargetMiB(vms: number): number {
  return vms <= 1000 ? 100 : vms <= 3000 ? 110 : 160;
}
export const STEADY_TARGET_10K_MIB = 130;
export const CPU_PER_CLAIM_TARGET_MS = 0.8;
export const INFO_LINES_TARGET_1K = 50;
export const CHURN_P99_TARGET_MS = 200;
export const OUTAGE_RECOVERY_TARGET_S = 5;

/**
 * Stops kube-apiserver for `seconds`, starts it again, and times how soon a VM created right then gets its claims.
 * With --leader-elect (the Deployment's) the controller cannot renew its Lease during the outage and exits, as a
 * controller-runtime manager does; like the kubelet (restartPolicy Always) the benchmark starts it again whenever it
 * exits, at once (the kubelet's first restart; later ones back off). Returns the controller running at the end.
 */
async function outage(ctx: BenchContext, controller: ControllerProcess, seconds: number, log: (line: string) => void) {
  const ns = 'bench-outage';
  await createNamespace(ctx.kube, ns);
  let current = controller;
  let restarts = 0;
  let warnings = 0;
  let supervising = true;
  const logsBefore = current.logLines().length;
  // Warnings and errors of a controller process, since the outage began for the one it had then.
  const warningsOf = (c: ControllerProcess): number =>
    c
      .logLines()
      .slice(c === controller ? logsBefore : 0)
      .filter((l) => l.level === 'warn' || l.level === 'error').length;
  const supervisor = (async () => {
    while (supervising) {
      if (current.exited) {
        warnings += warningsOf(current);
        restarts++;
        log(`outage: the controller exited (${restarts}); starting it again, as the kubelet would`);
        current = await ControllerProcess.startIn(ctx, `${current.name.replace(/-r\d+$/, '')}-r${restarts}`);
      }
      await sleep(200);
    }
  })();
  log(`outage: kube-apiserver stopped for ${seconds} s`);
  await ctx.cp.stopApiServer();
  await sleep(seconds * 1000);
  await ctx.cp.startApiServer();
  const readyAt = performance.now();
  log('outage: kube-apiserver ready again');
  const watch = new ClaimWatch(ctx.kube, ns);
  let seen: number;
  let posted: number;
  let postAt: number;
  try {
    // The benchmark's own keep-alive connections died with the server: retry until a request goes through.
    for (let i = 0; ; i++) {
      try {
        await watch.start();
        break;
      } catch (err) {
        if (i > 50) throw err;
        await sleep(100);
      }
    }
    postAt = performance.now();
    await createVmWithVmi(ctx.kube, ns, 'after-outage');
    posted = performance.now();
    seen = await watch.waitForCount(NETWORKS.length, 300_000);
  } finally {
    watch.stop();
    supervising = false;
    await supervisor;
  }
  warnings += warningsOf(current);
  return {
    controller: current,
    result: {
      outageSeconds: seconds,
      /** API server /readyz again → both claims of a VM created right then seen on a watch. */
      readyToClaimsS: round((seen - readyAt) / 1000, 3),
      /** The VM's POST itself, after the restart. */
      vmPostS: round((posted - postAt) / 1000, 3),
      /** Controller warnings logged during the outage and recovery. */
      warnings,
      /** Times the controller exited (lost its Lease, or found no API server at start-up) and was started again. */
      controllerRestarts: restarts,
    },
  };
}

const LEVELS_INFO_UP = new Set(['info', 'warn', 'error', 'fatal', 30, 40, 50, 60]);

function logStats(c: ControllerProcess): { infoLines: number; bytes: number } {
  const lines = c.logLines();
  return { infoLines: lines.filter((l) => LEVELS_INFO_UP.has(l.level as string)).length, bytes: JSON.stringify(lines).length };
}

/** Median RSS of the samples in the last `seconds`, MiB. */
function recentRssMiB(c: ControllerProcess, seconds: number): number {
  const m = c.memoryNow();
  const since = c.uptimeS - seconds;
  const xs = m.samples
    .filter((s) => s.t >= since)
    .map((s) => s.rssKb / 1024)
    .sort((a, b) => a - b);
  return round(xs.length ? xs[xs.length >> 1]! : NaN, 1);
}

/** A cold start's figures once its controller has settled. */
function settled(controller: ControllerProcess, setup: SetupResult, cold: ColdStartResult) {
  const mem = controller.memoryNow();
  const logs = logStats(controller);
  return {
    vms: cold.vms,
    setup,
    cold,
    peakRssMiB: mem.peakRssMiB,
    steadyRssMiB: recentRssMiB(controller, 15),
    peakHeapUsedMiB: mem.peakHeapUsedMiB,
    /** Lines at info and above in the controller's log, spawn → settled. */
    infoLines: logs.infoLines,
    logBytes: logs.bytes,
    cpuPerClaimMs: round((1000 * (cold.cpuSeconds.controller ?? NaN)) / cold.claims, 3),
    exitedEarly: controller.exited,
  };
}

type ScaleEntry = ReturnType<typeof settled> & {
  churn?: ChurnResult;
  peakRssAfterChurnMiB?: number;
  outage?: Awaited<ReturnType<typeof outage>>['result'];
  burst?: WebhookBurstResult;
  ie?: IeResult;
};

export async function runScales(o: Options, { startCp, stopCp, show, log }: Harness): Promise<ModeRun> {
  const shipped = shippedController();
  const limitMiB = quantityMiB(shipped.limits.memory);
  const commands: Record<string, string> = {};
  const entries: ScaleEntry[] = [];
  let idle: { rssMiB: number; peakMiB: number; infoLines: number } | undefined;
  let k8sVersion = '';
  let firstSetup: SetupResult | undefined;
  const largest = Math.max(...o.scales);

  for (const [i, n] of o.scales.entries()) {
    log(`scale ${n}: fresh control plane`);
    const ctx = await startCp(`cp-${n}`);
    k8sVersion = ctx.cp.version;
    if (i === 0) {
      log('idle controller: caches synced, no VMs');
      const ctl = await ControllerProcess.startIn(ctx, 'idle');
      await ctl.waitReady();
      await sleep(20_000);
      idle = { rssMiB: recentRssMiB(ctl, 10), peakMiB: ctl.memoryNow().peakRssMiB, infoLines: logStats(ctl).infoLines };
      commands.idle = ctl.commandLine;
      await ctl.stop();
      log(`idle RSS ${idle.rssMiB} MiB (peak ${idle.peakMiB})`);
    }
    log(`scale ${n}: setup`);
    const { result: setup } = await createVms(ctx, 'bench-scale', 'cold', n);
    firstSetup ??= setup;
    log(`scale ${n}: cold start`);
    const started = await coldStart(ctx, 'bench-scale', n, `scale-${n}`);
    const cold = started.result;
    let controller = started.controller;
    commands[`cold start ${n}`] = cold.controllerCommand;
    log(`scale ${n}: converged in ${cold.spawnToAllClaimsS} s; settling 30 s`);
    await sleep(30_000);
    const entry: ScaleEntry = settled(controller, setup, cold);
    log(`scale ${n}: peak ${entry.peakRssMiB} MiB, steady ${entry.steadyRssMiB} MiB, ${entry.cpuPerClaimMs} ms CPU per claim, ${entry.infoLines} info lines`);
    if (o.webhookBurst > 0) {
      // After the memory figures: the burst's own allocations are not part of a cold start.
      entry.burst = await webhookBurst(ctx.kube, controller, 'bench-scale', Math.min(o.webhookBurst, n));
      log(
        `scale ${n}: webhook burst of ${entry.burst.pods}: server p50/p99 ${entry.burst.serverMs.p50}/${entry.burst.serverMs.p99} ms, API reads ${JSON.stringify(entry.burst.apiReads)}`,
      );
    }
    if (o.outageSeconds > 0 && i === 0) {
      const after = await outage(ctx, controller, o.outageSeconds, log);
      entry.outage = after.result;
      controller = after.controller;
    }
    if (o.scaleChurn && n === largest) {
      log(`scale ${n}: churn ${o.churnRate} VMs/s for ${o.churnSeconds} s`);
      entry.churn = await churn(ctx, controller, 'bench-churn', o.churnRate, o.churnSeconds);
      entry.peakRssAfterChurnMiB = controller.memoryNow().peakRssMiB;
      log(`scale ${n}: churn p50/p99 ${entry.churn.latencyMs.p50}/${entry.churn.latencyMs.p99} ms`);
    }
    await controller.stop();
    entries.push(entry);
    await stopCp();
    if (o.compareIe) {
      log(`scale ${n}: ipam-extensions on a fresh control plane`);
      const ie = await startCp(`ie-${n}`);
      await createVms(ie, 'bench-scale', 'cold', n);
      entry.ie = await ieColdStart(ie, o.compareIe, 'bench-scale', n);
      log(`scale ${n}: ipam-extensions peak ${entry.ie.peakRssMiB} MiB, steady ${entry.ie.steadyRssMiB} MiB, ${entry.ie.cpuPerClaimMs} ms CPU per claim`);
      await stopCp();
    }
  }

  const env = Object.entries(shipped.env).map(([k, v]) => `${k}=${v}`);
  const rows: Row[] = [
    [
      'Deployment (manifests/controller/deployment.yaml)',
      `${env.join(' ') || 'no env'}; requests ${JSON.stringify(shipped.requests)}; limits ${JSON.stringify(shipped.limits)}`,
    ],
  ];
  if (idle) {
    rows.push([
      'idle RSS: caches synced, no VMs (median of the last 10 s of 20 s)',
      `${idle.rssMiB} MiB (${atMost(idle.rssMiB, IDLE_TARGET_MIB)}); peak ${idle.peakMiB} MiB`,
    ]);
  }
  for (const e of entries) {
    const underLimit = verdict(limitMiB === undefined || e.peakRssMiB < limitMiB);
    rows.push(
      [`${fmtN(e.vms)} VMs × 2 networks → ${fmtN(e.cold.claims)} claims`, ''],
      ['  peak RSS (VmHWM)', `${e.peakRssMiB} MiB (${atMost(e.peakRssMiB, peakTargetMiB(e.vms))}; Deployment limit ${limitMiB ?? '?'} MiB: ${underLimit})`],
      [
        '  steady RSS, 30 s after convergence (median of the last 15 s)',
        `${e.steadyRssMiB} MiB${e.vms >= 10_000 ? ` (${atMost(e.steadyRssMiB, STEADY_TARGET_10K_MIB)})` : ''}`,
      ],
      ['  peak heap used', e.peakHeapUsedMiB === null ? 'n/a' : `${e.peakHeapUsedMiB} MiB`],
      ['  spawn → ready / all claims', `${fmtS(e.cold.spawnToReadyS)} / ${fmtS(e.cold.spawnToAllClaimsS)}`],
      ['  controller CPU per claim, spawn → last claim', `${e.cpuPerClaimMs} ms (${atMost(e.cpuPerClaimMs, CPU_PER_CLAIM_TARGET_MS)})`],
      [
        '  log lines at info and above, spawn → settled',
        `${e.infoLines} (${Math.round(e.logBytes / 1024)} KiB)${e.vms === 1000 ? ` (${atMost(e.infoLines, INFO_LINES_TARGET_1K)})` : ''}`,
      ],
      ['  GC and event loop', gcRow(e.cold.runtime)],
      ['  ipamclaims writes per claim', String(e.cold.claimWritesPerClaim)],
      ['  process alive after convergence (no heap error, no kill)', verdict(!e.exitedEarly)],
      ['  load average (1 min) before → after', `${e.cold.loadavgBefore[0]} → ${e.cold.loadavgAfter[0]}`],
    );
    if (e.ie) {
      const ie = e.ie;
      const ratio = (a: number, b: number) => (b > 0 ? `${round(a / b, 2)}×` : 'n/a');
      rows.push(
        [
          `  kubevirt/ipam-extensions, same VMs on a fresh control plane (--compare-ie): peak / steady RSS`,
          `${ie.peakRssMiB} / ${ie.steadyRssMiB} MiB; this project ÷ it: ${ratio(e.peakRssMiB, ie.peakRssMiB)} / ${ratio(e.steadyRssMiB, ie.steadyRssMiB)}${ie.exited ? ' (it exited early)' : ''}`,
        ],
        [
          '    its CPU per claim, spawn → last claim; this project ÷ it',
          `${ie.cpuPerClaimMs} ms (${ie.cpuSeconds} s); ${ratio(e.cpuPerClaimMs, ie.cpuPerClaimMs)}`,
        ],
        ['    its spawn → all claims (its client: QPS 20, burst 30)', `${fmtS(ie.spawnToAllClaimsS)} (this project: ${fmtS(e.cold.spawnToAllClaimsS)})`],
      );
    }
    if (e.burst) {
      const b = e.burst;
      const reads = b.apiReads.vmi + b.apiReads.claim;
      const outcomes = Object.entries(b.outcomes).map(([k, v]) => `${k} ${v}`);
      rows.push(
        [
          `  webhook: ${fmtN(b.pods)} launcher-pod admissions at once, server-side latency p50 / p99 (controller_runtime_webhook_latency_seconds)`,
          fmtMsOf(b.serverMs, 'p50', 'p99'),
        ],
        ['    client-side p50 / p99 / max; whole burst', `${fmtMsOf(b.clientMs, 'p50', 'p99', 'max')}; ${fmtS(b.seconds)}`],
        [
          '    API reads during the burst (VMI / claim); outcomes',
          `${b.apiReads.vmi} / ${b.apiReads.claim} (target 0: ${verdict(reads === 0)}); ${outcomes.join(', ')}`,
        ],
        ['    load average (1 min) before', String(b.loadavgBefore)],
      );
    }
    if (e.outage) {
      const x = e.outage;
      rows.push([
        `  kube-apiserver stopped ${x.outageSeconds} s, then started: /readyz → claims of a VM created then seen`,
        `${fmtS(x.readyToClaimsS)} (target < ${OUTAGE_RECOVERY_TARGET_S} s: ${verdict(x.readyToClaimsS < OUTAGE_RECOVERY_TARGET_S)}); the VM+VMI POSTs took ${fmtS(x.vmPostS)}; the controller exited and was started again ${x.controllerRestarts}× (Lease lost, or no API server at start-up); ${x.warnings} controller warnings`,
      ]);
    }
    if (e.churn) {
      const ch = e.churn;
      rows.push(
        [
          `  churn ${ch.targetRate} VMs/s × ${ch.seconds} s with ${fmtN(e.vms)} VMs cached: VM POST → claim ADDED p50 / p95 / p99`,
          `${fmtMsOf(ch.latencyMs, 'p50', 'p95', 'p99')} (target p99 < ${CHURN_P99_TARGET_MS} ms: ${verdict(ch.latencyMs.p99 < CHURN_P99_TARGET_MS)})`,
        ],
        ['    achieved rate; API server answer to the VM POST p50 / p99', `${ch.achievedRate}/s; ${fmtMsOf(ch.vmPostMs, 'p50', 'p99')}`],
        [
          '    work-queue wait p50 / p99; reconcile p50 / p99',
          `${fmtMsOf(ch.controller, 'queueWaitP50Ms', 'queueWaitP99Ms')}; ${fmtMsOf(ch.controller, 'reconcileP50Ms', 'reconcileP99Ms')}`,
        ],
        ['    peak RSS including the churn', `${e.peakRssAfterChurnMiB} MiB`],
        ['    load average (1 min) before → after', `${ch.loadavgBefore[0]} → ${ch.loadavgAfter[0]}`],
      );
    }
  }
  show({
    id: 'scales',
    title: 'Memory, CPU and logs by cluster size, controller started as the Deployment starts it',
    rows,
    notes: [
      "Each size on a fresh control plane. The controller gets the Deployment's args and environment (NODE_OPTIONS, MALLOC_ARENA_MAX); only bind addresses (127.0.0.1 ports), the webhook certificate dir (temp), and --kubeconfig differ (--qps/--burst/--concurrency only when given to the benchmark; the report says which). POD_NAMESPACE is persistent-ips-system (Lease and webhook Secret there).",
      "Peak RSS is the kernel's VmHWM from spawn to the end of the step; steady RSS the median VmRSS over the last 15 s of a 30 s wait after the controller went idle.",
    ],
    json: { shipped, limitMiB, idle, entries: entries.map((e) => ({ ...e, cold: { ...e.cold, series: undefined } })) },
  });
  return { k8sVersion, ...(firstSetup ? { setup: firstSetup } : {}), commands };
}
