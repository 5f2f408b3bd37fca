// The scenarios, each a function of a running control plane. run.ts decides the order and writes the reports.
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ControlPlane } from '../../e2e/harness/controlplane.ts';
import { claimName } from '../../src/claims/index.ts';
import { requestWindow, type WriteSummary } from './apiserver-requests.ts';
import { ClaimWatch } from './claim-watch.ts';
import { ControllerProcess, type ControllerSettings, type MemorySummary, type RuntimeStats } from './controller.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeHttp } from '../../e2e/harness/kubehttp.ts';
import { paths } from '../../e2e/suite/kube.ts';
import { paced, runPool } from './pool.ts';
import { claimBodies, createNamespace, createVm, createVmi, createVmWithVmi, NETWORKS, vmiStatusPatch, vmName } from './objects.ts';
import { bucketDelta, buckets, histogramQuantile } from './prom.ts';
import { CpuWindow } from './proc.ts';
import { spawnTracked } from './processes.ts';
import type { Section } from './report.ts';
import { cumulative, histogram, mean, pcts, round } from './stats.ts';

const LIMIT_WRITER = fileURLToPath(new URL('./limit-writer.ts', import.meta.url));

export interface BenchContext {
  kube: KubeHttp;
  cp: ControlPlane;
  /** Scratch directory: logs, job files. */
  dir: string;
  settings: ControllerSettings;
  setupConcurrency: number;
  /** Extra `node` flags for every controller process (e.g. --max-old-space-size=128). */
  nodeArgs: string[];
  /** The controller's entry point when not dist/cli/main.js (a bench/paired.ts arm's build). */
  controllerEntry?: string;
  /** Environment for the controllers over the Deployment's (bench/paired.ts arms). */
  controllerEnv?: Record<string, string>;
  log: (line: string) => void;
}

/** What a mode of the benchmark gets: control planes one at a time, a report section printed as soon as it is done. */
export interface Harness {
  /** A fresh control plane (stopping none: call stopCp first). */
  startCp(name: string): Promise<BenchContext>;
  stopCp(): Promise<void>;
  show(section: Section): void;
  log(line: string): void;
}

/** What a mode reports for the run's own section besides its sections. */
export interface ModeRun {
  k8sVersion: string;
  setup?: SetupResult;
  /** The controllers' command lines by step. */
  commands: Record<string, string>;
}

const load = (): number[] => loadavg().map((x) => round(x, 2));

function cpPids(cp: ControlPlane): Record<string, number> {
  return { 'kube-apiserver': cp.pids['kube-apiserver'], etcd: cp.pids.etcd, 'kube-controller-manager': cp.pids['kube-controller-manager'] };
}

function perClaim(w: WriteSummary, claims: number): { claimWritesPerClaim: number; eventWritesPerClaim: number } {
  return { claimWritesPerClaim: round(w.claimWrites / Math.max(1, claims), 4), eventWritesPerClaim: round(w.eventWrites / Math.max(1, claims), 4) };
}

// ---------------------------------------------------------------------------------------------------------------
// Setup

export type SetupResult = Awaited<ReturnType<typeof createVms>>['result'];

/** `n` VMs, each with its VMI, in a fresh namespace with the two persistent NADs. */
export async function createVms(ctx: BenchContext, namespace: string, prefix: string, n: number, withVmis = true) {
  await createNamespace(ctx.kube, namespace);
  const t0 = performance.now();
  const owners: { name: string; uid: string }[] = new Array(n);
  let done = 0;
  const progress = setInterval(() => ctx.log(`  ${namespace}: ${done}/${n} VMs${withVmis ? ' with VMIs' : ''}`), 10_000);
  try {
    await runPool(
      Array.from({ length: n }, (_, i) => vmName(prefix, i)),
      ctx.setupConcurrency,
      async (name, i) => {
        const vm = withVmis ? (await createVmWithVmi(ctx.kube, namespace, name)).vm : await createVm(ctx.kube, namespace, name);
        owners[i] = { name, uid: vm.metadata.uid! };
        done++;
      },
    );
  } finally {
    clearInterval(progress);
  }
  const seconds = (performance.now() - t0) / 1000;
  return {
    result: { namespace, vms: n, seconds: round(seconds), objectsPerSecond: round((n * (withVmis ? 2 : 1)) / seconds, 1) },
    owners,
  };
}

/**
 * Warms the API server's IPAMClaim write path (a fresh kube-apiserver serves its first creates of a CRD slower), so
 * that round 1's cold start does not pay for it while its limit run, which comes after, does not: `count` claims
 * without owner or finalizer in a scratch namespace, which is then deleted (and waited for).
 */
export async function warmUp(ctx: BenchContext, count: number): Promise<number> {
  const t0 = performance.now();
  const ns = 'bench-warmup';
  await createNamespace(ctx.kube, ns, false);
  await runPool(
    Array.from({ length: count }, (_, i) => i),
    4,
    async (i) => {
      await ctx.kube.json('POST', paths.claims(ns), [201], {
        apiVersion: 'k8s.cni.cncf.io/v1alpha1',
        kind: 'IPAMClaim',
        metadata: { name: `warmup-${i}.net-a`, namespace: ns },
        spec: { network: 'warmup', interface: 'pod0' },
      });
    },
  );
  await ctx.kube.json('DELETE', paths.namespaces(ns), [200, 202]);
  for (let i = 0; i < 600; i++) {
    const res = await ctx.kube.request('GET', paths.namespaces(ns));
    if (res.status === 404) break;
    await sleep(200);
  }
  return round((performance.now() - t0) / 1000);
}

// ---------------------------------------------------------------------------------------------------------------
// 1. Cold start, and 2. the limit

/** What a convergence run measures from before its process is spawned: load, API requests, control-plane CPU. */
async function measuring(ctx: BenchContext): Promise<{ loadavgBefore: number[]; window: { end(): Promise<WriteSummary> }; cpu: CpuWindow }> {
  return { loadavgBefore: load(), window: await requestWindow(ctx.kube), cpu: new CpuWindow(cpPids(ctx.cp)) };
}

/** The timings of `claims` claims seen on `watch`, the last at `lastAt`, from a process spawned at `spawnAt`. */
function convergence(watch: ClaimWatch, claims: number, spawnAt: number, lastAt: number) {
  const first = Math.min(...watch.added.values());
  const total = (lastAt - spawnAt) / 1000;
  return {
    claims,
    /** Seconds from process spawn. */
    spawnToFirstClaimS: round((first - spawnAt) / 1000, 3),
    spawnToAllClaimsS: round(total, 3),
    /** First claim → last claim: the write phase alone. */
    writePhaseS: round((lastAt - first) / 1000, 3),
    claimsPerSecond: round(claims / total, 1),
    /** Cumulative claims seen by the watch, [seconds since spawn, count]. */
    series: cumulative(watch.added.values(), spawnAt),
  };
}

export type ColdStartResult = Awaited<ReturnType<typeof coldStart>>['result'];

/**
 * Starts the controller with the VMs already there and times it until the watch has seen all 2N claims. Returns
 * the controller still running.
 */
export async function coldStart(ctx: BenchContext, namespace: string, vms: number, name: string, nodeArgs: string[] = []) {
  const expected = vms * NETWORKS.length;
  const watch = new ClaimWatch(ctx.kube, namespace);
  await watch.start();
  if (watch.added.size !== 0) throw new Error(`${namespace} already has ${watch.added.size} claims`);
  const { loadavgBefore, window, cpu } = await measuring(ctx);
  const controller = await ControllerProcess.startIn(ctx, name, nodeArgs);
  cpu.add('controller', controller.pid);
  try {
    const ready = controller.waitReady(30 * 60_000);
    const progress = setInterval(
      () => ctx.log(`  ${watch.added.size}/${expected} claims after ${((performance.now() - controller.spawnAt) / 1000).toFixed(0)} s`),
      10_000,
    );
    const death = controller.deathWatch();
    let lastAt: number;
    try {
      // A controller that dies must fail the wait at once, not after the timeout.
      lastAt = await Promise.race([watch.waitForCount(expected, 30 * 60_000), death.died]);
    } finally {
      death.cancel();
      clearInterval(progress);
    }
    const cpuSeconds = cpu.end();
    const readyAt = await ready;
    const loadavgAfter = load();
    const idle = await controller.waitIdle({ quietMs: 1500 });
    const runtime = await controller.runtimeStats();
    const writes = await window.end();
    watch.stop();
    const spawnAt = controller.spawnAt;
    return {
      controller,
      result: {
        namespace,
        vms,
        controllerCommand: controller.commandLine,
        /** Spawn → the probe server answers at all (Node started, modules loaded, API server reached). */
        spawnToProcessUpS: controller.firstProbeAnswerAt === undefined ? null : round((controller.firstProbeAnswerAt - spawnAt) / 1000, 3),
        spawnToReadyS: round((readyAt - spawnAt) / 1000, 3),
        ...convergence(watch, expected, spawnAt, lastAt),
        /** CPU seconds per process from spawn to the last claim. */
        cpuSeconds,
        writes,
        ...perClaim(writes, expected),
        /** The controller's own count of API requests and reconciles up to idle. */
        controllerApiRequests: idle.apiRequests,
        reconciles: idle.reconciles,
        /** GC pauses and event-loop delay of the controller from spawn to idle. */
        runtime,
        loadavgBefore,
        loadavgAfter,
      },
    };
  } catch (err) {
    watch.stop();
    await controller.stop();
    throw err;
  }
}

export type LimitResult = Awaited<ReturnType<typeof limit>>;

/**
 * The fastest this API server absorbs the same 2N creates: a bare client process with the controller's
 * concurrency and QPS/burst, in a fresh namespace, with real owner VMs (so that the garbage collector treats the
 * claims exactly as the controller's). No controller may run meanwhile.
 */
export async function limit(ctx: BenchContext, namespace: string, vms: number, client: 'https' | 'project' = 'https') {
  const { result: setup, owners } = await createVms(ctx, namespace, 'limit', vms, false);
  const bodies = owners.flatMap((o) => claimBodies(namespace, o));
  const jobFile = join(ctx.dir, `limit-${namespace}.json`);
  const resultFile = join(ctx.dir, `limit-${namespace}.result.json`);
  const { concurrency, qps, burst } = ctx.settings;
  const { server, token, caFile, kubeconfigPath: kubeconfig } = ctx.cp;
  writeFileSync(jobFile, JSON.stringify({ server, token, caFile, kubeconfig, client, concurrency, qps, burst, claims: bodies }), { mode: 0o600 });
  const watch = new ClaimWatch(ctx.kube, namespace);
  await watch.start();
  await sleep(1000); // let the owners' creation settle (garbage collector graph, watch caches)
  const { loadavgBefore, window, cpu } = await measuring(ctx);
  const spawnAt = performance.now();
  const writer = spawnTracked('limit-writer', process.execPath, [LIMIT_WRITER, jobFile, resultFile], join(ctx.dir, `limit-writer-${namespace}.log`));
  try {
    const writerDone = writer.exited.then(async (code) => {
      if (code !== 0) throw new Error(`limit writer exited with ${code}: ${readFileSync(writer.logFile, 'utf8').slice(-2000)}`);
      return watch.waitForCount(bodies.length, 60_000);
    });
    writerDone.catch(() => undefined);
    const lastAt = await Promise.race([watch.waitForCount(bodies.length, 30 * 60_000), writerDone]);
    const cpuSeconds = cpu.end();
    const loadavgAfter = load();
    const code = await writer.exited;
    if (code !== 0) throw new Error(`limit writer exited with ${code}`);
    const report = JSON.parse(readFileSync(resultFile, 'utf8')) as { posted: number; cpuSeconds: number };
    await sleep(1500);
    const writes = await window.end();
    return {
      namespace,
      /** `https`: the bare node:https client (the limit). `project`: the controller's own KubeClient (a diagnostic). */
      client,
      concurrency,
      qps,
      burst,
      ownersSetupSeconds: setup.seconds,
      ...convergence(watch, bodies.length, spawnAt, lastAt),
      cpuSeconds: { ...cpuSeconds, 'limit-writer': round(report.cpuSeconds, 2) },
      writes,
      ...perClaim(writes, bodies.length),
      loadavgBefore,
      loadavgAfter,
    };
  } finally {
    watch.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// 4. Steady state

export type SteadyStepResult = ReturnType<typeof steadyStep>;

/** (b) A status change on every VMI of `namespace` (phase, launcher pod, interfaces, a condition). */
export async function vmiStatusUpdates(ctx: BenchContext, controller: ControllerProcess, namespace: string, vms: number): Promise<SteadyStepResult> {
  const before = await controller.queueState();
  const window = await requestWindow(ctx.kube);
  const t0 = performance.now();
  await runPool(
    Array.from({ length: vms }, (_, i) => vmName('cold', i)),
    ctx.setupConcurrency,
    // KubeVirt's VMI CRD has no status subresource: virt-controller patches status on the object itself.
    async (name) => {
      await ctx.kube.json('PATCH', paths.vmis(namespace, name), [200], vmiStatusPatch(1), 'application/merge-patch+json');
    },
  );
  const patchSeconds = (performance.now() - t0) / 1000;
  const idle = await controller.waitIdle({ quietMs: 2500 });
  const writes = await window.end();
  return steadyStep('vmi-status', `status of all ${vms} VMIs patched (phase Running, activePods, interfaces, Ready condition)`, writes, t0, {
    reconciles: idle.reconciles - before.reconciles,
    detail: { vmiStatusPatches: vms, patchSeconds: round(patchSeconds), queueAdds: idle.adds - before.adds },
  });
}

/** A step's result: the API server's count of writes in it, the reconciles it caused (shows it reached the controller), its duration since `t0`. */
function steadyStep(step: string, description: string, writes: WriteSummary, t0: number, r: { reconciles: number; detail: Record<string, unknown> }) {
  const { claimWrites, eventWrites } = writes;
  return { step, description, claimWrites, eventWrites, reconciles: r.reconciles, seconds: round((performance.now() - t0) / 1000), writes, detail: r.detail };
}

/** (c), first half: stops a controller (SIGTERM, graceful drain); the writes it makes on the way out. */
export async function stopController(
  ctx: BenchContext,
  controller: ControllerProcess,
): Promise<{ writes: WriteSummary; seconds: number; memory: MemorySummary }> {
  const window = await requestWindow(ctx.kube);
  const t0 = performance.now();
  await controller.stop();
  const seconds = (performance.now() - t0) / 1000;
  await sleep(500);
  return { writes: await window.end(), seconds: round(seconds), memory: controller.memory() };
}

/**
 * (c), second half: a new controller process on a cluster whose claims all exist; counted until it has reconciled
 * every key once. `stopped` is the first half, added to the figures.
 */
export async function restart(
  ctx: BenchContext,
  keys: number,
  name: string,
  stopped: { writes: WriteSummary; seconds: number },
): Promise<{ result: SteadyStepResult; controller: ControllerProcess }> {
  const window = await requestWindow(ctx.kube);
  const t0 = performance.now();
  const controller = await ControllerProcess.startIn(ctx, name);
  const readyAt = await controller.waitReady();
  const idle = await controller.waitIdle({ minReconciles: keys, quietMs: 2000 });
  const writes = await window.end();
  // Timed from the shutdown's start, and its writes count too.
  const description = `controller stopped (SIGTERM), later a new process started; counted over the shutdown and until the new one had reconciled all ${keys} keys`;
  const result = steadyStep('restart', description, writes, t0 - stopped.seconds * 1000, {
    reconciles: idle.reconciles,
    detail: {
      shutdownSeconds: stopped.seconds,
      shutdownClaimWrites: stopped.writes.claimWrites,
      spawnToReadyS: round((readyAt - controller.spawnAt) / 1000, 3),
      spawnToIdleS: round((performance.now() - controller.spawnAt) / 1000, 3),
      controllerCommand: controller.commandLine,
    },
  });
  return {
    controller,
    result: { ...result, claimWrites: stopped.writes.claimWrites + writes.claimWrites, eventWrites: stopped.writes.eventWrites + writes.eventWrites },
  };
}

/** (a) With a controller started with a short --resync-period: counts across at least one full resync pass. */
export async function resync(ctx: BenchContext, controller: ControllerProcess, keys: number): Promise<SteadyStepResult> {
  await controller.waitReady();
  await controller.waitIdle({ minReconciles: keys, quietMs: 1000 });
  const before = await controller.queueState();
  const window = await requestWindow(ctx.kube);
  const since = Date.now();
  const t0 = performance.now();
  const deadline = t0 + (ctx.settings.resyncSeconds * 4 + 60) * 1000;
  let passes: { keys?: number }[] = [];
  const after = (l: { msg?: string; time?: string }): boolean => l.msg === 'resync' && Date.parse(l.time ?? '') > since;
  for (;;) {
    passes = controller.logLines().filter(after) as { keys?: number }[];
    if (passes.length >= 1) break;
    if (performance.now() > deadline) throw new Error(`no 'resync' log line from controller ${controller.name} within ${Math.round((deadline - t0) / 1000)} s`);
    await sleep(200);
  }
  const passKeys = passes[0]?.keys ?? keys;
  const idle = await controller.waitIdle({ minReconciles: before.reconciles + passKeys, quietMs: 1000 });
  passes = controller.logLines().filter(after) as { keys?: number }[];
  const writes = await window.end();
  const description = `controller run with --resync-period ${ctx.settings.resyncSeconds}; counted across ${passes.length} full resync pass(es) of ${passKeys} keys`;
  return steadyStep('resync', description, writes, t0, {
    reconciles: idle.reconciles - before.reconciles,
    detail: { resyncPasses: passes.length, keysPerPass: passKeys, controllerCommand: controller.commandLine },
  });
}

// ---------------------------------------------------------------------------------------------------------------
// 5. Churn

export type ChurnResult = Awaited<ReturnType<typeof churn>>;

export async function churn(ctx: BenchContext, controller: ControllerProcess, namespace: string, rate: number, seconds: number) {
  await createNamespace(ctx.kube, namespace);
  const watch = new ClaimWatch(ctx.kube, namespace);
  await watch.start();
  const total = Math.round(rate * seconds);
  const loadavgBefore = load();
  const window = await requestWindow(ctx.kube);
  const vmPost: number[] = new Array(total);
  const vmiPost: number[] = new Array(total);
  const metricsBefore = await controller.metrics();
  const uptimeBefore = controller.uptimeS;
  const {
    t0,
    sentAt,
    seconds: genSeconds,
    maxLagMs: maxLag,
  } = await paced(total, rate, async (i, sent) => {
    const vm = await createVm(ctx.kube, namespace, vmName('churn', i));
    const between = performance.now();
    vmPost[i] = between - sent;
    await createVmi(ctx.kube, vm);
    vmiPost[i] = performance.now() - between;
  });
  await watch.waitForCount(total * NETWORKS.length, 180_000);
  const loadavgAfter = load();
  await controller.waitIdle({ quietMs: 1500 });
  const metricsAfter = await controller.metrics();
  const runtime = await controller.runtimeStats(metricsBefore, uptimeBefore);
  const writes = await window.end();
  watch.stop();
  const hq = (name: string, q: number): number => round(histogramQuantile(q, bucketDelta(buckets(metricsAfter, name), buckets(metricsBefore, name))) * 1000, 1);

  const perClaimMs: number[] = [];
  const perVmMs: number[] = [];
  for (let i = 0; i < total; i++) {
    const name = vmName('churn', i);
    let worst = 0;
    for (const net of NETWORKS) {
      const at = watch.added.get(claimName(name, net));
      if (at === undefined) throw new Error(`claim ${name}.${net} not seen`);
      const ms = at - sentAt[i]!;
      perClaimMs.push(ms);
      worst = Math.max(worst, ms);
    }
    perVmMs.push(worst);
  }
  const r = (x: number): number => round(x, 1);
  const worstPerBucket = (values: number[]): [number, number][] => {
    const m = new Map<number, number>();
    values.forEach((v, i) => {
      const b = Math.floor((sentAt[i]! - t0) / 500) / 2;
      m.set(b, Math.max(m.get(b) ?? 0, v));
    });
    return [...m.entries()].sort((a, b) => a[0] - b[0]).map(([t, v]): [number, number] => [t, r(v)]);
  };
  return {
    namespace,
    targetRate: rate,
    seconds,
    vms: total,
    claims: perClaimMs.length,
    achievedRate: round(total / genSeconds, 2),
    /** Largest delay of a scheduled VM creation behind its slot (the generator's own lateness). */
    maxScheduleLagMs: r(maxLag),
    /** Per claim: VM POST sent → claim ADDED received. */
    latencyMs: { ...pcts(perClaimMs, 1), mean: r(mean(perClaimMs)), min: r(Math.min(...perClaimMs)) },
    /** Per VM: until both of its claims existed. */
    perVmLatencyMs: pcts(perVmMs, 1),
    histogram: histogram(perClaimMs, [10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000]),
    /** The API server's answer time to the benchmark's own VM POSTs and VMI POSTs: what any client saw. */
    vmPostMs: pcts(vmPost, 1),
    vmiPostMs: pcts(vmiPost, 1),
    /** From the controller's histograms over the churn (interpolated in buckets): time in the work queue, reconcile time. */
    controller: {
      queueWaitP50Ms: hq('workqueue_queue_duration_seconds', 0.5),
      queueWaitP99Ms: hq('workqueue_queue_duration_seconds', 0.99),
      reconcileP50Ms: hq('controller_runtime_reconcile_time_seconds', 0.5),
      reconcileP99Ms: hq('controller_runtime_reconcile_time_seconds', 0.99),
      runtime,
    },
    /** Worst per-VM latency (both claims) and worst VM POST time per half second, [seconds since start, ms]. */
    latencySeries: worstPerBucket(perVmMs),
    vmPostSeries: worstPerBucket(vmPost),
    writes,
    ...perClaim(writes, perClaimMs.length),
    /** Claims seen over the run, [seconds since start, count]. */
    series: cumulative(watch.added.values(), t0),
    loadavgBefore,
    loadavgAfter,
  };
}

/** A report row: the controller's collections by kind (with how many took over 0.1 s) and its worst event-loop delay. */
export function gcRow(r: RuntimeStats): string {
  const gc = Object.entries(r.gc)
    .filter(([, v]) => v.count > 0)
    .map(([k, v]) => `${k} ${v.count}× ${v.seconds.toFixed(2)} s${v.over100ms ? ` (${v.over100ms} > 0.1 s)` : ''}`)
    .join(', ');
  return `${gc || 'none'}; worst event-loop delay ${r.eventLoopLagMaxMs ?? 'n/a'} ms`;
}
