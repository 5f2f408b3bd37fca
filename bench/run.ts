// `npm run bench`: the controller against a real local control plane (etcd + kube-apiserver +
// kube-controller-manager, e2e/harness), plus the allocator figures. See docs/benchmarks/README.md; options: --help.
//
// Order (one control plane, in its own temp dir; the large cold start gets a fresh one):
//   setup      N VMs, each with its VMI and 2 persistent networks, before any controller runs; then the API
//              server's claim write path is warmed up (scratch namespace, deleted again)
//   1          cold start: controller A spawned; time until the watch has seen all 2N claims
//   4b         status patch on every VMI (A running)
//   4c (1/2)   A stopped
//   2          the limit: a bare client creates 2N claims (same shape, concurrency, QPS) in a fresh namespace
//   2b         diagnostic: the same through the controller's KubeClient, without a controller
//   4c (2/2)   controller B started; counted until it reconciled every key
//   5          churn: VMs (with VMIs) created at a fixed rate; latency to claim (B running)
//   4a         B stopped; controller C with a short --resync-period; counted across a full resync pass
//   1–2 again  rounds 2..R of (cold start, limit) pairs in fresh namespaces, namespace-scoped controllers
//   6          large cold start at --max-vms on a fresh control plane (memory), unless --skip-large
//   7          allocator benchmark
// Writes per claim (3) come from the API server's apiserver_request_total around each step.

import { execFileSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pinnedVersions } from '../e2e/harness/index.ts';
import { allocatorRows, runAllocatorBench, type AllocatorBenchResult } from './allocator.ts';
import { runScales } from './scales.ts';
import { ControllerProcess, stopControllers, type ControllerSettings, type MemorySummary } from './lib/controller.ts';
import { shippedClientSettings } from './lib/deployment.ts';
import { killAllSync, stopAll } from './lib/processes.ts';
import { startWorld, type World } from './lib/world.ts';
import { fmtMs, fmtMsOf, fmtN, fmtS, textTable, verdict, writeReport, type Row, type Section } from './lib/report.ts';
import {
  churn,
  coldStart,
  createVms,
  gcRow,
  limit,
  restart,
  resync,
  stopController,
  vmiStatusUpdates,
  warmUp,
  type BenchContext,
  type Harness,
  type ModeRun,
  type ChurnResult,
  type ColdStartResult,
  type LimitResult,
  type SetupResult,
  type SteadyStepResult,
} from './lib/scenarios.ts';
import { median, round } from './lib/stats.ts';
import { barChart, lineChart } from './lib/svg.ts';

const REPO = resolve(new URL('..', import.meta.url).pathname);
const RATIO_TARGET = 1.2;
const RSS_TARGET_MIB = 150;

const USAGE = `npm run bench -- [options]

  --vms N              VMs for the main scenarios (default 2000; 2 claims each)
  --max-vms M          VMs for the large cold start on a fresh control plane (memory at scale; default 10000)
  --skip-large         no large cold start
  --churn-rate R       VMs created per second in the churn scenario (default 50)
  --churn-seconds S    duration of the churn (default 60)
  --concurrency C      controller --concurrency, and the limit client's parallel requests (default: the
                       Deployment's, i.e. its args over the CLI defaults; the controller gets the flag only if given)
  --qps Q --burst B    client-side rate limit of the controller and of the limit client (default: the Deployment's;
                       the controller gets the flags only if given)
  --resync-seconds S   --resync-period of the controller for the resync step (default 5)
  --setup-concurrency  parallel requests of the benchmark's own setup writes (default 16)
  --out DIR            where the reports go (default docs/benchmarks/latest)
  --allocator-runs K   repetitions of the allocator benchmark (default 5); --skip-allocator to leave it out
  --rounds R           paired cold-start/limit measurements for the ratio (default 3; the median is reported).
                       Round 1 is the cluster-wide cold start; rounds 2..R each get fresh namespaces and a
                       controller scoped to its namespace (--namespace), alternating which of the pair goes first
  --skip-diagnostics   leave out the second limit run through the controller's own KubeClient
  --node-args "..."    extra node flags for every controller process (e.g. "--max-old-space-size=128")
  --cpu-prof           run the cold-start controller with --cpu-prof (profile kept in the temp dir)
  --keep-temp          keep the temp dir (control plane data, controller logs) after a successful run
  --scales N[,M...]    instead of the scenarios above: for each N, a fresh control plane, the idle controller
                       (caches synced, no VMs; first N only), then a cold start of N VMs x 2 networks; reports
                       idle / peak / steady RSS against the Deployment's memory limit, CPU per claim, log lines
  --scale-churn        with --scales: churn (--churn-rate, --churn-seconds) after the largest cold start,
                       with the same controller (all N VMs in its caches)
  --outage-seconds S   with --scales: after the first cold start, kube-apiserver is stopped S seconds and started
                       again; reports how soon a VM created right then gets its claims
  --webhook-burst P    with --scales: after each cold start has settled, P launcher-pod admissions sent to the
                       webhook at once (default 500; 0 for none); reports server- and client-side latency and the
                       API reads the webhook made meanwhile
  --compare-ie PATH    with --scales: after each size, the same cold start by kubevirt/ipam-extensions' manager
                       (PATH: built by bench/ipam-extensions/build.sh) on a fresh control plane; reports its memory,
                       CPU and convergence next to this project's (it needs ports 8080 and 9443 free)`;

function checkedBinary(path: string): string {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`--compare-ie: ${path} is not an executable file (build it with bench/ipam-extensions/build.sh)`);
  }
  return path;
}

/** Numeric flags: [default (undefined: the Deployment's, and not passed to the controller), minimum, whole numbers only]. */
const NUMERIC = {
  vms: [2000, 1, true],
  'max-vms': [10_000, 1, true],
  'churn-rate': [50, 0.1, false],
  'churn-seconds': [60, 1, false],
  concurrency: [undefined, 1, true],
  qps: [undefined, 1, false],
  burst: [undefined, 1, true],
  'resync-seconds': [5, 1, false],
  'setup-concurrency': [16, 1, true],
  'allocator-runs': [5, 1, true],
  rounds: [3, 1, true],
  'outage-seconds': [0, 0, false],
  'webhook-burst': [500, 0, false],
} as const;
const BOOLEAN = ['skip-large', 'skip-allocator', 'skip-diagnostics', 'cpu-prof', 'keep-temp', 'scale-churn'] as const;

type Camel<S extends string> = S extends `${infer A}-${infer B}` ? `${A}${Capitalize<Camel<B>>}` : S;
const camel = (flag: string): string => flag.replace(/-(.)/g, (_, c: string) => c.toUpperCase());

export type Options = { [K in keyof typeof NUMERIC as Camel<K>]: (typeof NUMERIC)[K][0] extends number ? number : number | undefined } & {
  [K in (typeof BOOLEAN)[number] as Camel<K>]: boolean;
} & { out: string; nodeArgs: string[]; scales: number[]; compareIe?: string };

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...Object.fromEntries(Object.keys(NUMERIC).map((k) => [k, { type: 'string' as const }])),
      ...Object.fromEntries(BOOLEAN.map((k) => [k, { type: 'boolean' as const }])),
      out: { type: 'string' },
      'node-args': { type: 'string' },
      scales: { type: 'string' },
      'compare-ie': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const given = values as Record<string, string | boolean | undefined>;
  const o: Record<string, unknown> = {};
  for (const [name, [def, min, whole]] of Object.entries(NUMERIC)) {
    const v = given[name] as string | undefined;
    const n = Number(v);
    if (v !== undefined && (!Number.isFinite(n) || n < min)) throw new Error(`--${name} must be a number ≥ ${min}, got "${v}"`);
    o[camel(name)] = v === undefined ? def : whole ? Math.floor(n) : n;
  }
  for (const name of BOOLEAN) o[camel(name)] = given[name] ?? false;
  return {
    ...(o as Omit<Options, 'out' | 'nodeArgs' | 'scales'>),
    out: resolve(REPO, values.out ?? 'docs/benchmarks/latest'),
    nodeArgs: (values['node-args'] ?? '').split(/\s+/).filter((a) => a !== ''),
    scales: (values.scales ?? '')
      .split(',')
      .filter((x) => x !== '')
      .map((x) => {
        const v = Number(x);
        if (!Number.isInteger(v) || v < 1) throw new Error(`--scales: ${x} is not a VM count`);
        return v;
      }),
    ...(values['compare-ie'] ? { compareIe: checkedBinary(values['compare-ie']) } : {}),
  };
}

const t0 = Date.now();
const log = (line: string): void => {
  process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
};
// A closed stdout (e.g. `| head`) must not kill the run halfway: the reports still get written.
process.stdout.on('error', () => undefined);
const print = (text: string): void => {
  process.stdout.write(`${text}\n`);
};

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

// Read when dist/ has just been built (npm run bench builds, then starts this), not when the reports are written:
// a commit made while a run is going on is not the code that ran.
const commitAtStart = git(['rev-parse', '--short', 'HEAD']);
const dirtySrcAtStart = git(['status', '--porcelain', '--', 'src']) !== '';

// ---------------------------------------------------------------------------------------------------------------
// Sections

type RatioRound = ReturnType<typeof ratioRound>;

function ratioRound(k: number, how: string, c: ColdStartResult, l: LimitResult) {
  return {
    round: k,
    how,
    controllerS: c.spawnToAllClaimsS,
    limitS: l.spawnToAllClaimsS,
    ratio: round3(c.spawnToAllClaimsS / l.spawnToAllClaimsS),
    writePhaseRatio: round3(c.writePhaseS / l.writePhaseS),
    controllerReadyS: c.spawnToReadyS,
    loadavg1: round((c.loadavgBefore[0]! + l.loadavgBefore[0]!) / 2, 2),
    /** CPU per claim from spawn to the last claim, ms: the controller, and the limit client doing the same writes. */
    controllerCpuPerClaimMs: round3((1000 * (c.cpuSeconds.controller ?? NaN)) / c.claims),
    limitCpuPerClaimMs: round3((1000 * (l.cpuSeconds['limit-writer'] ?? NaN)) / l.claims),
  };
}

const round3 = (x: number): number => round(x, 3);

/** E.g. "concurrency 32, --qps 200 --burst 400 (the Deployment's)", naming any value the user gave instead. */
function clientSettingsLabel(s: ControllerSettings): string {
  const given = s.overridden ?? [];
  const origin = given.length === 0 ? "the Deployment's" : `given: ${given.map((k) => `--${k}`).join(', ')}; the rest the Deployment's`;
  return `concurrency ${s.concurrency}, --qps ${s.qps} --burst ${s.burst} (${origin})`;
}

/** CPU seconds by process, e.g. "kube-apiserver 0.6, etcd 0.1, controller 0.5". */
const cpuRow = (c: Record<string, number>): string =>
  Object.entries(c)
    .map(([k, v]) => `${k} ${v.toFixed(1)}`)
    .join(', ');

/** "2.10 ms / 1.93 ms" */
const msPair = (a: number, b: number): string => `${a.toFixed(2)} ms / ${b.toFixed(2)} ms`;

/** A convergence's write phase and its rate, e.g. "4.21 s (950 claims/s)", with `more` inside the parentheses. */
const writePhase = (r: ColdStartResult | LimitResult, more = ''): string => `${fmtS(r.writePhaseS)} (${Math.round(r.claims / r.writePhaseS)} claims/s${more})`;

function coldStartSection(
  cold: ColdStartResult,
  lim: LimitResult,
  settings: ControllerSettings,
  viaProject: LimitResult | undefined,
  rounds: RatioRound[],
): Section {
  const [first] = rounds as [RatioRound];
  const medianRatio = round3(median(rounds.map((r) => r.ratio)));
  const medianWriteRatio = round3(median(rounds.map((r) => r.writePhaseRatio)));
  // One cold start's CPU moves by ±15 % with the load other jobs put on this machine; the median of the rounds less.
  const medianCpu = round3(median(rounds.map((r) => r.controllerCpuPerClaimMs)));
  const medianLimitCpu = round3(median(rounds.map((r) => r.limitCpuPerClaimMs)));
  const projectRatio = viaProject ? round(viaProject.spawnToAllClaimsS / lim.spawnToAllClaimsS, 3) : undefined;
  const rows: Row[] = [
    [`${fmtN(cold.vms)} VMs with VMIs, 2 persistent networks each → ${fmtN(cold.claims)} IPAMClaims`, ''],
    ['client-side rate limit (both)', clientSettingsLabel(settings)],
    ['controller: spawn → probe server up (Node, modules, API server reached)', fmtS(cold.spawnToProcessUpS ?? undefined)],
    ['controller: spawn → /readyz (caches synced)', fmtS(cold.spawnToReadyS)],
    ['controller: spawn → first claim', fmtS(cold.spawnToFirstClaimS)],
    ['controller: spawn → all claims (convergence)', fmtS(cold.spawnToAllClaimsS)],
    ['controller: write phase (first → last claim)', writePhase(cold)],
    ['limit client: spawn → first claim', fmtS(lim.spawnToFirstClaimS)],
    ['limit client: spawn → all claims', fmtS(lim.spawnToAllClaimsS)],
    ['limit client: write phase (first → last claim)', writePhase(lim)],
    ['convergence / limit, this pair (round 1)', first.ratio.toFixed(3)],
    ['write phase alone: controller / limit, round 1', first.writePhaseRatio.toFixed(3)],
    [
      `convergence / limit, MEDIAN of ${rounds.length} paired rounds`,
      `${medianRatio.toFixed(3)} (target ≤ ${RATIO_TARGET}: ${verdict(medianRatio <= RATIO_TARGET)})`,
    ],
    [`write phase alone, median of ${rounds.length} rounds`, medianWriteRatio.toFixed(3)],
    ...rounds.map(
      (r): Row => [
        `  round ${r.round} (${r.how})`,
        `${fmtS(r.controllerS)} / ${fmtS(r.limitS)} = ${r.ratio.toFixed(3)}; write phase ${r.writePhaseRatio.toFixed(3)}; CPU per claim ${r.controllerCpuPerClaimMs.toFixed(2)} / ${r.limitCpuPerClaimMs.toFixed(2)} ms; load ${r.loadavg1}`,
      ],
    ),
    [`controller CPU per claim (spawn → last claim), MEDIAN of ${rounds.length} rounds / limit client's`, msPair(medianCpu, medianLimitCpu)],
    ['CPU seconds during convergence', cpuRow(cold.cpuSeconds)],
    ['CPU seconds during the limit run', cpuRow(lim.cpuSeconds)],
    ['controller CPU per claim / limit client CPU per claim, round 1', msPair(first.controllerCpuPerClaimMs, first.limitCpuPerClaimMs)],
    ['controller GC and event loop (spawn → idle)', gcRow(cold.runtime)],
    ...(viaProject
      ? ([
          ["diagnostic: the same writes through the controller's KubeClient (src/kube), no controller", ''],
          ['  spawn → first claim / all claims', `${fmtS(viaProject.spawnToFirstClaimS)} / ${fmtS(viaProject.spawnToAllClaimsS)}`],
          ['  write phase (first → last claim)', writePhase(viaProject, `; ${(viaProject.writePhaseS / lim.writePhaseS).toFixed(3)} × the limit's`)],
          ['  KubeClient / limit', `${projectRatio!.toFixed(3)}`],
          ['  client CPU per claim', `${((1000 * (viaProject.cpuSeconds['limit-writer'] ?? NaN)) / viaProject.claims).toFixed(2)} ms`],
          ['  CPU seconds', cpuRow(viaProject.cpuSeconds)],
        ] as Row[])
      : []),
    ['load average (1 min) before → after: cold start', `${cold.loadavgBefore[0]} → ${cold.loadavgAfter[0]}`],
    ['load average (1 min) before → after: limit', `${lim.loadavgBefore[0]} → ${lim.loadavgAfter[0]}`],
  ];
  return {
    id: 'cold-start',
    title: `1–2. Cold start at N = ${fmtN(cold.vms)} vs the API server's limit`,
    rows,
    notes: [
      "Convergence: from the controller process spawn until the benchmark's watch on IPAMClaims has received all 2N ADDED events. The limit: the same from the spawn of a bare client process that POSTs the same 2N claim bodies (same owner references, label, finalizer, spec) with the same concurrency and the same token bucket (src/kube/token-bucket.ts), into a fresh namespace whose owner VMs exist.",
      'Both include process start-up (Node, module loading). The controller also lists VMs, VMIs, NADs, claims and the KubeVirt CR before it can write.',
      'Paired rounds: the machine is shared with other jobs, so its load changes from minute to minute. Each round measures a cold start and a limit run back to back (rounds 2.. alternate which goes first, in fresh namespaces, with the controller scoped to its namespace by --namespace so that it lists exactly N VMs); the target is checked on the median of the per-round ratios.',
      "Diagnostic (round 1 only): the same 2N creates through the controller's own KubeClient (src/kube/client.ts, as in production) from a bare process without any controller logic, to separate the HTTP client's cost from the rest of the controller.",
    ],
    json: {
      ratio: medianRatio,
      ratioRound1: first.ratio,
      medianWritePhaseRatio: medianWriteRatio,
      medianControllerCpuPerClaimMs: medianCpu,
      medianLimitCpuPerClaimMs: medianLimitCpu,
      rounds,
      ratioTarget: RATIO_TARGET,
      controller: cold,
      limit: lim,
      ...(viaProject ? { kubeClientDiagnostic: { ratioToLimit: projectRatio, ...viaProject } } : {}),
    },
    svg: lineChart({
      title: `Claims over time, N = ${fmtN(cold.vms)} VMs (${fmtN(cold.claims)} claims)`,
      xLabel: 'seconds since process spawn',
      yLabel: 'IPAMClaims seen by the watch',
      series: [
        { name: `controller (${cold.spawnToAllClaimsS.toFixed(2)} s)`, points: cold.series },
        { name: `limit client (${lim.spawnToAllClaimsS.toFixed(2)} s)`, points: lim.series },
        ...(viaProject ? [{ name: `KubeClient only (${viaProject.spawnToAllClaimsS.toFixed(2)} s)`, points: viaProject.series, color: '#999999' }] : []),
      ],
    }),
  };
}

function writesSection(entries: [string, Pick<ColdStartResult, 'claims' | 'writes' | 'claimWritesPerClaim' | 'eventWritesPerClaim'>][]): Section {
  const json = entries.map(([scenario, r]) => ({
    scenario,
    claimsCreated: r.claims,
    claimWrites: r.writes.claimWrites,
    claimWritesBy: r.writes.claimWritesBy,
    claimWritesPerClaim: r.claimWritesPerClaim,
    eventWrites: r.writes.eventWrites,
    eventWritesPerClaim: r.eventWritesPerClaim,
  }));
  const rows = json.flatMap((j): Row[] => {
    const by = Object.entries(j.claimWritesBy).map(([k, v]) => `${k}: ${v}`);
    return [
      [`${j.scenario}: ${fmtN(j.claimsCreated)} claims created`, ''],
      [
        '  ipamclaims writes per claim (target 1.0)',
        `${j.claimWritesPerClaim} (${j.claimWrites} writes${by.length ? `; ${by.join(', ')}` : ''}) ${verdict(j.claimWritesPerClaim === 1)}`,
      ],
      ['  event writes per claim', `${j.eventWritesPerClaim} (${j.eventWrites})`],
    ];
  });
  return {
    id: 'writes',
    title: '3. Write amplification (counted by the API server)',
    rows,
    notes: [
      "From the API server's own apiserver_request_total, scraped before and after each scenario and diffed per {verb, resource, subresource, code}. Writes = POST/PUT/PATCH/DELETE/APPLY on ipamclaims (any subresource, any code, so failed attempts count too).",
    ],
    json,
    svg: barChart({
      title: 'IPAMClaim writes per claim created',
      yLabel: 'writes per claim',
      bars: json.map((j) => ({ label: j.scenario, value: j.claimWritesPerClaim, text: String(j.claimWritesPerClaim) })),
      target: { y: 1, label: 'target 1.0' },
    }),
  };
}

function steadySection(steps: SteadyStepResult[]): Section {
  const rows = steps.flatMap((s): Row[] => [
    [`${s.step}: ${s.description}`, ''],
    ['  ipamclaims writes (target 0)', `${s.claimWrites} ${verdict(s.claimWrites === 0)}`],
    ['  event writes', String(s.eventWrites)],
    ['  reconciles during the step', fmtN(s.reconciles)],
    ['  duration', fmtS(s.seconds)],
  ]);
  return {
    id: 'steady-state',
    title: '4. Steady state: writes caused by resync, VMI status updates and a restart',
    rows,
    notes: ["Reconciles show that each step reached the controller; the writes are the API server's count on ipamclaims during the step."],
    json: steps,
    svg: barChart({
      title: 'Steady state: reconciles run, IPAMClaim writes caused',
      yLabel: 'reconciles',
      bars: steps.map((s) => ({ label: s.step, value: s.reconciles, text: `${fmtN(s.reconciles)} rec. / ${s.claimWrites} writes` })),
    }),
  };
}

function churnSection(c: ChurnResult): Section {
  const rows: Row[] = [
    [`${fmtN(c.vms)} VMs (with VMIs) at ${c.targetRate}/s for ${c.seconds} s → ${fmtN(c.claims)} claims`, ''],
    ['achieved creation rate', `${c.achievedRate}/s (largest lag behind schedule ${fmtMs(c.maxScheduleLagMs)})`],
    ['latency VM POST → claim ADDED: p50', fmtMs(c.latencyMs.p50)],
    ['p95', fmtMs(c.latencyMs.p95)],
    ['p99', fmtMs(c.latencyMs.p99)],
    ['max / mean / min', fmtMsOf(c.latencyMs, 'max', 'mean', 'min')],
    ['per VM (both claims): p50 / p95 / p99', fmtMsOf(c.perVmLatencyMs, 'p50', 'p95', 'p99')],
    ['API server answer to the VM POST: p50 / p95 / p99 / max', fmtMsOf(c.vmPostMs, 'p50', 'p95', 'p99', 'max')],
    ['API server answer to the VMI POST: p50 / p95 / p99 / max', fmtMsOf(c.vmiPostMs, 'p50', 'p95', 'p99', 'max')],
    ['controller: work-queue wait p50 / p99 (from its histogram)', fmtMsOf(c.controller, 'queueWaitP50Ms', 'queueWaitP99Ms')],
    ['controller: reconcile time p50 / p99 (from its histogram)', fmtMsOf(c.controller, 'reconcileP50Ms', 'reconcileP99Ms')],
    ['controller GC and event loop during the churn', gcRow(c.controller.runtime)],
    ['ipamclaims writes per claim', String(c.claimWritesPerClaim)],
    ['load average (1 min) before → after', `${c.loadavgBefore[0]} → ${c.loadavgAfter[0]}`],
  ];
  return {
    id: 'churn',
    title: `5. Churn latency at ${c.targetRate} VMs/s`,
    rows,
    notes: [
      "Latency per claim: from the client-side timestamp taken just before the VM's POST to the receipt of the claim's ADDED event on the benchmark's watch. The VMI is POSTed right after its VM (as virt-controller would).",
    ],
    json: c,
    svg: lineChart({
      title: `Churn at ${c.targetRate} VMs/s: p50 ${c.latencyMs.p50} ms, p95 ${c.latencyMs.p95} ms, p99 ${c.latencyMs.p99} ms (worst per 0.5 s)`,
      xLabel: 'seconds since the first VM POST',
      yLabel: 'ms',
      series: [
        { name: 'VM POST → both claims seen', points: c.latencySeries },
        { name: 'VM POST answered by the API server', points: c.vmPostSeries },
      ],
    }),
  };
}

interface MemoryEntry {
  label: string;
  vms: number;
  memory: MemorySummary;
}

function memorySection(entries: MemoryEntry[]): Section {
  const mib = (x: number | null): string => (x === null ? 'n/a' : `${x.toFixed(1)} MiB`);
  const rows = entries.flatMap(({ label, vms, memory: m }): Row[] => [
    [`${label} (N = ${fmtN(vms)})`, ''],
    [
      '  peak RSS (VmHWM)',
      `${mib(m.peakRssMiB)} (target < ${RSS_TARGET_MIB} MB at 10,000: ${vms >= 10_000 ? verdict(m.peakRssMiB * 1.048576 < RSS_TARGET_MIB) : 'n/a'})`,
    ],
    ['  peak process_resident_memory_bytes', mib(m.peakResidentMetricMiB)],
    ['  peak nodejs_heap_size_used_bytes', mib(m.peakHeapUsedMiB)],
    ['  peak nodejs_heap_size_total_bytes', mib(m.peakHeapTotalMiB)],
  ]);
  return {
    id: 'memory',
    title: '6. Controller memory',
    rows,
    notes: [
      "Sampled every second: /proc/PID/status (VmRSS, VmHWM) and the controller's /metrics. VmHWM is the kernel's high-water mark, so peaks between samples count. 1 MiB = 1.048576 MB.",
    ],
    json: entries.map((e) => ({ label: e.label, vms: e.vms, ...e.memory })),
    svg: lineChart({
      title: 'Controller RSS over time',
      xLabel: 'seconds since process spawn',
      yLabel: 'MiB',
      series: entries.flatMap((e) => [
        { name: `RSS, ${e.label}`, points: e.memory.samples.map((s): [number, number] => [s.t, round(s.rssKb / 1024, 1)]) },
        {
          name: `heap used, ${e.label}`,
          points: e.memory.samples.filter((s) => s.heapUsedBytes).map((s): [number, number] => [s.t, round(s.heapUsedBytes! / 2 ** 20, 1)]),
        },
      ]),
      hLines: [{ y: RSS_TARGET_MIB / 1.048576, label: `${RSS_TARGET_MIB} MB` }],
    }),
  };
}

function largeSection(setup: SetupResult, cold: ColdStartResult): Section {
  return {
    id: 'large',
    title: `6b. Large cold start at N = ${fmtN(cold.vms)} (fresh control plane)`,
    rows: [
      ['setup (VMs + VMIs created by the benchmark)', `${fmtS(setup.seconds)} (${setup.objectsPerSecond} objects/s)`],
      ['controller: spawn → /readyz', fmtS(cold.spawnToReadyS)],
      ['controller: spawn → all claims', fmtS(cold.spawnToAllClaimsS)],
      ['claims per second', String(cold.claimsPerSecond)],
      ['ipamclaims writes per claim', String(cold.claimWritesPerClaim)],
      ['CPU seconds during convergence', cpuRow(cold.cpuSeconds)],
      ['controller GC and event loop (spawn → idle)', gcRow(cold.runtime)],
    ],
    json: { setup, cold },
    svg: lineChart({
      title: `Claims over time, N = ${fmtN(cold.vms)}`,
      xLabel: 'seconds since controller spawn',
      yLabel: 'IPAMClaims seen by the watch',
      series: [{ name: `controller (${cold.spawnToAllClaimsS.toFixed(1)} s)`, points: cold.series }],
    }),
  };
}

function allocatorSection(r: AllocatorBenchResult): Section {
  return {
    id: 'allocator',
    title: `7. Allocator (bench/allocator.ts, median of ${r.runs} runs)`,
    rows: allocatorRows(r),
    json: r,
    svg: barChart({
      title: 'Allocator throughput',
      yLabel: 'operations per second',
      bars: [
        { label: '/16 allocations', value: r.slash16.allocationsPerSecond },
        { label: '/16 churn (release + allocate)', value: r.slash16.churnOpsPerSecond },
        { label: 'rebuild claims', value: r.rebuild.claimsPerSecond },
      ],
    }),
  };
}

// ---------------------------------------------------------------------------------------------------------------

/** The scenarios of the default mode, in the order of the comment at the top. */
async function runScenarios(o: Options, settings: ControllerSettings, tmp: string, h: Harness): Promise<ModeRun> {
  const ctx = await h.startCp('cp');
  const commands: Record<string, string> = {};
  const memory: MemoryEntry[] = [];
  const n = o.vms;

  log(`setup: ${n} VMs with VMIs in bench-cold`);
  const { result: setup } = await createVms(ctx, 'bench-cold', 'cold', n);
  log(`setup done in ${setup.seconds} s (${setup.objectsPerSecond} objects/s)`);

  const warmUpClaims = Math.min(1000, 2 * n);
  const warmUpS = await warmUp(ctx, warmUpClaims);
  log(`API server warmed up with ${warmUpClaims} claim creates (${warmUpS} s)`);

  log('1. cold start');
  const profDir = join(tmp, 'profiles');
  const { result: cold, controller: a } = await coldStart(ctx, 'bench-cold', n, 'cold-start', o.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []);
  commands['cold start'] = cold.controllerCommand;
  log(`converged in ${cold.spawnToAllClaimsS} s`);

  const coldMemory: MemoryEntry = { label: 'cold start', vms: n, memory: a.memoryNow() };
  log('4b. VMI status updates');
  const statusStep = await vmiStatusUpdates(ctx, a, 'bench-cold', n);
  log('4c. restart, 1/2: stopping the controller');
  const stopped = await stopController(ctx, a);
  memory.push(coldMemory);
  if (o.cpuProf) log(`CPU profile of the cold-start controller in ${profDir}`);

  log('2. the limit');
  const lim = await limit(ctx, 'bench-limit', n);
  let viaProject: LimitResult | undefined;
  if (!o.skipDiagnostics) {
    log("2b. diagnostic: the same writes through the controller's KubeClient");
    viaProject = await limit(ctx, 'bench-limit-kubeclient', n, 'project');
  }

  log('4c. restart, 2/2: a new controller');
  const keysAfterLimit = (viaProject ? 3 : 2) * n; // bench-cold VMs + the limit namespaces' owner VMs
  const { result: restartStep, controller: b } = await restart(ctx, keysAfterLimit, 'restart', stopped);
  commands['restart and churn'] = b.commandLine;

  log(`5. churn: ${o.churnRate} VMs/s for ${o.churnSeconds} s`);
  const ch = await churn(ctx, b, 'bench-churn', o.churnRate, o.churnSeconds);
  const stoppedB = await stopController(ctx, b);
  memory.push({ label: 'restart + churn', vms: keysAfterLimit + ch.vms, memory: stoppedB.memory });

  log('4a. resync');
  const resyncCtx = { ...ctx, settings: { ...settings, resyncSeconds: o.resyncSeconds } };
  const c = await ControllerProcess.startIn({ ...resyncCtx, settings: { ...resyncCtx.settings, logLevel: 'debug' } }, 'resync');
  commands.resync = c.commandLine;
  const resyncStep = await resync(resyncCtx, c, keysAfterLimit + ch.vms);
  await c.stop();

  // More paired rounds for the ratio, each in fresh namespaces with a namespace-scoped controller (so N stays N
  // whatever the earlier steps left in the cluster), alternating which of the pair runs first.
  const rounds: RatioRound[] = [ratioRound(1, 'cluster-wide controller; cold start, then limit', cold, lim)];
  for (let k = 2; k <= o.rounds; k++) {
    const coldNs = `bench-cold-r${k}`;
    const say = (what: string): void => log(`ratio round ${k}/${o.rounds}: ${what}`);
    say('setup');
    await createVms(ctx, coldNs, 'cold', n);
    const scoped: BenchContext = { ...ctx, settings: { ...settings, namespace: coldNs } };
    const runLimit = (): Promise<LimitResult> => {
      say('limit');
      return limit(ctx, `bench-limit-r${k}`, n);
    };
    const limitFirst = k % 2 === 0;
    const first = limitFirst ? await runLimit() : undefined;
    say('cold start');
    const { result: c2, controller } = await coldStart(scoped, coldNs, n, `cold-r${k}`);
    await stopController(ctx, controller);
    const how = limitFirst ? 'limit, then cold start' : 'cold start, then limit';
    rounds.push(ratioRound(k, `--namespace ${coldNs}; ${how}`, c2, first ?? (await runLimit())));
  }
  h.show(coldStartSection(cold, lim, settings, viaProject, rounds));
  h.show(
    writesSection([
      ['cold start (controller)', cold],
      ['limit client', lim],
      ['churn (controller)', ch],
    ]),
  );
  h.show(steadySection([resyncStep, statusStep, restartStep]));
  h.show(churnSection(ch));

  let large: Section | undefined;
  if (!o.skipLarge && o.maxVms > n) {
    log(`6. large cold start at ${o.maxVms} VMs on a fresh control plane`);
    await h.stopCp();
    const second = await h.startCp('cp-large');
    const { result: lsetup } = await createVms(second, 'bench-large', 'cold', o.maxVms);
    log(`setup done in ${lsetup.seconds} s (${lsetup.objectsPerSecond} objects/s)`);
    const { result: lcold, controller: d } = await coldStart(second, 'bench-large', o.maxVms, 'large');
    commands['large cold start'] = lcold.controllerCommand;
    memory.push({ label: 'large cold start', vms: o.maxVms, memory: d.memoryNow() });
    await stopController(second, d);
    large = largeSection(lsetup, lcold);
  }
  h.show(memorySection(memory));
  if (large) h.show(large);
  await h.stopCp();

  if (!o.skipAllocator) {
    log('7. allocator benchmark');
    h.show(allocatorSection(runAllocatorBench({ runs: o.allocatorRuns })));
  }
  return { k8sVersion: ctx.cp.version, setup, commands };
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  // What we ship is what we measure: the controller keeps the Deployment's --concurrency/--qps/--burst unless the
  // user gave them, and the limit client uses the same values as the controller.
  const overridden = (['concurrency', 'qps', 'burst'] as const).filter((k) => o[k] !== undefined);
  const given = Object.fromEntries(overridden.map((k) => [k, o[k]]));
  const settings: ControllerSettings = { ...(await shippedClientSettings()), ...given, overridden, resyncSeconds: 600 };
  const tmp = mkdtempSync(join(tmpdir(), 'persistent-ips-bench-'));
  const loadStart = loadavg().map((x) => round(x, 2));
  log(`temp dir ${tmp}; load average ${loadStart.join(' ')} on ${cpus().length} CPUs`);

  let world: World | undefined;
  let success = false;
  // One cleanup at a time: a signal's and the main flow's finally share it.
  let cleaning: Promise<void> | undefined;
  const stopCp = async (): Promise<void> => {
    const old = world;
    world = undefined;
    if (!old) return;
    log('stopping the control plane');
    await old.stop();
  };
  const cleanup = (): Promise<void> => {
    cleaning ??= (async () => {
      await stopControllers();
      await stopAll();
      await stopCp();
    })().finally(() => {
      cleaning = undefined;
    });
    return cleaning;
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (interrupted) {
      killAllSync();
      process.exit(130);
    }
    interrupted = true;
    log(`${signal}: stopping everything the benchmark started`);
    void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', killAllSync);

  const sections: Section[] = [];
  const h: Harness = {
    startCp: async (name) => {
      world = await startWorld(join(tmp, name), (l) => log(`[control plane] ${l}`), Math.max(32, o.setupConcurrency));
      return { kube: world.kube, cp: world.cp, dir: tmp, settings, setupConcurrency: o.setupConcurrency, nodeArgs: o.nodeArgs, log };
    },
    stopCp,
    show: (section) => {
      sections.push(section);
      print(textTable(section.title, section.rows));
    },
    log,
  };

  try {
    const { k8sVersion, setup, commands: controllerCommands } = o.scales.length > 0 ? await runScales(o, h) : await runScenarios(o, settings, tmp, h);
    await cleanup();

    const loadEnd = loadavg().map((x) => round(x, 2));
    const metaJson = {
      date: new Date(t0).toISOString(),
      durationSeconds: round((Date.now() - t0) / 1000, 1),
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? '',
      memoryGiB: round(totalmem() / 2 ** 30, 1),
      loadavgStart: loadStart,
      loadavgEnd: loadEnd,
      node: process.version,
      kubernetes: k8sVersion,
      etcd: pinnedVersions().etcd,
      commit: commitAtStart,
      srcHadUncommittedChanges: dirtySrcAtStart,
      options: { ...o, out: relative(REPO, o.out) },
      controllerFlags: Object.fromEntries(Object.entries(controllerCommands).map(([k, v]) => [k, v.replaceAll(tmp, 'TMP')])),
      setup,
    };
    const metaRows: Row[] = [
      ['date', metaJson.date],
      ['duration of the whole run', fmtS(metaJson.durationSeconds)],
      ['machine', `${metaJson.cpus} CPUs (${metaJson.cpuModel}), ${metaJson.memoryGiB} GiB`],
      ['load average (1/5/15 min) at start → end', `${loadStart.join(' / ')} → ${loadEnd.join(' / ')} (other jobs share the machine)`],
      ['Node / Kubernetes / etcd', `${metaJson.node} / ${k8sVersion} / ${metaJson.etcd}`],
      ['commit', `${commitAtStart}${dirtySrcAtStart ? ' (src/ had uncommitted changes; dist/ was built from the working tree)' : ''}`],
      [
        'benchmark options',
        `--vms ${o.vms} --max-vms ${o.skipLarge ? 'skipped' : o.maxVms} --churn-rate ${o.churnRate} --churn-seconds ${o.churnSeconds} --resync-seconds ${o.resyncSeconds}`,
      ],
      ['controller and limit client: concurrency, QPS/burst', clientSettingsLabel(settings)],
      ...Object.entries(controllerCommands).map(([k, v]): Row => [`controller flags (${k})`, v.replaceAll(tmp, 'TMP')]),
      ...(setup ? ([['setup', `${fmtN(setup.vms)} VMs + VMIs in ${fmtS(setup.seconds)} (${setup.objectsPerSecond} objects/s)`]] as Row[]) : []),
    ];
    const files = writeReport(
      o.out,
      {
        title: `persistent-ips benchmark, ${o.scales.length ? `scales ${o.scales.map(fmtN).join(' / ')}` : `N = ${fmtN(o.vms)}`}`,
        intro: [
          'Generated by `npm run bench` (bench/run.ts). A real local control plane (etcd, kube-apiserver, kube-controller-manager from e2e/harness) in a temp dir; the controller runs as its own process (`node dist/cli/main.js run ...`). See [README](../README.md) for the method.',
        ],
        rows: metaRows,
        json: metaJson,
      },
      sections,
    );
    print(textTable('Run', metaRows));
    print(`wrote:\n${files.map((f) => `  ${relative(REPO, f)}`).join('\n')}`);
    success = true;
  } finally {
    await cleanup().catch((err: unknown) => log(`cleanup: ${(err as Error).message}`));
    if (success && !o.keepTemp && !o.cpuProf) rmSync(tmp, { recursive: true, force: true });
    else log(`temp dir kept: ${tmp}`);
    process.off('exit', killAllSync);
  }
}

let interrupted = false;

main().then(
  () => process.exit(0),
  (err: unknown) => {
    // After Ctrl-C the scenario in progress fails as its processes go away; the signal handler exits once all
    // is stopped.
    if (interrupted) return;
    log(`FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    killAllSync();
    process.exit(1);
  },
);
