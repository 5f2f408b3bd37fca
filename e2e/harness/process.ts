// Child processes of the control plane: each in its own process group (so a terminal's Ctrl-C reaches the harness
// only, which then stops them in order), output appended to a log file, stopped with SIGTERM then SIGKILL.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { track, untrack } from './reaper.ts';

export interface ManagedProcess {
  name: string;
  pid: number;
  logFile: string;
  child: ChildProcess;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  exited: Promise<number | string>;
  hasExited(): boolean;
}

export function spawnLogged(name: string, command: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv): ManagedProcess {
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, args, { stdio: ['ignore', fd, fd], detached: true, env: env ?? process.env });
  } finally {
    closeSync(fd);
  }
  let done = false;
  if (child.pid !== undefined) track(child.pid);
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      if (child.pid !== undefined) untrack(child.pid);
      resolve(code ?? signal ?? 'unknown');
    });
    child.once('error', (err) => {
      done = true;
      resolve(`spawn error: ${err.message}`);
    });
  });
  if (child.pid === undefined) {
    throw new Error(`could not start ${name} (${command})`);
  }
  return { name, pid: child.pid, logFile, child, exited, hasExited: () => done };
}

/** True while `pid` runs (a zombie, exited but not yet reaped by its parent, does not count). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return !isZombie(pid);
}

/** Signals the process group of `pid` (falling back to the process alone). */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      /* already gone */
    }
  }
}

/** Polls until `pid` is gone or `ms` elapsed; true when gone. Works for processes that are not our children. */
export async function waitForExit(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await sleep(50);
  }
  return !isAlive(pid);
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
export async function stopProcess(p: ManagedProcess, graceMs: number): Promise<void> {
  if (p.hasExited()) return;
  signalGroup(p.pid, 'SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([p.exited.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceMs)))]);
  clearTimeout(timer);
  if (timedOut && !p.hasExited()) {
    signalGroup(p.pid, 'SIGKILL');
    await p.exited;
  }
  // The process group may hold stragglers (none of these binaries forks, but be thorough). Group only: the pid
  // itself is free for reuse now.
  try {
    process.kill(-p.pid, 'SIGKILL');
  } catch {
    /* empty group */
  }
}

/** Stops a process that is not our child (e.g. recorded in state.json by another process). */
export async function stopPid(pid: number, graceMs: number): Promise<boolean> {
  if (!isAlive(pid)) return true;
  signalGroup(pid, 'SIGTERM');
  if (await waitForExit(pid, graceMs)) return true;
  signalGroup(pid, 'SIGKILL');
  return waitForExit(pid, 5000);
}

/** The last `n` lines of a log file, for error messages. */
export function tailFile(file: string, n = 20): string {
  try {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    return lines.slice(-n).join('\n');
  } catch {
    return '(no log)';
  }
}
