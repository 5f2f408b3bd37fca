// The controller under test, as its own process (`node dist/cli/main.js run ...`, exactly what a Deployment runs),
// with its readiness, its /metrics and its memory sampled once a second.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../e2e/harness/controlplane.ts';
import { ControllerProcess as E2eController, parsePrometheus, sumOf, type Sample } from '../../e2e/local/controller-process.ts';
import { bucketDelta, buckets } from './prom.ts';
import { procCpuSeconds, procMemory, type ProcMemory } from './proc.ts';
import { round } from './stats.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { localArgs, shippedController } from './deployment.ts';
import type { BenchContext } from './scenarios.ts';

export const CONTROLLER_ENTRY = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const CONTROLLER = 'virtualmachine-ipamclaims';
/** POD_NAMESPACE of every controller the benchmark starts: where the Lease and the webhook Secret go. */
export const CONTROLLER_NAMESPACE = 'persistent-ips-system';
export const CONTROLLER_POD_NAME = 'persistent-ips-controller-bench';

export interface ControllerSettings {
  /** The values in effect for the controller (the Deployment's unless given to the benchmark), which the limit
   * client uses too. */
  concurrency: number;
  qps: number;
  burst: number;
  /** Flags the benchmark's user gave explicitly: only these are passed to the controller, replacing the
   * Deployment's. Default: none, so the controller runs with the Deployment's own args. */
  overridden?: readonly ('concurrency' | 'qps' | 'burst')[];
  resyncSeconds: number;
  /** Default: the Deployment's --log-level. */
  logLevel?: string;
  /** --namespace: watch one namespace only (the paired ratio rounds use it to keep N fixed). */
  namespace?: string;
}

export interface MemorySample {
  /** Seconds since the process was spawned. */
  t: number;
  /** /proc VmRSS and VmHWM. */
  rssKb: number;
  hwmKb: number;
  /** From the controller's /metrics (prom-client defaults). */
  residentBytes?: number;
  heapUsedBytes?: number;
  heapTotalBytes?: number;
  /** nodejs_eventloop_lag_max_seconds at this scrape (prom-client resets it per scrape), ms. */
  eventLoopLagMaxMs?: number;
}

export type RuntimeStats = Awaited<ReturnType<ControllerProcess['runtimeStats']>>;
export type MemorySummary = ReturnType<ControllerProcess['memory']>;

/** Every controller started and not stopped yet: stopControllers() stops them when a run ends or fails. */
const live = new Set<ControllerProcess>();

export async function stopControllers(): Promise<void> {
  for (const c of live) await c.stop().catch(() => undefined);
}

export class ControllerProcess {
  readonly name: string;
  /** The command line, with the per-run ports, kubeconfig and certificate dir replaced by placeholders. */
  readonly commandLine: string;
  readonly spawnAt: number;
  readonly #p: E2eController;
  /** The webhook's admission endpoint (HTTPS, the controller's own certificate). */
  readonly webhookUrl: string;
  readonly #samples: MemorySample[] = [];
  #sampler: NodeJS.Timeout | undefined;
  #lastHwmKb = 0;
  #lastCpu = 0;
  /** performance.now() of the first answer (any status) from the probe server: the process is up and connected. */
  firstProbeAnswerAt: number | undefined;

  private constructor(name: string, p: E2eController, commandLine: string, spawnAt: number) {
    this.name = name;
    this.#p = p;
    this.commandLine = commandLine;
    this.spawnAt = spawnAt;
    this.webhookUrl = `https://127.0.0.1:${p.webhookPort}/mutate-v1-pod`;
  }

  /**
   * Spawns the controller on the context's control plane (through e2e's ControllerProcess, with the Deployment's args
   * and env, the context's settings, node flags and `moreNodeArgs`, entry and env) and waits until its
   * metrics server answers (or it exits). The ports are found free just before; when another process takes one in
   * between (EADDRINUSE in the log), it retries with new ports and a new spawn time, up to 3 times.
   */
  static async startIn(ctx: BenchContext, name: string, moreNodeArgs: string[] = []): Promise<ControllerProcess> {
    const shipped = shippedController();
    const certDir = join(ctx.dir, `webhook-certs-${name}`);
    mkdirSync(certDir, { recursive: true });
    const s = ctx.settings;
    const kubeconfig = ctx.cp.kubeconfigPath;
    const nodeArgs = [...ctx.nodeArgs, ...moreNodeArgs];
    const entry = ctx.controllerEntry ?? CONTROLLER_ENTRY;
    // An experiment's own environment (bench/paired.ts arms) goes last, over the Deployment's.
    const extra = ctx.controllerEnv ?? {};
    for (let attempt = 1; ; attempt++) {
      let args: string[] = [];
      let spawnAt = 0;
      const webhookPort = await freePort();
      const p = await E2eController.start({
        name: attempt > 1 ? `${name}.${attempt}` : name,
        kubeconfig,
        logDir: ctx.dir,
        webhookPort,
        waitReady: false,
        command: (probePort, metricsPort) => {
          // The Deployment's own args; only what points into the pod (bind addresses, certificate dirs) becomes
          // local, plus the kubeconfig, and --concurrency/--qps/--burst only when the benchmark's user asked for
          // other values.
          args = localArgs(shipped.args, {
            '--kubeconfig': kubeconfig,
            '--metrics-bind-address': `127.0.0.1:${metricsPort}`,
            // The benchmark scrapes /metrics once a second over plain HTTP; the Deployment's authenticated HTTPS
            // scrape (TokenReview per new token) is not what is measured here.
            '--metrics-secure': 'false',
            '--health-probe-bind-address': `127.0.0.1:${probePort}`,
            '--webhook-bind-address': `127.0.0.1:${webhookPort}`,
            '--webhook-cert-dir': certDir,
            ...Object.fromEntries((s.overridden ?? []).map((k) => [`--${k}`, String(s[k])])),
            '--resync-period': String(s.resyncSeconds),
            ...(s.logLevel ? { '--log-level': s.logLevel } : {}),
            ...(s.namespace ? { '--namespace': s.namespace } : {}),
          });
          spawnAt = performance.now();
          // POD_NAME as the Deployment's downward API gives it; the benchmark never runs two controllers at once, so
          // each new process is what a restarted container of one pod would be.
          const env = { ...process.env, ...shipped.env, NODE_OPTIONS: shipped.nodeOptions, POD_NAMESPACE: CONTROLLER_NAMESPACE, POD_NAME: CONTROLLER_POD_NAME };
          return { args: [...nodeArgs, entry, ...args], env: { ...env, ...extra } };
        },
      });
      // An experiment's environment (K=V ...) and entry are shown; NODE_OPTIONS is the Deployment's unless it set its own.
      const shownEnv = Object.entries(extra).flatMap(([k, v]) => (k === 'NODE_OPTIONS' ? [] : [`${k}=${v} `]));
      const shownEntry = entry === CONTROLLER_ENTRY ? 'dist/cli/main.js' : `${entry} (EXPERIMENT)`;
      const shownArgs = args.map((a) =>
        a
          .replace(/^(--kubeconfig=).*/, '$1KUBECONFIG')
          .replace(/^(--webhook-cert-dir=).*/, '$1TMP')
          .replace(/^(--[a-z-]+-bind-address=)127\.0\.0\.1:\d+$/, '$1127.0.0.1:PORT'),
      );
      const nodeOptions = extra.NODE_OPTIONS ?? shipped.nodeOptions;
      const commandLine = `${shownEnv.join('')}NODE_OPTIONS=${nodeOptions || "''"} node ${[...nodeArgs, shownEntry, ...shownArgs].join(' ')}`;
      const c = new ControllerProcess(name, p, commandLine, spawnAt);
      live.add(c);
      c.#startSampling();
      // Up, or still starting after a minute: the caller's waits take it from here.
      if ((await c.#upOrExited(60_000)) || !c.exited) return c;
      await c.stop();
      const output = [...c.#p.otherOutput, ...c.#p.logs.map((l) => JSON.stringify(l))];
      if (attempt < 3 && output.some((l) => /EADDRINUSE/.test(l))) continue;
      return c; // exited for another reason: the caller's first wait reports it with the log
    }
  }

  /** Whether the metrics server answers, polled every 50 ms (a local call, not the API server). */
  async #upOrExited(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline && this.#p.alive) {
      try {
        await this.#p.metrics();
        return true;
      } catch {
        await sleep(50);
      }
    }
    return false;
  }

  get pid(): number {
    return this.#p.pid;
  }

  get exited(): boolean {
    return !this.#p.alive;
  }

  /** Rejects as soon as the process exits (for racing against a wait). Call `cancel` once the wait is over. */
  deathWatch(): { died: Promise<never>; cancel(): void } {
    let active = true;
    const died = this.#p.exited.then((): Promise<never> => {
      if (active) this.#check();
      return new Promise<never>(() => {});
    });
    died.catch(() => undefined);
    return { died, cancel: () => void (active = false) };
  }

  #check(): void {
    const died = this.#p.diedReason();
    if (died) throw new Error(`${died}\nits log: ${this.#p.logFile}`);
  }

  /** Polls /readyz (a local HTTP call to the controller, not the API server) every 50 ms; returns performance.now(). */
  async waitReady(timeoutMs = 300_000): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      this.#check();
      const status = await this.#p.probe('readyz');
      if (status !== 0) this.firstProbeAnswerAt ??= performance.now();
      if (status === 200) return performance.now();
      if (performance.now() > deadline) throw new Error(`controller ${this.name} not ready after ${timeoutMs} ms`);
      await sleep(50);
    }
  }

  async metrics(): Promise<Sample[]> {
    this.#check();
    return this.#p.metrics();
  }

  /** Reconciles so far and the queue's state. */
  async queueState(): Promise<{ reconciles: number; adds: number; depth: number; active: number; apiRequests: number }> {
    const m = await this.metrics();
    return {
      reconciles: sumOf(m, 'controller_runtime_reconcile_total', { controller: CONTROLLER }),
      adds: sumOf(m, 'workqueue_adds_total', { name: CONTROLLER }),
      depth: sumOf(m, 'workqueue_depth', { name: CONTROLLER }),
      active: sumOf(m, 'controller_runtime_active_workers', { controller: CONTROLLER }),
      apiRequests: sumOf(m, 'persistent_ips_api_requests_total'),
    };
  }

  /**
   * Waits until the work queue is empty, no worker is busy, at least `minReconciles` reconciles ran, and neither
   * queue adds nor reconciles moved for `quietMs`. Returns the final state.
   */
  async waitIdle(opts: { minReconciles?: number; quietMs?: number; timeoutMs?: number } = {}): Promise<Awaited<ReturnType<ControllerProcess['queueState']>>> {
    const quietMs = opts.quietMs ?? 1500;
    const deadline = performance.now() + (opts.timeoutMs ?? 300_000);
    let last = await this.queueState();
    let stableSince = performance.now();
    for (;;) {
      await sleep(200);
      const now = await this.queueState();
      const idle = now.depth === 0 && now.active === 0 && now.reconciles >= (opts.minReconciles ?? 0);
      if (!idle || now.reconciles !== last.reconciles || now.adds !== last.adds) stableSince = performance.now();
      last = now;
      if (idle && performance.now() - stableSince >= quietMs) return now;
      if (performance.now() > deadline) throw new Error(`controller ${this.name} not idle: ${JSON.stringify(now)}`);
    }
  }

  #startSampling(): void {
    const take = async (): Promise<void> => {
      const mem = this.#readProc();
      if (!mem || Number.isNaN(mem.rssKb)) return;
      const sample: MemorySample = { t: round((performance.now() - this.spawnAt) / 1000), rssKb: mem.rssKb, hwmKb: mem.hwmKb };
      try {
        const res = await fetch(`http://127.0.0.1:${this.#p.metricsPort}/metrics`, { signal: AbortSignal.timeout(900) });
        const m = parsePrometheus(
          await res.text(),
          (n) => n.startsWith('process_resident') || n.startsWith('nodejs_heap_size') || n === 'nodejs_eventloop_lag_max_seconds',
        );
        sample.residentBytes = sumOf(m, 'process_resident_memory_bytes');
        sample.heapUsedBytes = sumOf(m, 'nodejs_heap_size_used_bytes');
        sample.heapTotalBytes = sumOf(m, 'nodejs_heap_size_total_bytes');
        sample.eventLoopLagMaxMs = Math.round(sumOf(m, 'nodejs_eventloop_lag_max_seconds') * 10_000) / 10;
      } catch {
        /* metrics server not up yet, or busy: /proc still counts */
      }
      this.#samples.push(sample);
    };
    void take();
    this.#sampler = setInterval(() => void take(), 1000);
  }

  /** CPU seconds the process has used (last reading while it ran). */
  cpuSeconds(): number {
    return procCpuSeconds(this.#p.pid) ?? this.#lastCpu;
  }

  /**
   * Garbage collections by kind (count, total seconds, how many paused longer than 0.1 s and 1 s; cumulative since
   * start, or since `since`) and the largest event-loop delay the once-a-second samples saw after `fromT`, ms.
   */
  async runtimeStats(since: Sample[] = [], fromT = 0) {
    const now = await this.metrics();
    const gc: Record<string, { count: number; seconds: number; over100ms: number; over1s: number }> = {};
    const kinds = new Set(now.filter((s) => s.name === 'nodejs_gc_duration_seconds_count').map((s) => s.labels.kind ?? ''));
    for (const kind of kinds) {
      const d = bucketDelta(buckets(now, 'nodejs_gc_duration_seconds', { kind }), buckets(since, 'nodejs_gc_duration_seconds', { kind }));
      const delta = (name: string): number => sumOf(now, name, { kind }) - sumOf(since, name, { kind });
      const count = delta('nodejs_gc_duration_seconds_count');
      gc[kind] = { count, seconds: round(delta('nodejs_gc_duration_seconds_sum'), 3), over100ms: count - (d.get(0.1) ?? 0), over1s: count - (d.get(1) ?? 0) };
    }
    const lags = this.#samples.filter((s) => s.t >= fromT && s.eventLoopLagMaxMs !== undefined).map((s) => s.eventLoopLagMaxMs!);
    return { gc, eventLoopLagMaxMs: lags.length ? Math.max(...lags) : null };
  }

  /** Seconds since spawn, on the samples' clock. */
  get uptimeS(): number {
    return (performance.now() - this.spawnAt) / 1000;
  }

  /** memory() with a fresh /proc reading (VmHWM up to now). */
  memoryNow(): MemorySummary {
    this.#readProc();
    return this.memory();
  }

  memory() {
    const max = (xs: (number | undefined)[]): number | null => {
      const v = xs.filter((x): x is number => x !== undefined && x > 0);
      return v.length ? round(Math.max(...v) / 2 ** 20) : null;
    };
    const hwm = Math.max(this.#lastHwmKb, ...this.#samples.map((s) => s.hwmKb));
    return {
      /** Peak RSS (VmHWM, kernel's high-water mark), MiB. */
      peakRssMiB: round(hwm / 1024),
      /** The largest process_resident_memory_bytes, nodejs_heap_size_used_bytes and nodejs_heap_size_total_bytes seen, MiB. */
      peakResidentMetricMiB: max(this.#samples.map((s) => s.residentBytes)),
      peakHeapUsedMiB: max(this.#samples.map((s) => s.heapUsedBytes)),
      peakHeapTotalMiB: max(this.#samples.map((s) => s.heapTotalBytes)),
      samples: this.#samples,
    };
  }

  /** Lines of the controller's JSON log (pino), parsed; non-JSON lines skipped. */
  logLines(): { msg?: string; time?: string; level?: string; [k: string]: unknown }[] {
    return this.#p.logs as { msg?: string; time?: string; level?: string }[];
  }

  /** Reads /proc while the process runs, so that its peak RSS and CPU survive its exit. */
  #readProc(): ProcMemory | undefined {
    const mem = procMemory(this.#p.pid);
    if (mem) this.#lastHwmKb = Math.max(this.#lastHwmKb, mem.hwmKb);
    this.#lastCpu = procCpuSeconds(this.#p.pid) ?? this.#lastCpu;
    return mem;
  }

  async stop(): Promise<void> {
    this.#readProc();
    if (this.#sampler) clearInterval(this.#sampler);
    live.delete(this);
    await this.#p.stop(15_000);
  }
}
