// Every process the harness starts is registered here, and a small watcher process (reaper-main.ts) kills them when
// this process ends, however it ends: a failed before() that never reaches its after(), an uncaught error, SIGTERM
// from a watchdog, or even SIGKILL. The watcher learns of the end from its stdin pipe closing, which the kernel does
// for us in every case; an 'exit' handler alone cannot see a SIGKILL, and a child left running holds the test runner
// open for ever.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const REAPER_MAIN = fileURLToPath(new URL('./reaper-main.ts', import.meta.url));

let watcher: ChildProcess | undefined;
let watcherFailed = false;

function ensureWatcher(): ChildProcess | undefined {
  if (watcher || watcherFailed) return watcher;
  try {
    // Detached: a Ctrl-C to the terminal's process group must not kill the watcher before it has done its job.
    const child = spawn(process.execPath, [REAPER_MAIN, String(process.pid)], { stdio: ['pipe', 'ignore', 'inherit'], detached: true });
    // Neither the watcher nor its pipe may keep this process alive.
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    child.stdin?.on('error', () => {
      /* the watcher is gone: nothing left to tell it */
    });
    child.once('error', () => {
      watcherFailed = true;
    });
    watcher = child;
  } catch {
    watcherFailed = true;
  }
  return watcher;
}

/**
 * Registers a started process: its process group (when it leads one) and the pid itself are killed once this process
 * ends, unless `untrack` came first. Idempotent.
 */
export function track(pid: number): void {
  ensureWatcher()?.stdin?.write(`+${pid}\n`);
}

/** The process has ended by itself: its pid may be reused, so the watcher must forget it. */
export function untrack(pid: number): void {
  watcher?.stdin?.write(`-${pid}\n`);
}
