// What /proc says about a process: memory (VmRSS, VmHWM) and CPU time.
import { readdirSync, readFileSync } from 'node:fs';
import { round } from './stats.ts';

const CLK_TCK = 100;

export interface ProcMemory {
  rssKb: number;
  /** Peak resident set size ("high water mark"). */
  hwmKb: number;
}

export function procMemory(pid: number): ProcMemory | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+)\\s+kB`, 'm').exec(text)?.[1] ?? NaN);
    return { rssKb: kb('VmRSS'), hwmKb: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

/**
 * User and system (in the kernel: system calls, page faults) CPU seconds of a /proc/.../stat line, and `children`: user +
 * system CPU of the child processes it has waited for (the controller's command-line parser and certificate minting
 * run in short-lived children), which user and system leave out.
 */
function statTimes(stat: string) {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After "pid (comm) ": state is field 3 → index 0; utime is field 14 → index 11, stime index 12, then the reaped
  // children's cutime and cstime.
  return { user: Number(fields[11]) / CLK_TCK, system: Number(fields[12]) / CLK_TCK, children: (Number(fields[13]) + Number(fields[14])) / CLK_TCK };
}

/** User and system CPU seconds the process has used so far (undefined once it is gone). */
export function procCpuTimes(pid: number): ReturnType<typeof statTimes> | undefined {
  try {
    return statTimes(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** User + system CPU seconds the process has used so far (undefined once it is gone). */
export function procCpuSeconds(pid: number): number | undefined {
  const t = procCpuTimes(pid);
  return t && t.user + t.system;
}

/**
 * CPU seconds so far by thread name (digits at the end dropped, so V8's helper threads add up under "V8Worker"),
 * leaving out threads that used none.
 */
export function procThreadCpuSeconds(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/\d+$/, '');
    const { user, system } = statTimes(stat);
    const s = user + system;
    if (s > 0) out[name] = (out[name] ?? 0) + s;
  }
  return out;
}

/** CPU seconds used by each of `pids` between construction and `end()`. */
export class CpuWindow {
  /** Process name → pid and its CPU seconds when the window began. */
  readonly #start = new Map<string, { pid: number; cpu: number }>();
  readonly #self = process.cpuUsage();

  constructor(pids: Record<string, number>) {
    for (const [name, pid] of Object.entries(pids)) this.add(name, pid, procCpuSeconds(pid) ?? 0);
  }

  /** A process started during the window counts from 0. */
  add(name: string, pid: number, cpu = 0): void {
    this.#start.set(name, { pid, cpu });
  }

  /** Seconds of CPU per process (plus `bench` for this process); call before one of them exits, so its figure survives it. */
  end(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, { pid, cpu }] of this.#start) {
      const now = procCpuSeconds(pid);
      if (now !== undefined) out[name] = round(now - cpu, 2);
    }
    const self = process.cpuUsage(this.#self);
    out.bench = round((self.user + self.system) / 1e6, 2);
    return out;
  }
}
