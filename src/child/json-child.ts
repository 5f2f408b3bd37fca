// A short-lived child process with one JSON request on its stdin and one JSON answer on its stdout: how the
// controller runs code whose memory it must not keep (the command-line parser, the certificate minting library).
// Code an isolate has loaded stays loaded for the isolate's life, and a worker thread leaves its allocations behind in
// the process's malloc arenas; what a child allocated goes back to the system when it exits.
import { spawn } from 'node:child_process';

/**
 * Runs `entry` (a module path) with the same Node and environment, sends it `request`, and resolves with its parsed
 * answer once it exits. `what` names the child in the error of one that exits without an answer (its last stderr
 * lines appended: a crash's stack says where).
 */
export function askJsonChild<T>(entry: string, request: unknown, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry], { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      try {
        resolve(JSON.parse(Buffer.concat(out).toString('utf8')) as T);
      } catch {
        const detail = Buffer.concat(err).toString('utf8').trim().split('\n').slice(-3).join(' ');
        reject(new Error(`${what} exited (${signal ?? `code ${code}`}) without an answer${detail ? `: ${detail}` : ''}`));
      }
    });
    child.stdin.end(JSON.stringify(request));
  });
}
