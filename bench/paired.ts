// Paired cold starts of two or more controller builds on ONE local control plane: the quick way to tell whether a
// change moves CPU or memory. `--scales` starts a fresh control plane per size and measures one build; the machine's
// load moves a single cold start's CPU by 10-20 %, which hides a change of a few percent. Here each round runs every
// arm once, back to back, in a fresh namespace of its own (the controller scoped to it with --namespace), alternating
// the order, so the arms see the same machine. The controller is started as bench/run.ts starts it (the Deployment's
// args and env, bench/lib/controller.ts); an arm may add node flags or environment, or run another commit's build.
//
//   node bench/paired.ts [--vms 1000] [--rounds 3] [--settle-seconds 0] [--keep-logs] --arm 'NAME [ref=REV | entry=PATH] [flags=F]... [env=K=V]...' ...
//
//   ref=REV    the controller built from that git revision (default: this checkout's dist/, run `npm run build`
//              first); built once into .paired/<commit>/dist
//   entry=PATH the controller's entry point instead of dist/cli/main.js (e.g. another build's output)
//   flags=F    a node flag for this arm (repeatable), e.g. flags=--single-threaded-gc
//   env=K=V    an environment variable for this arm's controller (repeatable)
//
// --keep-logs keeps the temp dir (each controller's log, e.g. with flags=--trace-gc) and prints where it is.
//
// --vms 0 measures start-up alone: no VMs, the controller's CPU seconds and RSS once /readyz answers 200 plus one
// second (caches synced, leader elected, webhook serving), and with --settle-seconds S its RSS once idle S seconds
// more; then it is stopped.
//
// Example: node bench/paired.ts --vms 3000 --rounds 2 --settle-seconds 20 --arm 'before ref=HEAD~1' --arm 'after'
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { shippedClientSettings } from './lib/deployment.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { countBy } from './lib/prom.ts';
import { procCpuTimes, procMemory, procThreadCpuSeconds } from './lib/proc.ts';
import { killAllSync, stopAll } from './lib/processes.ts';
import { ControllerProcess, stopControllers } from './lib/controller.ts';
import { startWorld, type World } from './lib/world.ts';
import { coldStart, createVms, type BenchContext } from './lib/scenarios.ts';
import { mean, median, round } from './lib/stats.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));

interface Arm {
  name: string;
  ref?: string;
  flags: string[];
  env: Record<string, string>;
  entry?: string;
}

export function parseArm(spec: string): Arm {
  const [name, ...rest] = spec.trim().split(/\s+/);
  if (!name || !/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new Error(`--arm ${JSON.stringify(spec)}: the name (first word) must be [a-z0-9-]`);
  const arm: Arm = { name, flags: [], env: {} };
  for (const part of rest) {
    const eq = part.indexOf('=');
    const [key, value] = eq < 0 ? [part, ''] : [part.slice(0, eq), part.slice(eq + 1)];
    if (key === 'ref' && value) arm.ref = value;
    else if (key === 'entry' && value) arm.entry = resolve(value);
    else if (key === 'flags' && value.startsWith('--')) arm.flags.push(value);
    else if (key === 'env' && /^[A-Za-z_][A-Za-z0-9_]*=/.test(value)) arm.env[value.slice(0, value.indexOf('='))] = value.slice(value.indexOf('=') + 1);
    else throw new Error(`--arm ${JSON.stringify(spec)}: cannot read ${JSON.stringify(part)} (ref=REV, entry=PATH, flags=--F, env=K=V)`);
  }
  return arm;
}

/** The controller of a git revision, built once into .paired/<commit>/dist (inside the repo, so that its imports
 * resolve to this checkout's node_modules). */
function buildRef(ref: string, log: (l: string) => void): string {
  const sha = execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { cwd: REPO, encoding: 'utf8' }).trim();
  const out = join(REPO, '.paired', sha, 'dist');
  const entry = join(out, 'cli', 'main.js');
  // Only a complete build is ever renamed to `out`, so an existing one is whole.
  if (existsSync(entry)) return entry;
  // A worktree left by an interrupted build (Ctrl-C during the synchronous steps below) is forgotten first.
  execFileSync('git', ['worktree', 'prune'], { cwd: REPO });
  const tree = mkdtempSync(join(tmpdir(), 'paired-src-'));
  const partial = `${out}.partial-${process.pid}`;
  log(`building ${ref} (${sha.slice(0, 12)}) into ${out}`);
  let added = false;
  try {
    execFileSync('git', ['worktree', 'add', '--detach', '--quiet', tree, sha], { cwd: REPO, stdio: 'inherit' });
    added = true;
    symlinkSync(join(REPO, 'node_modules'), join(tree, 'node_modules'));
    mkdirSync(partial, { recursive: true });
    if (existsSync(join(tree, 'scripts', 'build.ts'))) {
      // The revision's own build (the bundle it ships), into the partial folder.
      execFileSync(process.execPath, [join(tree, 'scripts', 'build.ts'), '--out', partial], { cwd: tree, stdio: 'inherit' });
    } else {
      // Before scripts/build.ts (commit 8c81782 and earlier) the build was tsc alone.
      const tsc = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
      execFileSync(process.execPath, [tsc, '-p', join(tree, 'tsconfig.build.json'), '--outDir', partial, '--noEmitOnError'], { cwd: tree, stdio: 'inherit' });
    }
    // The bundle reads its package.json two folders above dist/cli/ (src/cli/parser.ts, --version), as in the image.
    copyFileSync(join(tree, 'package.json'), join(REPO, '.paired', sha, 'package.json'));
    renameSync(partial, out);
  } finally {
    rmSync(partial, { recursive: true, force: true });
    if (added) execFileSync('git', ['worktree', 'remove', '--force', tree], { cwd: REPO, stdio: 'inherit' });
    else rmSync(tree, { recursive: true, force: true });
  }
  return entry;
}

interface Sample {
  arm: string;
  round: number;
  /** The controller's CPU from spawn to its last claim (to /readyz + 1 s with --vms 0). */
  cpuSeconds: number;
  /** null with --vms 0 */
  cpuMsPerClaim: number | null;
  convergenceS: number | null;
  /** VmHWM (with --vms 0: VmRSS at /readyz + 1 s) */
  peakRssMiB: number;
  settledRssMiB: number | null;
  threads: Record<string, number>;
  /** CPU seconds the controller spent in the kernel (syscalls, page faults) over its life up to the sample. */
  systemSeconds: number | null;
  /** CPU seconds of the controller's reaped child processes (command-line parser, certificate minting) up to the
   * sample: not in cpuSeconds, which is the controller process's own. */
  childSeconds: number | null;
  /** The controller's reconciles and its API requests by `verb resource` (its own metrics, once idle; null with --vms 0). */
  reconciles: number | null;
  apiRequests: Record<string, number> | null;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      vms: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '3' },
      'settle-seconds': { type: 'string', default: '0' },
      'keep-logs': { type: 'boolean' },
      arm: { type: 'string', multiple: true },
      help: { type: 'boolean' },
    },
  });
  if (values.help || (values.arm ?? []).length < 2) {
    process.stdout.write(
      readFileSync(fileURLToPath(import.meta.url), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('//'))
        .map((l) => l.slice(3))
        .join('\n') + '\n',
    );
    process.exit(values.help ? 0 : 2);
  }
  const vms = Number(values.vms);
  const rounds = Number(values.rounds);
  const settleMs = Number(values['settle-seconds']) * 1000;
  const log = (l: string): void => void process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${l}\n`);
  const arms = values.arm!.map(parseArm);
  if (new Set(arms.map((a) => a.name)).size !== arms.length) throw new Error('two arms have the same name');
  for (const arm of arms) if (arm.ref) arm.entry = buildRef(arm.ref, log);

  const dir = mkdtempSync(join(tmpdir(), 'persistent-ips-paired-'));
  let world: World | undefined;
  const onSignal = (): void => {
    killAllSync();
    process.exit(130);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', killAllSync);
  const samples: Sample[] = [];
  try {
    world = await startWorld(join(dir, 'cp'), () => {});
    const { cp, kube } = world;
    const shipped = await shippedClientSettings();
    const settings = { concurrency: shipped.concurrency, qps: shipped.qps, burst: shipped.burst, resyncSeconds: 600 };
    const base: BenchContext = { kube, cp, dir, settings, setupConcurrency: 16, nodeArgs: [], log };
    for (let r = 0; r < rounds; r++) {
      for (const arm of r % 2 === 0 ? arms : [...arms].reverse()) {
        const ns = `paired-${r}-${arm.name}`;
        const ctx: BenchContext = {
          ...base,
          controllerEnv: arm.env,
          ...(arm.entry ? { controllerEntry: arm.entry } : {}),
          settings: { ...settings, namespace: ns },
        };
        samples.push(vms === 0 ? await startUp(ctx, arm, r, settleMs) : await pairedColdStart(ctx, arm, r, vms, settleMs));
        // The namespace stays: its claims carry our finalizer, so deleting it with no controller running would leave
        // the namespace controller retrying in the background of the next arm. The control plane goes at the end.
      }
    }
  } finally {
    await stopControllers();
    await stopAll();
    await world?.stop();
    if (values['keep-logs']) {
      rmSync(join(dir, 'cp'), { recursive: true, force: true });
      log(`controller logs kept in ${dir}`);
    } else rmSync(dir, { recursive: true, force: true });
  }

  const summary = arms.map((arm) => {
    const mine = samples.filter((s) => s.arm === arm.name);
    const cpu = mine.map((s) => (vms === 0 ? s.cpuSeconds : s.cpuMsPerClaim!));
    const settled = mine.map((s) => s.settledRssMiB).filter((x): x is number => x !== null);
    return {
      arm: arm.name,
      ref: arm.ref ?? (arm.entry ? relative(REPO, arm.entry) : 'dist/'),
      flags: arm.flags.join(' '),
      env: Object.entries(arm.env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
      cpu,
      cpuMean: round(mean(cpu), 3),
      cpuMedian: round(median(cpu), 3),
      peakRssMiB: mine.map((s) => s.peakRssMiB),
      settledRssMiB: settled,
    };
  });
  process.stdout.write(
    vms === 0
      ? `# paired start-ups (no VMs, measured at /readyz + 1 s): ${rounds} rounds, one control plane\n\n`
      : `# paired cold starts: ${vms} VMs x 2 networks, ${rounds} rounds, one control plane\n\n`,
  );
  process.stdout.write(
    `| arm | build | node flags | env | ${vms === 0 ? 'CPU s' : 'CPU ms per claim'} (each round) | mean | median | ${vms === 0 ? 'RSS' : 'peak RSS'} MiB | settled RSS MiB |\n|---|---|---|---|---|---|---|---|---|\n`,
  );
  for (const s of summary) {
    process.stdout.write(
      `| ${s.arm} | ${s.ref} | ${s.flags || '–'} | ${s.env || '–'} | ${s.cpu.join(', ')} | ${s.cpuMean} | ${s.cpuMedian} | ${s.peakRssMiB.join(', ')} | ${s.settledRssMiB.join(', ') || '–'} |\n`,
    );
  }
  process.stdout.write(`\n\`\`\`json\n${JSON.stringify({ vms, rounds, settleSeconds: settleMs / 1000, samples }, null, 1)}\n\`\`\`\n`);
}

/** The controller's /proc figures now: memory, CPU seconds by thread, in the kernel and of its reaped children. */
function procFigures(pid: number, digits: number) {
  const mem = procMemory(pid);
  const threads = Object.fromEntries(Object.entries(procThreadCpuSeconds(pid)).map(([k, v]) => [k, round(v, digits)]));
  const times = procCpuTimes(pid);
  return { mem, threads, systemSeconds: times ? round(times.system, digits) : null, childSeconds: times ? round(times.children, digits) : null };
}

const procLog = (s: Sample): string =>
  `CPU s by thread ${JSON.stringify(s.threads)}, in the kernel ${s.systemSeconds} s; its child processes ${s.childSeconds} s (not counted above)`;

/** One cold start of `vms` VMs in the context's namespace: the controller's CPU per claim, convergence, peak RSS. */
async function pairedColdStart(ctx: BenchContext, arm: Arm, r: number, vms: number, settleMs: number): Promise<Sample> {
  const ns = ctx.settings.namespace!;
  await createVms(ctx, ns, 'vm', vms);
  const { result, controller } = await coldStart(ctx, ns, vms, `${arm.name}-${r}`, arm.flags);
  if (settleMs > 0) await sleep(settleMs);
  const { mem, ...proc } = procFigures(controller.pid, 2);
  const apiRequests = countBy(await controller.metrics(), 'persistent_ips_api_requests_total', (l) => `${l.verb} ${l.resource}`);
  await controller.stop();
  const s: Sample = {
    arm: arm.name,
    round: r,
    cpuSeconds: round(result.cpuSeconds.controller!, 2),
    cpuMsPerClaim: round((result.cpuSeconds.controller! * 1000) / result.claims, 3),
    convergenceS: result.spawnToAllClaimsS,
    peakRssMiB: round((mem?.hwmKb ?? 0) / 1024, 1),
    settledRssMiB: settleMs > 0 && mem ? round(mem.rssKb / 1024, 1) : null,
    ...proc,
    reconciles: result.reconciles,
    apiRequests,
  };
  ctx.log(
    `${arm.name} round ${r + 1}: ${s.cpuMsPerClaim} ms CPU per claim, converged in ${s.convergenceS} s, peak RSS ${s.peakRssMiB} MiB${s.settledRssMiB === null ? '' : `, ${s.settledRssMiB} MiB after ${settleMs / 1000} s`}; ${procLog(s)}; ${s.reconciles} reconciles, API requests ${JSON.stringify(apiRequests)}`,
  );
  return s;
}

/** One start with no VMs: the controller's CPU and RSS at /readyz + 1 s. */
async function startUp(ctx: BenchContext, arm: Arm, r: number, settleMs: number): Promise<Sample> {
  const controller = await ControllerProcess.startIn(ctx, `${arm.name}-${r}`, arm.flags);
  try {
    await controller.waitReady(60_000);
    await sleep(1000);
    const cpuSeconds = controller.cpuSeconds();
    const { mem, ...proc } = procFigures(controller.pid, 3);
    if (settleMs > 0) await sleep(settleMs);
    const settled = settleMs > 0 ? procMemory(controller.pid) : undefined;
    const s: Sample = {
      arm: arm.name,
      round: r,
      cpuSeconds: round(cpuSeconds, 3),
      cpuMsPerClaim: null,
      convergenceS: null,
      peakRssMiB: round((mem?.rssKb ?? 0) / 1024, 1),
      settledRssMiB: settled ? round(settled.rssKb / 1024, 1) : null,
      ...proc,
      reconciles: null,
      apiRequests: null,
    };
    ctx.log(
      `${arm.name} round ${r + 1}: start-up ${s.cpuSeconds} s CPU, RSS ${s.peakRssMiB} MiB at /readyz + 1 s${s.settledRssMiB === null ? '' : `, ${s.settledRssMiB} MiB idle ${settleMs / 1000} s later`}; ${procLog(s)}`,
    );
    return s;
  } finally {
    await controller.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`paired: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}
