// The built CLI (`node dist/cli/main.js`), misused as people misuse it: each mistake ends with its exit code and one
// line that names what is wrong (plus the usage for bad flags), never a stack trace, and nothing runs with flags
// that were not understood. The busy-port case needs a cluster to get that far: a local control plane.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { startControlPlane, type ControlPlane } from '../harness/index.ts';
import { runCli } from '../local/controller-process.ts';

const scratch = mkdtempSync(join(tmpdir(), 'pips-cli-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** The first line of stderr names the mistake (`only`: and nothing follows it). */
function assertOneLine(stderr: string, pattern: RegExp, only = false): void {
  if (only) assert.equal(stderr.trimEnd().split('\n').length, 1, stderr);
  const first = stderr.split('\n')[0] ?? '';
  assert.match(first, pattern);
  assert.match(first, /^persistent-ips: /);
  assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
  assert.doesNotMatch(stderr, /unexpected failure/);
}

describe('persistent-ips CLI misuse', { timeout: 120_000 }, () => {
  const usageCases: [string[], RegExp][] = [
    [['run', '--leader-elec'], /unknown argument: leader-elec/],
    [['status', '--bogus'], /unknown argument: bogus/],
    [['run', '--concurrency', '0'], /--concurrency must be a whole number of at least 1 \(got 0\)/],
    [['run', '--metrics-bind-address', 'anywhere'], /--metrics-bind-address: invalid bind address "anywhere"/],
    [['run', '--feature-gates', 'PersistentIPs=on'], /invalid --feature-gates entry/],
    [['launch'], /unknown argument: launch/],
  ];
  for (const [args, pattern] of usageCases) {
    it(`${args.join(' ')}: exit 2, one line and the usage`, async () => {
      const r = await runCli(args);
      assert.equal(r.code, EXIT.usage, r.stderr);
      assertOneLine(r.stderr, pattern);
      assert.match(r.stderr, /\n\npersistent-ips (run|status|<command>)/, 'the usage follows');
      assert.equal(r.stdout, '', 'nothing ran: no log line on stdout');
    });
  }

  it("--version from any directory, in any language: the package's own version; messages in English", async () => {
    // The bundle's yargs no longer sits under node_modules: left to itself it read the package.json of the working
    // directory, and found no translations for LANG.
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const elsewhere = { cwd: scratch, env: { ...process.env, LANG: 'de_DE.UTF-8', LC_ALL: 'de_DE.UTF-8' } };
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'someone-else', version: '9.9.9' }));
    const v = await runCli(['--version'], elsewhere);
    assert.equal(v.code, 0, v.stderr);
    assert.equal(v.stdout.trim(), version);
    const bad = await runCli(['status', '--bogus'], elsewhere);
    assert.equal(bad.code, EXIT.usage, bad.stderr);
    assertOneLine(bad.stderr, /unknown argument: bogus/);
  });

  it('a kubeconfig that does not exist: exit 3, one line naming it', async () => {
    const missing = join(scratch, 'no-such-kubeconfig');
    for (const command of ['run', 'status']) {
      const r = await runCli([command, '--kubeconfig', missing]);
      assert.equal(r.code, EXIT.noKubeconfig, r.stderr);
      assertOneLine(r.stderr, new RegExp(`kubeconfig ${missing} does not exist`), true);
    }
  });

  it('a kubeconfig that is not one: exit 3, one line naming it', async () => {
    const garbage = join(scratch, 'garbage-kubeconfig');
    writeFileSync(garbage, 'clusters: [this is: not\n  - yaml: {');
    const r = await runCli(['run', '--kubeconfig', garbage]);
    assert.equal(r.code, EXIT.noKubeconfig, r.stderr);
    assertOneLine(r.stderr, new RegExp(garbage), true);
  });

  describe('with a cluster', () => {
    let cp: ControlPlane;
    let busy: Server;
    let busyPort: number;
    before(
      async () => {
        cp = await startControlPlane({ dir: join(scratch, 'cp') });
        busy = createServer();
        await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
        busyPort = (busy.address() as { port: number }).port;
      },
      { timeout: 120_000 },
    );
    after(async () => {
      busy?.close();
      await cp?.stop();
    });

    for (const flag of ['metrics-bind-address', 'health-probe-bind-address', 'webhook-bind-address']) {
      it(`--${flag} on a busy port: exit 1, one line naming the address`, async () => {
        const free = { 'metrics-bind-address': '127.0.0.1:0', 'health-probe-bind-address': '127.0.0.1:0', 'webhook-bind-address': '0' };
        const addresses = { ...free, [flag]: `127.0.0.1:${busyPort}` };
        const r = await runCli([
          'run',
          '--kubeconfig',
          cp.kubeconfigPath,
          '--controller-namespace',
          'default',
          '--webhook-cert-host',
          '127.0.0.1',
          ...Object.entries(addresses).flatMap(([k, v]) => [`--${k}`, v]),
        ]);
        assert.equal(r.code, EXIT.failure, r.stderr);
        assertOneLine(r.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${busyPort} \\(--${flag}\\): address already in use`), true);
      });
    }
  });
});
