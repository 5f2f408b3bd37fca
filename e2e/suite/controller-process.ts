// The controller under test as a separate process: the built CLI (`dist/cli/main.js run`), exactly as an operator
// runs it, with its JSON log captured (kept in memory for assertions, and in a file for people), its probes and
// its metrics on fresh local ports.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort, poll } from '../harness/index.ts';
import { localWebhookFlags } from '../local/webhook-config.ts';
import { parsePrometheus, type Sample } from './kube.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = join(REPO_ROOT, 'dist', 'cli', 'main.js');
/** Node 24 from the `node` devDependency (the machine's Node 20 cannot run @kubernetes/client-node 2.x). */
export const NODE = existsSync(join(REPO_ROOT, 'node_modules', '.bin', 'node')) ? join(REPO_ROOT, 'node_modules', '.bin', 'node') : process.execPath;

/** One line of the controller's JSON log. */
export type LogLine = Record<string, unknown> & { level?: string; msg?: string; time?: string };

export interface ControllerOptions {
  /** For file names and messages. */
  name: string;
  kubeconfig: string;
  logDir: string;
  namespace?: string;
  /** Value of --feature-gates. */
  featureGates?: string;
  /** --resync-period in seconds. */
  resyncPeriodS?: number;
  /**
   * Serve the launcher-pod webhook on 127.0.0.1:PORT (the port the suite's MutatingWebhookConfiguration calls; see
   * e2e/local/webhook-config.ts). Every controller of the suite uses the same port: only one runs at a time.
   */
  webhookPort: number;
  /** More flags. */
  extraArgs?: string[];
  /** How long to wait for /readyz (default 60 s). */
  readyTimeoutMs?: number;
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
  readonly logFile: string;
  readonly args: string[];
  /** Every JSON line the process wrote on stdout, in order. */
  readonly logs: LogLine[] = [];
  /** Anything else it wrote (stderr, non-JSON stdout). */
  readonly otherOutput: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  #file: WriteStream;
  #closing: Promise<void> | undefined;

  private constructor(opts: ControllerOptions, attempt: number, probePort: number, metricsPort: number) {
    this.name = opts.name;
    this.probePort = probePort;
    this.metricsPort = metricsPort;
    this.logFile = join(opts.logDir, `controller-${opts.name}${attempt > 1 ? `-try${attempt}` : ''}.log`);
    this.args = [
      CLI,
      'run',
      '--kubeconfig',
      opts.kubeconfig,
      '--metrics-bind-address',
      `127.0.0.1:${metricsPort}`,
      '--health-probe-bind-address',
      `127.0.0.1:${probePort}`,
      '--log-level',
      'debug',
      ...localWebhookFlags(opts.webhookPort),
      ...(opts.namespace ? ['--namespace', opts.namespace] : []),
      ...(opts.featureGates !== undefined ? ['--feature-gates', opts.featureGates] : []),
      ...(opts.resyncPeriodS !== undefined ? ['--resync-period', String(opts.resyncPeriodS)] : []),
      ...(opts.extraArgs ?? []),
    ];
    this.#file = createWriteStream(this.logFile, { flags: 'a' });
    this.#file.write(`# ${NODE} ${this.args.join(' ')}\n`);
    this.child = spawn(NODE, this.args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    if (this.child.pid === undefined) throw new Error(`could not start controller ${opts.name}`);
    this.pid = this.child.pid;
    live.add(this.child);
    this.exited = new Promise((resolve) => {
      // 'close' (not 'exit'): every line the process wrote has been read by then
      this.child.once('close', (code, signal) => {
        live.delete(this.child);
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

  /** Starts the process and returns at once (without waiting for readiness; ports are not retried). */
  static async spawn(opts: ControllerOptions): Promise<ControllerProcess> {
    return new ControllerProcess(opts, 1, await freePort(), await freePort());
  }

  /** Starts the controller and waits until /readyz answers 200 (informers listed, webhook certificate loaded). */
  static async start(opts: ControllerOptions): Promise<ControllerProcess> {
    for (let attempt = 1; ; attempt++) {
      const [probePort, metricsPort] = [await freePort(), await freePort()];
      const p = new ControllerProcess(opts, attempt, probePort, metricsPort);
      try {
        await p.waitReady(opts.readyTimeoutMs ?? 60_000);
        return p;
      } catch (err) {
        await p.kill();
        // a port taken between discovery and bind: try again with fresh ports
        if (attempt < 4 && p.otherOutput.concat(p.logs.map((l) => JSON.stringify(l))).some((l) => ADDRESS_IN_USE.test(l))) continue;
        throw err;
      }
    }
  }

  get alive(): boolean {
    return this.#exit === undefined;
  }

  get exitStatus(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.#exit;
  }

  #diedReason = (): string | undefined =>
    this.#exit
      ? `controller ${this.name} exited (code ${this.#exit.code}, signal ${this.#exit.signal}); last output:\n${this.tail(15)}`
      : undefined;

  /** The last `n` log lines, for messages. */
  tail(n: number): string {
    return [...this.logs.slice(-n).map((l) => JSON.stringify(l)), ...this.otherOutput.slice(-5)].join('\n');
  }

  /** Whether /readyz answers 200 right now. */
  async ready(): Promise<boolean> {
    try {
      return (await fetch(`http://127.0.0.1:${this.probePort}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200;
    } catch {
      return false;
    }
  }

  async waitReady(timeoutMs = 60_000): Promise<void> {
    await poll(
      `controller ${this.name} /readyz`,
      timeoutMs,
      async () => ((await fetch(`http://127.0.0.1:${this.probePort}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200 ? true : undefined),
      { intervalMs: 100, abort: this.#diedReason },
    );
  }

  /** HTTP status of /healthz (0 when nothing answers). */
  async healthz(): Promise<number> {
    try {
      return (await fetch(`http://127.0.0.1:${this.probePort}/healthz`, { signal: AbortSignal.timeout(2000) })).status;
    } catch {
      return 0;
    }
  }

  async metrics(): Promise<Sample[]> {
    const res = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) });
    if (res.status !== 200) throw new Error(`controller ${this.name} /metrics: HTTP ${res.status}`);
    return parsePrometheus(await res.text());
  }

  /** Sum of the samples of `name` whose labels include `labels`. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    return (await this.metrics())
      .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
      .reduce((n, s) => n + s.value, 0);
  }

  /** Log lines from index `from` on that match `pred`. */
  logsMatching(pred: (l: LogLine) => boolean, from = 0): LogLine[] {
    return this.logs.slice(from).filter(pred);
  }

  /** Waits for a log line (from index `from` on) that matches `pred`; fails early if the process exits. */
  async waitForLog(what: string, pred: (l: LogLine) => boolean, opts: { from?: number; timeoutMs?: number } = {}): Promise<LogLine> {
    return poll(`controller ${this.name} to log ${what}`, opts.timeoutMs ?? 30_000, async () => this.logs.slice(opts.from ?? 0).find(pred), {
      intervalMs: 50,
      abort: this.#diedReason,
    });
  }

  /** SIGTERM (graceful shutdown), then SIGKILL after `graceMs`. */
  async stop(graceMs = 20_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.#exit) return this.#finish();
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
    return this.#finish();
  }

  /** SIGKILL: the process gets no chance to finish anything. */
  async kill(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.#exit) this.child.kill('SIGKILL');
    await this.exited;
    return this.#finish();
  }

  async #finish(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const exit = await this.exited;
    this.#closing ??= new Promise<void>((resolve) => this.#file.end(() => resolve()));
    await this.#closing;
    return exit;
  }
}

/** Whether a log line is about namespace `ns` (the reconciler's lines carry `namespace`). */
export const inNamespace = (ns: string) => (l: LogLine): boolean => l['namespace'] === ns;
