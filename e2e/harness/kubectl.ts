// Runs the version-matched kubectl (falling back to the system one) against a kubeconfig.
import { spawn } from 'node:child_process';
import { kubectlPath } from './binaries.ts';

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface KubectlOptions {
  kubeconfig: string;
  /** Directory of the built binaries (uses its kubectl when present). */
  binDir?: string;
  /** Written to kubectl's stdin (e.g. a manifest for `apply -f -`). */
  input?: string;
  /** Throw when kubectl exits non-zero (default true). */
  check?: boolean;
  timeoutMs?: number;
}

export async function runKubectl(args: string[], opts: KubectlOptions): Promise<KubectlResult> {
  const bin = kubectlPath(opts.binDir);
  const child = spawn(bin, ['--kubeconfig', opts.kubeconfig, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    timeout: opts.timeoutMs ?? 60_000,
    env: { ...process.env, KUBECONFIG: opts.kubeconfig },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  // kubectl may exit without reading its stdin (a command that takes no input, refused at once): writing to it then
  // fails with EPIPE, which is not the command's outcome; its exit status and stderr are (seen once under a cold run's
  // load, as an uncaught error that failed the test).
  child.stdin.on('error', () => undefined);
  child.stdin.end(opts.input);
  const code = await new Promise<number>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (c) => resolve(c ?? -1));
  });
  if (code !== 0 && opts.check !== false) {
    throw new Error(`kubectl ${args.join(' ')} exited ${code}: ${stderr.trim() || stdout.trim()}`);
  }
  return { code, stdout, stderr };
}
