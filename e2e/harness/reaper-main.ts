// The watcher behind reaper.ts (test infrastructure). stdin carries "+PID" / "-PID" lines from the process that
// started it; when stdin closes, that process has ended, and every PID still registered is stopped: SIGTERM to its
// process group and to itself, SIGKILL to whatever is left after a grace period.
import { createInterface } from 'node:readline';

const GRACE_MS = Number(process.env['PERSISTENT_IPS_REAPER_GRACE_MS'] ?? 5000);
const pids = new Set<number>();

// The parent's terminal signals are not ours to obey: we are the last line of defence.
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});

function signal(pid: number, sig: NodeJS.Signals): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, sig);
    } catch {
      /* not a group leader, or gone */
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

createInterface({ input: process.stdin })
  .on('line', (line) => {
    const pid = Number(line.slice(1));
    if (!Number.isInteger(pid) || pid <= 1) return;
    if (line.startsWith('+')) pids.add(pid);
    else if (line.startsWith('-')) pids.delete(pid);
  })
  .on('close', reap);

// Stopped itself (e.g. a `pkill -f` of a whole clone's processes): still stop everything registered first, or those
// would be orphans that nothing else will ever stop.
process.on('SIGTERM', reap);

let reaping = false;
function reap(): void {
  if (reaping) return;
  reaping = true;
  if (pids.size === 0) process.exit(0);
  for (const pid of pids) signal(pid, 'SIGTERM');
  const deadline = Date.now() + GRACE_MS;
  const timer = setInterval(() => {
    const left = [...pids].filter(alive);
    if (left.length === 0 || Date.now() >= deadline) {
      for (const pid of pids) signal(pid, 'SIGKILL');
      clearInterval(timer);
      process.exit(0);
    }
  }, 100);
}
