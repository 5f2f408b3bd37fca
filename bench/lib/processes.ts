// Every process the benchmark starts (controllers, the limit client) is registered here, so that a failure, Ctrl-C
// or an exit stops all of them: stopAll() (orderly: SIGTERM, then SIGKILL) and killAllSync() (last resort).
import { signalGroup, spawnLogged, stopProcess, type ManagedProcess } from '../../e2e/harness/process.ts';

const live = new Set<ManagedProcess>();
/** Processes someone else started for us (the control plane's), killed on exit if still there. */
const external = new Set<number>();

export function trackExternal(pids: readonly number[]): void {
  for (const pid of pids) external.add(pid);
}

/** Once their owner has stopped them: their pids may be reused by unrelated processes. */
export function untrackExternal(pids: readonly number[]): void {
  for (const pid of pids) external.delete(pid);
}

export function spawnTracked(name: string, command: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv): ManagedProcess {
  const p = spawnLogged(name, command, args, logFile, env);
  live.add(p);
  void p.exited.then(() => live.delete(p));
  return p;
}

export async function stopTracked(p: ManagedProcess, graceMs = 15_000): Promise<void> {
  await stopProcess(p, graceMs);
  live.delete(p);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((p) => stopTracked(p, 5_000)));
}

export function killAllSync(): void {
  // Each was spawned as its group's leader: the group signal reaches the process and what it started.
  for (const pid of external) signalGroup(pid, 'SIGKILL');
  external.clear();
  for (const p of live) if (!p.hasExited()) signalGroup(p.pid, 'SIGKILL');
}
