// The controller under test for the allocator cases: the built CLI (`dist/cli/main.js run`) as a separate process,
// serving the launcher-pod webhook on a port the test registered, its JSON log kept in memory and in a file.
// PERSISTENT_IPS_E2E_CLI=src/cli/main.ts runs the sources instead (for quick iterations; `npm test` uses the build).
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort, poll } from '../harness/index.ts';
import { localWebhookFlags } from '../local/webhook-config.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const cliFromEnv = process.env['PERSISTENT_IPS_E2E_CLI'];
export const CLI = cliFromEnv ? (isAbsolute(cliFromEnv) ? cliFromEnv : join(REPO_ROOT, cliFromEnv)) : join(REPO_ROOT, 'dist', 'cli', 'main.js');
/** Node 24 from the `node` devDependency. */
export const NODE = existsSync(join(REPO_ROOT, 'node_modules', '.bin', 'node')) ? join(REPO_ROOT, 'node_modules', '.bin', 'node') : process.execPath;

export type LogLine = Record<string, unknown> & { level?: string; msg?: string };

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface ControllerOptions {
  name: string;
  kubeconfig: string;
  logDir: string;
  webhookPort: number;
  extraArgs?: string[];
}

export class Controller {
  readonly name: string;
  readonly child: ChildProcess;
  readonly probePort: number;
  readonly logFile: string;
  readonly logs: LogLine[] = [];
  readonly other: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  #file: WriteStream;

  private constructor(opts: ControllerOptions, probePort: number, metricsPort: number) {
    this.name = opts.name;
    this.probePort = probePort;
    this.logFile = join(opts.logDir, `controller-${opts.name}.log`);
    const args = [
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
      ...(opts.extraArgs ?? []),
    ];
    this.#file = createWriteStream(this.logFile, { flags: 'a' });
    this.#file.write(`# ${NODE} ${args.join(' ')}\n`);
    this.child = spawn(NODE, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(this.child);
    this.exited = new Promise((resolve) => {
      this.child.once('close', (code, signal) => {
        live.delete(this.child);
        this.#exit = { code, signal };
        this.#file.end();
        resolve(this.#exit);
      });
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      this.#file.write(`${line}\n`);
      try {
        this.logs.push(JSON.parse(line) as LogLine);
      } catch {
        this.other.push(line);
      }
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => {
      this.#file.write(`[stderr] ${line}\n`);
      this.other.push(line);
    });
  }

  /** Starts the controller and waits for /readyz (every informer listed). */
  static async start(opts: ControllerOptions): Promise<Controller> {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
    const c = new Controller(opts, await freePort(), await freePort());
    const died = () => (c.#exit ? `controller ${c.name} exited (${JSON.stringify(c.#exit)}):\n${c.tail(20)}` : undefined);
    try {
      await poll(
        `controller ${c.name} /readyz`,
        60_000,
        async () => ((await fetch(`http://127.0.0.1:${c.probePort}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200 ? true : undefined),
        { intervalMs: 100, abort: died },
      );
    } catch (err) {
      await c.kill();
      throw err;
    }
    return c;
  }

  tail(n: number): string {
    return [...this.logs.slice(-n).map((l) => JSON.stringify(l)), ...this.other.slice(-5)].join('\n');
  }

  /** Waits until a log line matches (fails early if the process exits). */
  waitForLog(what: string, pred: (l: LogLine) => boolean, timeoutMs = 30_000): Promise<LogLine> {
    return poll(`controller ${this.name} to log ${what}`, timeoutMs, async () => this.logs.find(pred), {
      intervalMs: 50,
      abort: () => (this.#exit ? `controller ${this.name} exited:\n${this.tail(20)}` : undefined),
    });
  }

  async stop(graceMs = 20_000): Promise<void> {
    if (this.#exit) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** SIGKILL: no chance to finish anything. */
  async kill(): Promise<void> {
    if (!this.#exit) this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** Runs a CLI command (e.g. `status`) to completion; returns its exit code and output. */
export function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, [CLI, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
