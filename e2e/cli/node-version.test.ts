// Issue 10: on a Node older than 24 the built CLI says in one line what it needs (the dependencies' own failure is a
// stack trace that names none of it). Runs the machine's own Node when it is older; skipped where there is none.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CLI, REPO_ROOT } from '../local/controller-process.ts';

/** A `node` on PATH (outside this clone's node_modules) or in /usr/bin, /usr/local/bin, older than 24. */
function olderNode(): { path: string; version: string } | undefined {
  const dirs = [...(process.env['PATH'] ?? '').split(':'), '/usr/bin', '/usr/local/bin'].filter((d) => d && !d.startsWith(join(REPO_ROOT, 'node_modules')));
  for (const dir of new Set(dirs)) {
    const path = join(dir, 'node');
    try {
      accessSync(path, constants.X_OK);
    } catch {
      continue;
    }
    const version = spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout.trim();
    if (Number(/^v(\d+)/.exec(version)?.[1] ?? 99) < 24) return { path, version };
  }
  return undefined;
}

const older = olderNode();

describe('the CLI on a Node older than 24', { skip: older ? false : 'no Node older than 24 on this machine' }, () => {
  for (const argv of [['--help'], ['run', '--kubeconfig', '/nonexistent'], ['status']]) {
    it(`\`node dist/cli/main.js ${argv.join(' ')}\` with ${older?.version}: one line naming Node 24, exit 1, no stack trace`, () => {
      assert.ok(existsSync(CLI), `${CLI} is missing: npm run build`);
      const res = spawnSync(older!.path, [CLI, ...argv], { encoding: 'utf8' });
      assert.equal(res.status, 1, res.stderr);
      assert.equal(res.stdout, '');
      const lines = res.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, `expected one line, got:\n${res.stderr}`);
      assert.match(lines[0]!, /Node\.js 24 or newer is needed; this is v\d+/);
      assert.doesNotMatch(res.stderr, /\bat .*:\d+:\d+/);
    });
  }

  it('the bin (`persistent-ips`, as npx runs it through its `#!/usr/bin/env node` line) says the same', () => {
    const res = spawnSync('/usr/bin/env', ['node', CLI, '--help'], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${join(older!.path, '..')}:/usr/bin:/bin` },
    });
    assert.equal(res.status, 1, res.stderr);
    assert.match(res.stderr.trim(), /^persistent-ips: Node\.js 24 or newer is needed/);
  });

  it('npm scripts still run Node 24 from the node@24 devDependency whatever the machine has', () => {
    const res = spawnSync('npm', ['exec', '--', 'node', '--version'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { ...process.env, PATH: `${join(older!.path, '..')}:${process.env['PATH']}` },
    });
    assert.equal(res.status, 0, res.stderr);
    assert.match(res.stdout.trim(), /^v2[4-9]\./);
  });
});
