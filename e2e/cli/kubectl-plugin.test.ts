// Issue 41, item 5: `kubectl persistent-ips …` once the package is installed. kubectl runs an executable named
// `kubectl-persistent_ips` found on PATH for `kubectl persistent-ips` (a dash in the command is an underscore in the
// file name); the package's bin table names one, which npm links into its bin folder on install. Here the link is made
// from package.json's own bin table, in a folder of its own, and run by the version-matched kubectl.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBinaries, kubectlPath } from '../harness/binaries.ts';
import { CLI, REPO_ROOT } from '../local/controller-process.ts';

const PLUGIN = 'kubectl-persistent_ips';
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string> };

describe('kubectl persistent-ips (the kubectl plugin the package installs)', () => {
  let bin = '';
  let kubectl = '';
  // The plugin's `#!/usr/bin/env node` finds Node 24 first on PATH, as on a machine where the package is installed.
  const env = () => ({ ...process.env, PATH: `${bin}:${dirname(process.execPath)}:/usr/bin:/bin`, KUBECONFIG: join(bin, 'none') });
  const run = (...args: string[]) => spawnSync(kubectl, args, { encoding: 'utf8', env: env() });

  before(async () => {
    kubectl = kubectlPath((await ensureBinaries()).binDir);
    bin = mkdtempSync(join(tmpdir(), 'persistent-ips-plugin-'));
    assert.equal(pkg.bin[PLUGIN], pkg.bin['persistent-ips'], `package.json's bin names ${PLUGIN}, the same entry point as persistent-ips`);
    symlinkSync(join(REPO_ROOT, pkg.bin[PLUGIN]!), join(bin, PLUGIN));
  });
  after(() => rmSync(bin, { recursive: true, force: true }));

  it('kubectl plugin list finds it', () => {
    const res = run('plugin', 'list');
    assert.equal(res.status, 0, res.stderr);
    assert.match(res.stdout, new RegExp(`${join(bin, PLUGIN).replaceAll('/', '\\/')}$`, 'm'));
  });

  it("`kubectl persistent-ips --version` and `status --help` are the CLI's own", () => {
    assert.equal(run('persistent-ips', '--version').stdout.trim(), pkg.version);
    const help = run('persistent-ips', 'status', '--help');
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /^persistent-ips status \[vm\]/);
    assert.equal(spawnSync(process.execPath, [CLI, 'status', '--help'], { encoding: 'utf8' }).stdout, help.stdout);
  });

  it("its failures keep the CLI's exit codes (3: no kubeconfig)", () => {
    const res = run('persistent-ips', 'status', '-n', 'vm-demo');
    assert.equal(res.status, 3, res.stderr);
    assert.match(res.stderr, /kubeconfig/i);
  });
});
