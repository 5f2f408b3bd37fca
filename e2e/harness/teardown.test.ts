// Issue 10: a setup that fails (or a run that is stopped) leaves no process behind and never holds the runner open.
// Each case runs fixtures/failing-setup.fixture.ts under a `node --test` of its own, as scripts/test.ts runs every
// e2e file, and checks that the runner ends and that every process the fixture started is gone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isAlive } from './process.ts';
import { poll } from './kubehttp.ts';

const TEST_SCRIPT = fileURLToPath(new URL('../../scripts/test.ts', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./fixtures/failing-setup.fixture.ts', import.meta.url));
/** Generous: this bounds a hang (which would otherwise last for ever), it does not measure speed. */
const RUNNER_MUST_END_MS = 120_000;
const CHILDREN_MUST_GO_MS = 30_000;

interface Run {
  pid: number;
  pidsFile: string;
  ended: Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>;
}

/**
 * Runs the fixture in `mode` under a `node --test` of its own, or (`watchdogS`) under `npm test`'s e2e phase with that
 * limit for the file.
 */
function runFixture(mode: string, watchdogS?: number): Run {
  const pidsFile = join(mkdtempSync(join(tmpdir(), 'pips-teardown-')), 'pids');
  const env: NodeJS.ProcessEnv = { ...process.env, FIXTURE_MODE: mode, FIXTURE_PIDS_FILE: pidsFile };
  if (watchdogS !== undefined) env['PERSISTENT_IPS_E2E_FILE_TIMEOUT_S'] = String(watchdogS);
  // The fixture must run under a runner of its own, not report into ours.
  delete env['NODE_TEST_CONTEXT'];
  const args = watchdogS === undefined ? ['--test', '--test-reporter=tap', '--test-force-exit', FIXTURE] : [TEST_SCRIPT, 'e2e', FIXTURE];
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal, output })),
  );
  return { pid: child.pid!, pidsFile, ended };
}

async function endsWithin(run: Run, ms: number) {
  let timer: NodeJS.Timeout | undefined;
  const res = await Promise.race([run.ended, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  clearTimeout(timer);
  if (res === undefined) {
    try {
      process.kill(-run.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    assert.fail(`the runner of the fixture did not end within ${ms / 1000} s: a process holds it open`);
  }
  return res;
}

function startedPids(run: Run): number[] {
  return readFileSync(run.pidsFile, 'utf8')
    .split('\n')
    .filter((l) => /^\d+$/.test(l))
    .map(Number);
}

async function assertAllGone(pids: number[]): Promise<void> {
  assert.ok(pids.length > 0, 'the fixture started no process: the case proves nothing');
  await poll(`every process started by the fixture to be gone (${pids.join(', ')})`, CHILDREN_MUST_GO_MS, async () =>
    pids.every((p) => !isAlive(p)) ? true : undefined,
  );
}

async function waitReady(run: Run): Promise<void> {
  // poll retries while the file does not exist yet
  await poll('the fixture to start its processes', 60_000, async () => (readFileSync(run.pidsFile, 'utf8').includes('ready') ? true : undefined));
}

describe('a failing or stopped setup leaves nothing behind (issue 10)', { timeout: 10 * 60_000 }, () => {
  it('kube-apiserver that exits at once: start fails, etcd is stopped, the runner ends with a failure', async () => {
    const run = runFixture('apiserver-exits');
    const res = await endsWithin(run, RUNNER_MUST_END_MS);
    assert.notEqual(res.code, 0, `the fixture should fail:\n${res.output}`);
    assert.match(res.output, /kube-apiserver exited early/);
    await assertAllGone(startedPids(run));
  });

  it('before() throws after starting a control plane and a child, with no after(): the runner ends, nothing survives', async () => {
    const run = runFixture('abandoned');
    const res = await endsWithin(run, RUNNER_MUST_END_MS);
    assert.notEqual(res.code, 0, `the fixture should fail:\n${res.output}`);
    assert.match(res.output, /on purpose/);
    const pids = startedPids(run);
    assert.ok(pids.length >= 4, `expected etcd, kube-apiserver, kube-controller-manager and a child, got ${pids.join(', ')}`);
    await assertAllGone(pids);
  });

  for (const [signal, mode, what] of [
    ['SIGTERM', 'hang', 'the runner ends, nothing survives'],
    ['SIGKILL', 'sigkill', 'no handler of ours runs, and the reaper stops what the file started'],
  ] as const) {
    it(`${signal} to the runner and its test file while before() hangs: ${what}`, async () => {
      const run = runFixture(mode);
      await waitReady(run);
      process.kill(-run.pid, signal);
      await endsWithin(run, RUNNER_MUST_END_MS);
      await assertAllGone(startedPids(run));
    });
  }

  it('a file that hangs is stopped by the e2e watchdog of `npm test` at its limit, named, and leaves nothing behind', async () => {
    const run = runFixture('hang', 5);
    const res = await endsWithin(run, RUNNER_MUST_END_MS);
    assert.equal(res.code, 1, res.output);
    assert.match(res.output, /e2e\/harness\/fixtures\/failing-setup\.fixture\.ts ran past its limit of 5 s/);
    assert.match(res.output, /e2e\/harness\/fixtures\/failing-setup\.fixture\.ts: STOPPED after 5 s \(limit\)/);
    await assertAllGone(startedPids(run));
  });
});
