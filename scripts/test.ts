// `npm test`: every phase of the test run in order, each timed, with progress a person can follow and a time limit
// on each end-to-end file, so that no run can hang until CI's own limit.
//
//   node scripts/test.ts                      all phases: runtime typecheck lint unit build binaries e2e
//   node scripts/test.ts binaries e2e [FILTER...]  (npm run test:e2e -- e2e/suite)
//
// `binaries` (e2e/harness/prepare.ts) runs beside typecheck, unit and build; each e2e file runs in a `node --test` and
// a process group of its own as soon as the prepare steps it needs are ready (docs/testing.md has the schedule and
// why). Limits: PERSISTENT_IPS_E2E_FILE_TIMEOUT_S (default 600) a file, PERSISTENT_IPS_E2E_TIMEOUT_S (default 3000)
// all files; PERSISTENT_IPS_E2E_JOBS (default 3) files side by side, one fewer while binaries build. The harness's
// reaper kills whatever a file started when the file's process ends, however it ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { globSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { lowerGroupPriority, PREPARE_MODULE, Prepared, stepsNeededBy } from './e2e-schedule.ts';

const ROOT = resolve(import.meta.dirname, '..');
const PHASES = ['runtime', 'typecheck', 'lint', 'unit', 'build', 'binaries', 'e2e'] as const;
type Phase = (typeof PHASES)[number];

const FILE_LIMIT_S = Number(process.env['PERSISTENT_IPS_E2E_FILE_TIMEOUT_S'] ?? 600);
const TOTAL_LIMIT_S = Number(process.env['PERSISTENT_IPS_E2E_TIMEOUT_S'] ?? 3000);
/**
 * e2e files run side by side (each in its own process group, on its own control plane and ports). While binaries
 * still build, one fewer: each `go build` keeps both cores busy on its own. Once the builds are done, the files alone
 * leave the cores idle while they wait (grace periods, watches, quiet windows), and the last lane fills that.
 */
const JOBS = Number(process.env['PERSISTENT_IPS_E2E_JOBS'] ?? 3);
if (!Number.isInteger(JOBS) || JOBS < 1) {
  process.stderr.write(`test: PERSISTENT_IPS_E2E_JOBS must be a whole number of at least 1, not ${JSON.stringify(process.env['PERSISTENT_IPS_E2E_JOBS'])}\n`);
  process.exit(2);
}
const QUIET_HEARTBEAT_MS = 30_000;
const KILL_GRACE_MS = 15_000;

const say = (line: string) => process.stdout.write(`${line}\n`);
const fmt = (s: number) => (s >= 90 ? `${Math.floor(s / 60)} min ${Math.round(s % 60)} s` : `${s.toFixed(1)} s`);

const args = process.argv.slice(2);
const phases = args.filter((a): a is Phase => (PHASES as readonly string[]).includes(a));
const filters = args.filter((a) => !(PHASES as readonly string[]).includes(a));
const wanted: readonly Phase[] = phases.length > 0 ? phases : PHASES;

const running = new Set<ChildProcess>();
let interrupted: NodeJS.Signals | undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    interrupted = sig;
    say(`\ntest: ${sig}: stopping`);
    for (const child of running) if (child.pid) killGroup(child.pid, 'SIGTERM');
    setTimeout(() => process.exit(130), KILL_GRACE_MS).unref();
  });
}

function killGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    /* gone */
  }
}

interface Outcome {
  ok: boolean;
  seconds: number;
  /** Set when the watchdog stopped it. */
  timedOut?: boolean;
  output: string;
}

/**
 * Runs a command in its own process group with its output passed through, a line when it has been quiet for 30 s,
 * and (when `limitS` is set) a watchdog that stops the whole group.
 */
function run(
  label: string,
  command: string,
  argv: string[],
  opts: { limitS?: number; env?: NodeJS.ProcessEnv; buffered?: boolean; onLine?: (line: string) => void; onSpawn?: (child: ChildProcess) => void } = {},
): Promise<Outcome> {
  const t0 = Date.now();
  const elapsed = () => (Date.now() - t0) / 1000;
  return new Promise((done) => {
    const child = spawn(command, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, ...opts.env } });
    running.add(child);
    opts.onSpawn?.(child);
    let output = '';
    let last = Date.now();
    let timedOut = false;
    // Buffered (files running side by side): a file's output is printed whole when it ends, not interleaved.
    const pass = (stream: NodeJS.WritableStream) => (line: string) => {
      last = Date.now();
      output += `${line}\n`;
      opts.onLine?.(line);
      if (!opts.buffered) stream.write(`${line}\n`);
    };
    createInterface({ input: child.stdout! }).on('line', pass(process.stdout));
    createInterface({ input: child.stderr! }).on('line', pass(process.stderr));
    const ticker = setInterval(() => {
      if (Date.now() - last >= QUIET_HEARTBEAT_MS) {
        say(`test: ... ${label} still running (${fmt(elapsed())})`);
        last = Date.now();
      }
      if (opts.limitS !== undefined && !timedOut && elapsed() > opts.limitS) {
        timedOut = true;
        say(`test: ${label} ran past its limit of ${opts.limitS} s: stopping it (SIGTERM, SIGKILL after ${KILL_GRACE_MS / 1000} s)`);
        if (child.pid) killGroup(child.pid, 'SIGTERM');
        setTimeout(() => child.pid && killGroup(child.pid, 'SIGKILL'), KILL_GRACE_MS).unref();
      }
    }, 1000);
    const finish = (ok: boolean) => {
      clearInterval(ticker);
      running.delete(child);
      if (opts.buffered) process.stdout.write(output);
      done({ ok: ok && !timedOut, seconds: elapsed(), timedOut, output });
    };
    child.on('error', (err) => {
      say(`test: could not run ${command}: ${err.message}`);
      finish(false);
    });
    child.on('close', (code) => {
      // A runner that exits leaves nothing of its group behind (a stray would otherwise outlive the run).
      if (child.pid) killGroup(child.pid, 'SIGKILL');
      finish(code === 0);
    });
  });
}

/** The files that take a minute or more, by their length in the cold runs of 2026-11-27 (2 cores), longest first. */
const LONGEST_FIRST = [
  'e2e/suite/e2e.test.ts',
  'e2e/kubevirt/lifecycle.test.ts',
  'e2e/operability/cert-rotation.test.ts',
  'e2e/operability/apiserver-restart.test.ts',
  'e2e/allocator/allocator.test.ts',
  'e2e/operability/claim-ownership.test.ts',
  'e2e/operability/webhook.test.ts',
];

function e2eFiles(): string[] {
  const all = globSync('e2e/**/*.test.ts', { cwd: ROOT }).sort();
  // The harness's own tests first: when the control plane cannot start, that file says so most plainly. Then the
  // longest files, longest first, so that the lanes end together instead of one running a long file alone at the end
  // (in a cold run the lane order matters among the files virt-controller releases at once); the rest by name.
  const rank = (f: string) => {
    if (f.startsWith('e2e/harness/')) return -1;
    const i = LONGEST_FIRST.indexOf(f);
    return i < 0 ? LONGEST_FIRST.length : i;
  };
  const ordered = [...all].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  if (filters.length === 0) return ordered;
  const abs = filters.map((f) => relative(ROOT, resolve(f)));
  // A filter naming a file runs it even outside the glob (the watchdog's own test runs a fixture that way).
  const files = abs.filter((a) => !ordered.includes(a) && statSync(join(ROOT, a), { throwIfNoEntry: false })?.isFile());
  return [...ordered.filter((f) => abs.some((a) => f === a || f.startsWith(`${a.replace(/\/$/, '')}/`))), ...files];
}

/** "ℹ pass 12" style totals printed by the spec reporter. */
function totals(output: string): { tests: number; pass: number; fail: number } {
  const n = (k: string) => Number(new RegExp(`^ℹ ${k} (\\d+)`, 'm').exec(output)?.[1] ?? 0);
  return { tests: n('tests'), pass: n('pass'), fail: n('fail') + n('cancelled') };
}

const summary: string[] = [];
const fileLines: string[] = [];
let failed = false;

async function phase(name: Phase, body: () => Promise<boolean>): Promise<boolean> {
  if (!wanted.includes(name) || interrupted) return true;
  say(`\n=== test: ${name}`);
  const t0 = Date.now();
  const ok = await body();
  const s = (Date.now() - t0) / 1000;
  summary.push(`${name.padEnd(10)} ${ok ? 'ok    ' : 'FAILED'} ${fmt(s)}`);
  say(`=== test: ${name} ${ok ? 'passed' : 'FAILED'} in ${fmt(s)}`);
  if (!ok) failed = true;
  return ok;
}

/**
 * Lets the running e2e files have the CPU first: the builds still running then use what the files leave idle. Done
 * when the first file starts, not before: while the files wait for the control plane, its build is all there is to do.
 */
let lowered = false;
function lowerPriority(child: ChildProcess | undefined): void {
  if (lowered || child?.pid === undefined || child.exitCode !== null) return;
  lowered = true;
  const failure = lowerGroupPriority(child.pid, 10);
  if (failure) say(`test: could not lower the builds' CPU priority (${failure}); they run as they are`);
}

async function e2ePhase(prepared: Prepared | undefined): Promise<boolean> {
  const files = e2eFiles();
  if (files.length === 0) {
    say(`test: no e2e file matches ${filters.join(' ')}`);
    return false;
  }
  const needs = new Map(files.map((f) => [f, prepared ? stepsNeededBy(join(ROOT, f)) : []]));
  const t0 = Date.now();
  let allOk = true;
  const lines: string[] = [];
  const queue = [...files];
  let launched = 0;
  /** The next file whose steps are all ready; undefined when none is yet (or the queue is empty). */
  const next = (): string | undefined => {
    const i = queue.findIndex((f) => needs.get(f)!.every((id) => prepared === undefined || prepared.ready.has(id)));
    return i < 0 ? undefined : queue.splice(i, 1)[0];
  };
  // Most of an e2e file's time is waiting (grace periods, watches, quiet windows), not CPU: files run side by side.
  const lane = async () => {
    while (queue.length > 0 && !interrupted) {
      const file = next();
      if (file === undefined) {
        if (prepared === undefined || prepared.failed !== undefined || prepared.finished) {
          // What is left waits for a step that failed (or never reported): it cannot run.
          const blocked = queue.splice(0);
          const why = prepared?.failed !== undefined ? `the prepare step ${prepared.failed} failed` : 'its binaries were not prepared';
          say(`test: not run, ${why}: ${blocked.join(', ')}`);
          lines.push(...blocked.map((f) => `  ${f}: not run (${why}; it needs ${needs.get(f)!.join(', ')})`));
          allOk = false;
          return;
        }
        await prepared.changed;
        continue;
      }
      const spent = (Date.now() - t0) / 1000;
      if (spent >= TOTAL_LIMIT_S) {
        const skipped = [file, ...queue.splice(0)];
        say(`test: the e2e run reached its limit of ${TOTAL_LIMIT_S} s; not run: ${skipped.join(', ')}`);
        lines.push(...skipped.map((f) => `  ${f}: not run (time limit)`));
        allOk = false;
        return;
      }
      lowerPriority(building);
      launched++;
      say(`\n--- e2e ${launched}/${files.length} started ${fmt((Date.now() - started) / 1000)} into the run: ${file}`);
      const limitS = Math.min(FILE_LIMIT_S, Math.max(60, TOTAL_LIMIT_S - spent));
      const res = await run(file, process.execPath, ['--test', '--test-reporter=spec', '--test-force-exit', file], {
        limitS,
        env: { PERSISTENT_IPS_NO_BUILD: '1' },
        buffered: JOBS > 1,
      });
      const t = totals(res.output);
      const verdict = res.timedOut ? `STOPPED after ${limitS} s (limit)` : res.ok ? 'passed' : 'FAILED';
      const line = `${file}: ${verdict}, ${t.pass}/${t.tests} tests passed, ${fmt(res.seconds)}`;
      say(`--- ${line}`);
      lines.push(`  ${line}`);
      if (!res.ok) allOk = false;
    }
  };
  const lanes = Math.max(1, Math.min(JOBS, files.length));
  const whileBuilding = Math.max(1, lanes - 1);
  const afterBuild = async (): Promise<void> => {
    while (prepared !== undefined && !prepared.finished) await prepared.changed;
    if (prepared?.failed === undefined) await lane();
  };
  await Promise.all([...Array.from({ length: whileBuilding }, lane), ...Array.from({ length: lanes - whileBuilding }, afterBuild)]);
  fileLines.push(...lines);
  return allOk;
}

const started = Date.now();
let ok = await phase('runtime', async () => {
  say(`runtime: node ${process.version} (${process.execPath})`);
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 24) say(`runtime: Node 24 or newer is needed; run through npm so the node@24 devDependency is used`);
  return major >= 24;
});
let prepared: Prepared | undefined;
let building: ChildProcess | undefined;
let binaries: Promise<boolean> = Promise.resolve(true);
if (ok && wanted.includes('binaries')) {
  const p = new Prepared();
  prepared = p;
  binaries = phase('binaries', async () => {
    const res = await run('binaries', process.execPath, [PREPARE_MODULE], { onLine: (l) => p.line(l), onSpawn: (c) => (building = c) });
    p.finish();
    return res.ok;
  });
}
// The package.json scripts of the same names (test:unit for unit).
for (const name of ['typecheck', 'lint', 'unit', 'build'] as const) {
  const script = name === 'unit' ? 'test:unit' : name;
  ok = ok && (await phase(name, async () => (await run(script, 'npm', ['run', '--silent', script])).ok));
}
if (!ok && building?.pid) {
  // Nothing will use the binaries of this run; a later run finds what was built in the cache.
  say('test: stopping the binaries build');
  killGroup(building.pid, 'SIGTERM');
}
if (ok && wanted.includes('e2e') && !interrupted) {
  ok = await phase('e2e', () => e2ePhase(prepared));
}
ok = (await binaries) && ok;

say(`\n=== test: summary (${fmt((Date.now() - started) / 1000)} in all)`);
for (const l of [...summary, ...fileLines]) say(l);
process.exitCode = ok && !failed && !interrupted ? 0 : 1;
