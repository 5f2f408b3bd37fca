// The controller under test as a separate process, for every end-to-end suite: the BUILT CLI (`dist/cli/main.js
// run`), as an operator runs it, with its JSON log captured (in memory for assertions, in a file for people), and its
// probes, metrics and launcher-pod webhook on local ports (the webhook on the port the test registered with the API
// server, see webhook-config.ts). PERSISTENT_IPS_E2E_CLI=src/cli/main.ts runs the sources instead (for quick
// iterations; `npm test` uses the build).
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort, poll } from '../harness/index.ts';
import { REPO_ROOT } from '../harness/paths.ts';
import { track, untrack } from '../harness/reaper.ts';
import { localWebhookFlags } from './webhook-config.ts';

export { REPO_ROOT };
const cliFromEnv = process.env['PERSISTENT_IPS_E2E_CLI'];
export const CLI = cliFromEnv ? (isAbsolute(cliFromEnv) ? cliFromEnv : join(REPO_ROOT, cliFromEnv)) : join(REPO_ROOT, 'dist', 'cli', 'main.js');
/** Node 24 from the `node` devDependency (the machine's Node 20 cannot run @kubernetes/client-node 2.x). */
export const NODE = existsSync(join(REPO_ROOT, 'node_modules', '.bin', 'node')) ? join(REPO_ROOT, 'node_modules', '.bin', 'node') : process.execPath;

/** One line of the controller's JSON log. */
export type LogLine = Record<string, unknown> & { level?: string | number; msg?: string; time?: string | number };
export type ExitStatus = { code: number | null; signal: NodeJS.Signals | null };

/** Log lines at warn level or above (pino numeric levels 40+, or named levels). */
export const isWarnOrWorse = (l: LogLine): boolean => (typeof l.level === 'number' ? l.level >= 40 : ['warn', 'error', 'fatal'].includes(String(l.level)));

/** One sample of a Prometheus text exposition. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Prometheus text exposition → samples, of the metrics whose names pass `want` (all when omitted). */
export function parsePrometheus(text: string, want?: (name: string) => boolean): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE_LINE.exec(line);
    if (!m || (want && !want(m[1]!))) continue;
    const labels: Record<string, string> = {};
    if (m[3]) for (const l of m[3].matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, '$1');
    samples.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return samples;
}

/** Sum of the samples of `name` whose labels include `labels`. */
export function sumOf(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);
}

export interface ControllerOptions {
  /** For file names (`<logDir>/controller-<name>.log`) and messages. */
  name: string;
  kubeconfig: string;
  logDir: string;
  /** Port of the launcher-pod webhook (HTTPS on 127.0.0.1, certificate for 127.0.0.1). */
  webhookPort: number;
  /** --namespace. */
  namespace?: string;
  /** --leader-elect. */
  leaderElect?: boolean;
  /** Value of --feature-gates. */
  featureGates?: string;
  /** --resync-period in seconds. */
  resyncPeriodS?: number;
  /** More flags (e.g. --webhook-cert-validity 20). */
  extraArgs?: string[];
  /** Wait for /readyz (default true; without it, start returns once the process is spawned and ports are not retried). */
  waitReady?: boolean;
  /** How long to wait for /readyz (default 60 s). */
  readyTimeoutMs?: number;
  /** Node's arguments and environment instead of the CLI with the flags above (bench/: the Deployment's own). */
  command?: (probePort: number, metricsPort: number) => { args: string[]; env: NodeJS.ProcessEnv };
}

const ADDRESS_IN_USE = /EADDRINUSE|address already in use/i;
const live = new Set<ChildProcess>();
// Never leave a controller behind, whatever happens to the test process.
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export class ControllerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly probePort: number;
  readonly metricsPort: number;
  readonly webhookPort: number;
  readonly logFile: string;
  readonly args: string[];
  readonly startedAt = Date.now();
  /** Every JSON line the process wrote on stdout, in order. */
  readonly logs: LogLine[] = [];
  /** Anything else it wrote (stderr, non-JSON stdout). */
  readonly otherOutput: string[] = [];
  readonly exited: Promise<ExitStatus>;
  #exit: ExitStatus | undefined;
  #file: WriteStream;
  #closing: Promise<void> | undefined;

  private constructor(opts: ControllerOptions, attempt: number, probePort: number, metricsPort: number) {
    this.name = opts.name;
    this.probePort = probePort;
    this.metricsPort = metricsPort;
    this.webhookPort = opts.webhookPort;
    this.logFile = join(opts.logDir, `controller-${opts.name}${attempt > 1 ? `-try${attempt}` : ''}.log`);
    const command = opts.command?.(probePort, metricsPort);
    this.args = command?.args ?? [
      CLI,
      'run',
      '--kubeconfig',
      opts.kubeconfig,
      '--metrics-bind-address',
      `127.0.0.1:${metricsPort}`,
      // Plain HTTP: the suites read /metrics without a token (e2e/operability/secure-metrics.test.ts covers HTTPS).
      '--metrics-secure=false',
      '--health-probe-bind-address',
      `127.0.0.1:${probePort}`,
      '--log-level',
      'debug',
      ...localWebhookFlags(opts.webhookPort),
      ...(opts.namespace ? ['--namespace', opts.namespace] : []),
      ...(opts.leaderElect ? ['--leader-elect'] : []),
      ...(opts.featureGates !== undefined ? ['--feature-gates', opts.featureGates] : []),
      ...(opts.resyncPeriodS !== undefined ? ['--resync-period', String(opts.resyncPeriodS)] : []),
      ...(opts.extraArgs ?? []),
    ];
    this.#file = createWriteStream(this.logFile, { flags: 'a' });
    this.#file.write(`# ${NODE} ${this.args.join(' ')}\n`);
    this.child = spawn(NODE, this.args, { cwd: REPO_ROOT, env: command?.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    if (this.child.pid === undefined) throw new Error(`could not start controller ${opts.name}`);
    this.pid = this.child.pid;
    live.add(this.child);
    track(this.pid);
    this.exited = new Promise((resolve) => {
      // 'close' (not 'exit'): every line the process wrote has been read by then
      this.child.once('close', (code, signal) => {
        live.delete(this.child);
        untrack(this.pid);
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      this.#file.write(`${line}\n`);
      try {
        const parsed = JSON.parse(line) as unknown;
        if (parsed && typeof parsed === 'object') this.logs.push(parsed as LogLine);
        else this.otherOutput.push(line);
      } catch {
        this.otherOutput.push(line);
      }
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => {
      this.#file.write(`[stderr] ${line}\n`);
      this.otherOutput.push(line);
    });
  }

  /** Starts the controller and (by default) waits until /readyz answers 200 (informers listed, webhook certificate loaded). */
  static async start(opts: ControllerOptions): Promise<ControllerProcess> {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
    for (let attempt = 1; ; attempt++) {
      const [probePort, metricsPort] = [await freePort(), await freePort()];
      const p = new ControllerProcess(opts, attempt, probePort, metricsPort);
      if (opts.waitReady === false) return p;
      try {
        await p.waitReady(opts.readyTimeoutMs ?? 60_000);
        return p;
      } catch (err) {
        await p.kill();
        // a probe or metrics port taken between discovery and bind: try again with fresh ports
        if (attempt < 4 && p.otherOutput.concat(p.logs.map((l) => JSON.stringify(l))).some((l) => ADDRESS_IN_USE.test(l))) continue;
        throw err;
      }
    }
  }

  get alive(): boolean {
    return this.#exit === undefined;
  }

  /** Why the process is gone (with its last output), or undefined while it runs. */
  diedReason(): string | undefined {
    return this.#exit ? `controller ${this.name} exited (code ${this.#exit.code}, signal ${this.#exit.signal}); last output:\n${this.tail(15)}` : undefined;
  }

  /** The last `n` log lines, for messages. */
  tail(n: number): string {
    return [...this.logs.slice(-n).map((l) => JSON.stringify(l)), ...this.otherOutput.slice(-5)].join('\n');
  }

  /** HTTP status of a probe endpoint (0 when nothing answers). */
  async probe(path: 'readyz' | 'healthz'): Promise<number> {
    try {
      return (await fetch(`http://127.0.0.1:${this.probePort}/${path}`, { signal: AbortSignal.timeout(2000) })).status;
    } catch {
      return 0;
    }
  }

  async waitReady(timeoutMs = 60_000): Promise<void> {
    await poll(`controller ${this.name} /readyz`, timeoutMs, async () => ((await this.probe('readyz')) === 200 ? true : undefined), {
      intervalMs: 100,
      abort: () => this.diedReason(),
    });
  }

  async metrics(): Promise<Sample[]> {
    const res = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) });
    if (res.status !== 200) throw new Error(`controller ${this.name} /metrics: HTTP ${res.status}`);
    return parsePrometheus(await res.text());
  }

  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    return sumOf(await this.metrics(), name, labels);
  }

  /** Log lines from index `from` on that match `pred`. */
  logsMatching(pred: (l: LogLine) => boolean, from = 0): LogLine[] {
    return this.logs.slice(from).filter(pred);
  }

  /** Waits for a log line (from index `from` on) that matches `pred`; fails early if the process exits. */
  async waitForLog(what: string, pred: (l: LogLine) => boolean, opts: { from?: number; timeoutMs?: number } = {}): Promise<LogLine> {
    return poll(`controller ${this.name} to log ${what}`, opts.timeoutMs ?? 30_000, async () => this.logs.slice(opts.from ?? 0).find(pred), {
      intervalMs: 50,
      abort: () => this.diedReason(),
    });
  }

  /** SIGTERM (graceful shutdown), then SIGKILL after `graceMs`. */
  async stop(graceMs = 20_000): Promise<ExitStatus> {
    if (!this.#exit) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
    return this.#finish();
  }

  /** SIGKILL: the process gets no chance to finish anything (no Lease release, no drain). */
  async kill(): Promise<ExitStatus> {
    if (!this.#exit) this.child.kill('SIGKILL');
    return this.#finish();
  }

  async #finish(): Promise<ExitStatus> {
    const exit = await this.exited;
    this.#closing ??= new Promise<void>((resolve) => this.#file.end(() => resolve()));
    await this.#closing;
    return exit;
  }
}

/** Runs a CLI command (e.g. `status`) to completion; returns its exit code and output. */
export function runCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, [CLI, ...args], { cwd: options.cwd ?? REPO_ROOT, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    if (child.pid !== undefined) track(child.pid);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code) => {
      if (child.pid !== undefined) untrack(child.pid);
      resolve({ code, stdout, stderr });
    });
  });
}
