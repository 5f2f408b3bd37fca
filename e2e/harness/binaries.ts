// The control-plane binaries: built once by e2e/controlplane/build.sh into a cache outside the work tree.
import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { BUILD_SCRIPT } from './paths.ts';

export interface Binaries {
  binDir: string;
  etcd: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  /** The version-matched kubectl when it could be built, else the system one. */
  kubectl: string;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The kubectl to use: `binDir/kubectl` when built, else the first `kubectl` on PATH, else /usr/bin/kubectl. */
export function kubectlPath(binDir?: string): string {
  if (binDir && executable(join(binDir, 'kubectl'))) return join(binDir, 'kubectl');
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && executable(join(dir, 'kubectl'))) return join(dir, 'kubectl');
  }
  return '/usr/bin/kubectl';
}

export function binariesIn(binDir: string): Binaries {
  return {
    binDir,
    etcd: join(binDir, 'etcd'),
    kubeApiserver: join(binDir, 'kube-apiserver'),
    kubeControllerManager: join(binDir, 'kube-controller-manager'),
    kubectl: kubectlPath(binDir),
  };
}

/**
 * True where a build must not start: inside a test file (node:test sets NODE_TEST_CONTEXT in the processes it runs),
 * or when PERSISTENT_IPS_NO_BUILD=1. A build takes minutes cold and would run under a hook's timeout with its output
 * held back by the runner; `npm test` builds in a step of its own before any test file (e2e/harness/prepare.ts).
 */
export function buildForbiddenHere(): boolean {
  return process.env['PERSISTENT_IPS_NO_BUILD'] === '1' || process.env['NODE_TEST_CONTEXT'] !== undefined;
}

export const NOT_PREPARED_HINT =
  'build them first with `npm run test:prepare` (`npm test` does this before any test file; the first build takes several minutes)';

/**
 * Runs the build script (a no-op taking a few ms when the binaries are cached; 6-12 min cold on 2 cores) and
 * returns the binaries. Its progress lines go to `onLog`. `PERSISTENT_IPS_CONTROLPLANE_BIN` short-cuts everything:
 * a directory that already holds etcd, kube-apiserver and kube-controller-manager. Where a build is forbidden
 * (`build: false`, or by default inside a test file) missing binaries are an error at once, not a build.
 */
export async function ensureBinaries(onLog: (line: string) => void = () => {}, opts: { build?: boolean } = {}): Promise<Binaries> {
  const override = process.env.PERSISTENT_IPS_CONTROLPLANE_BIN;
  if (override) return binariesIn(override);
  const bins = binariesIn(await runBuildScript(BUILD_SCRIPT, 'the control plane', opts.build ?? !buildForbiddenHere(), onLog));
  for (const p of [bins.etcd, bins.kubeApiserver, bins.kubeControllerManager]) {
    if (!executable(p)) throw new Error(`${p} is missing after the build`);
  }
  return bins;
}

/**
 * Runs a build script of the prepare step (`build.sh`, or `build.sh --check` where `build` is false) and returns the
 * directory it printed last on stdout. Its progress lines (stderr) go to `onLog`. `--check` exiting 3 means "not
 * built": an error at once that names `what` and the command that builds it.
 */
export async function runBuildScript(script: string, what: string, build: boolean, onLog: (line: string) => void = () => {}): Promise<string> {
  let stdout = '';
  const lines: string[] = [];
  const say = (l: string) => {
    lines.push(l);
    onLog(l);
  };
  const code = await new Promise<number | string>((resolve, reject) => {
    const child = spawn('bash', [script, ...(build ? [] : ['--check'])], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    let partial = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      const parts = (partial + d).split('\n');
      partial = parts.pop() ?? '';
      for (const l of parts) say(l);
    });
    child.on('error', reject);
    child.on('close', (c, signal) => {
      if (partial) say(partial);
      resolve(c ?? signal ?? 'unknown');
    });
  });
  if (!build && code === 3) throw new Error(`${what} is not built: ${NOT_PREPARED_HINT}`);
  if (code !== 0) throw new Error(`${script} failed (${code}): ${lines.slice(-5).join(' / ') || 'no output'}`);
  const dir = stdout.trim().split('\n').pop() ?? '';
  if (!dir) throw new Error(`${script} printed no bin directory`);
  return dir;
}
