// Local control plane in the background:
//
//   npm run cluster:up   -- [--dir DIR] [--timeout SECONDS]   build if needed, start detached, return once ready
//   npm run cluster:down -- [--dir DIR]                       stop it and check that no process is left
//   node e2e/harness/cli.ts status [--dir DIR]
//
// DIR defaults to .cluster/ in the repository. `up` runs the build in the foreground (its progress is shown), then
// starts a detached supervisor (`cli.ts supervise`) that runs the harness and records DIR/state.json; `up` follows
// DIR/logs/supervisor.log until the state says ready (exit 0) or failed (exit 1).
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { ensureBinaries, kubectlPath } from './binaries.ts';
import { startControlPlane, type ComponentName, type ControlPlane } from './controlplane.ts';
import { CLI_SCRIPT, REPO_ROOT } from './paths.ts';
import { isAlive, stopPid } from './process.ts';

export interface ClusterState {
  status: 'starting' | 'ready' | 'failed' | 'stopping' | 'stopped';
  dir: string;
  supervisorPid: number;
  pids: Partial<Record<ComponentName, number>>;
  kubeconfigPath?: string;
  server?: string;
  version?: string;
  binDir?: string;
  error?: string;
  /** Processes that exited while the cluster was up (something is wrong then). */
  exited?: { name: ComponentName; pid: number; code: number | string; at: string }[];
  startedAt: string;
  readyAt?: string;
  startSeconds?: number;
}

const COMPONENTS = new Set(['etcd', 'kube-apiserver', 'kube-controller-manager']);

export function statePath(dir: string): string {
  return join(dir, 'state.json');
}

export function readState(dir: string): ClusterState | undefined {
  try {
    return JSON.parse(readFileSync(statePath(dir), 'utf8')) as ClusterState;
  } catch {
    return undefined;
  }
}

function writeState(dir: string, state: ClusterState): void {
  const tmp = `${statePath(dir)}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(state, null, 2) + '\n');
  renameSync(tmp, statePath(dir));
}

function cmdline(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return undefined;
  }
}

function mentionsDir(args: string[], dir: string): boolean {
  return args.some((a) => a === dir || a.endsWith(`=${dir}`) || a.includes(`${dir}/`));
}

/** Processes of this harness that belong to DIR: the supervisor and the three components. */
export function findProcesses(dir: string): { pid: number; args: string[] }[] {
  const found: { pid: number; args: string[] }[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const args = cmdline(pid);
    if (!args?.length || !mentionsDir(args, dir)) continue;
    const isComponent = COMPONENTS.has(basename(args[0] ?? ''));
    const isSupervisor = args.includes('supervise') && args.some((a) => a.endsWith('cli.ts'));
    if (isComponent || isSupervisor) found.push({ pid, args });
  }
  return found;
}

function isOurs(pid: number | undefined, dir: string): pid is number {
  if (!pid || !isAlive(pid)) return false;
  const args = cmdline(pid);
  return !!args && mentionsDir(args, dir);
}

const say = (line: string) => process.stderr.write(`${line}\n`);

/** Stops everything of DIR; returns the processes that could not be stopped. */
export async function down(dir: string, graceMs = 10_000): Promise<{ pid: number; args: string[] }[]> {
  const state = readState(dir);
  if (state) {
    if (isOurs(state.supervisorPid, dir)) {
      say(`stopping the supervisor (pid ${state.supervisorPid}); it stops the components in reverse order`);
      // The supervisor stops each component with SIGTERM then SIGKILL after its own grace period.
      await stopPid(state.supervisorPid, graceMs * 3 + 5000);
    }
    const order: ComponentName[] = ['kube-controller-manager', 'kube-apiserver', 'etcd'];
    for (const name of order) {
      const pid = state.pids[name];
      if (isOurs(pid, dir)) {
        say(`stopping ${name} (pid ${pid})`);
        await stopPid(pid, graceMs);
      }
    }
  }
  for (const p of findProcesses(dir)) {
    say(`stopping leftover pid ${p.pid}: ${p.args.join(' ')}`);
    await stopPid(p.pid, graceMs);
  }
  await sleep(100);
  const left = findProcesses(dir);
  if (state) writeState(dir, { ...state, status: left.length ? 'stopping' : 'stopped' });
  return left;
}

async function up(dir: string, timeoutS: number): Promise<number> {
  const existing = readState(dir);
  if (existing && isOurs(existing.supervisorPid, dir)) {
    if (existing.status === 'ready') {
      say(`already up (supervisor pid ${existing.supervisorPid})`);
      printReady(existing);
      return 0;
    }
    say(`a supervisor for ${dir} is running (pid ${existing.supervisorPid}, status ${existing.status}); run cluster:down first`);
    return 1;
  }
  const leftovers = findProcesses(dir);
  if (leftovers.length) {
    say(`processes of an earlier run of ${dir} are still there; stopping them`);
    await down(dir);
  }

  const tBuild = Date.now();
  const bins = await ensureBinaries((l) => say(l));
  say(`binaries ready in ${((Date.now() - tBuild) / 1000).toFixed(1)} s: ${bins.binDir}`);

  mkdirSync(join(dir, 'logs'), { recursive: true });
  const supLog = join(dir, 'logs', 'supervisor.log');
  writeFileSync(supLog, '');
  writeFileSync(statePath(dir), '');
  const fd = openSync(supLog, 'a');
  const child = spawn(process.execPath, [CLI_SCRIPT, 'supervise', '--dir', dir, '--bin-dir', bins.binDir], {
    detached: true,
    stdio: ['ignore', fd, fd],
    cwd: REPO_ROOT,
  });
  closeSync(fd);
  child.unref();
  const supervisorPid = child.pid;
  if (!supervisorPid) throw new Error('could not start the supervisor');

  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  // Follow the supervisor's log until the state says ready or failed.
  const tStart = Date.now();
  let offset = 0;
  const follow = () => {
    const rfd = openSync(supLog, 'r');
    try {
      const buf = Buffer.alloc(64 * 1024);
      for (;;) {
        const n = readSync(rfd, buf, 0, buf.length, offset);
        if (n <= 0) break;
        offset += n;
        process.stderr.write(buf.subarray(0, n));
      }
    } finally {
      closeSync(rfd);
    }
  };
  for (;;) {
    await sleep(200);
    follow();
    const state = readState(dir);
    if (state?.status === 'ready') {
      say(`control plane up in ${((Date.now() - tStart) / 1000).toFixed(1)} s (supervisor pid ${supervisorPid})`);
      printReady(state);
      return 0;
    }
    let reason: string | undefined;
    if (state?.status === 'failed') reason = `start failed: ${state.error ?? 'see the log above'}`;
    else if (!isAlive(supervisorPid)) reason = 'the supervisor exited before the control plane was ready';
    else if (Date.now() - tStart > timeoutS * 1000) reason = `not ready after ${timeoutS} s`;
    else if (interrupted) reason = 'interrupted';
    if (reason) {
      follow();
      say(reason);
      await down(dir);
      return 1;
    }
  }
}

function printReady(state: ClusterState): void {
  say(`Kubernetes ${state.version} at ${state.server}`);
  say(`logs: ${join(state.dir, 'logs')}`);
  if (state.binDir) say(`version-matched kubectl: ${kubectlPath(state.binDir)}`);
  say(`stop with: npm run cluster:down -- --dir ${state.dir}`);
  process.stdout.write(`export KUBECONFIG=${state.kubeconfigPath}\n`);
}

async function supervise(dir: string, binDir: string | undefined): Promise<void> {
  const stamp = () => new Date().toISOString();
  const log = (line: string) => process.stdout.write(`${stamp()} ${line}\n`);
  const state: ClusterState = { status: 'starting', dir, supervisorPid: process.pid, pids: {}, startedAt: stamp() };
  writeState(dir, state);
  let cp: ControlPlane | undefined;
  const t0 = Date.now();
  try {
    cp = await startControlPlane({
      dir,
      ...(binDir ? { binDir } : {}),
      onLog: log,
      onProcess: (name, pid) => {
        state.pids[name] = pid;
        writeState(dir, state);
      },
      onExit: (name, pid, code, expected) => {
        if (state.status === 'ready' && !expected) {
          log(`WARNING: ${name} (pid ${pid}) exited (${code}) while the cluster was up; see ${join(dir, 'logs', `${name}.log`)}`);
          (state.exited ??= []).push({ name, pid, code, at: stamp() });
          writeState(dir, state);
        }
      },
      // SIGTERM/SIGINT (from `down`) stop the components in reverse order, then end this process.
      handleSignals: true,
    });
  } catch (err) {
    state.status = 'failed';
    state.error = err instanceof Error ? err.message : String(err);
    writeState(dir, state);
    log(`failed: ${state.error}`);
    process.exitCode = 1;
    return;
  }
  Object.assign(state, {
    status: 'ready',
    pids: cp.pids,
    kubeconfigPath: cp.kubeconfigPath,
    server: cp.server,
    version: cp.version,
    binDir: cp.binDir,
    readyAt: stamp(),
    startSeconds: (Date.now() - t0) / 1000,
  } satisfies Partial<ClusterState>);
  writeState(dir, state);
  log('ready; waiting for SIGTERM');
  setInterval(() => {}, 1 << 30);
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      dir: { type: 'string' },
      'bin-dir': { type: 'string' },
      timeout: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const command = positionals[0];
  const dir = resolve(values.dir ?? join(REPO_ROOT, '.cluster'));
  switch (command) {
    case 'up':
      return up(dir, Number(values.timeout ?? 300));
    case 'down': {
      if (!existsSync(dir)) {
        say(`${dir} does not exist; nothing to stop`);
        return 0;
      }
      const left = await down(dir);
      if (left.length) {
        say(`processes still alive: ${left.map((p) => `${p.pid} (${p.args.join(' ')})`).join('; ')}`);
        return 1;
      }
      say(`stopped; no process of ${dir} is left`);
      return 0;
    }
    case 'status': {
      const state = readState(dir);
      const alive = findProcesses(dir).map((p) => p.pid);
      process.stdout.write(JSON.stringify({ ...state, alive }, null, 2) + '\n');
      return state?.status === 'ready' && isOurs(state.supervisorPid, dir) ? 0 : 1;
    }
    case 'supervise':
      await supervise(dir, values['bin-dir']);
      return process.exitCode === 1 ? 1 : 0;
    default:
      say('usage: cli.ts up|down|status [--dir DIR] [--timeout SECONDS]');
      return command === undefined && values.help ? 0 : 2;
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      say(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exitCode = 1;
    },
  );
}
