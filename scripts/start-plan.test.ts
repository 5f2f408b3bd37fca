import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { DEFAULT_NAMESPACE, localNextSteps, planStart, shellWord, StartUsageError, type LocalDemo } from './start-plan.ts';

const words = (text: string): string[] => text.split(' ');

describe('npm start: which cluster, and what it may change', () => {
  it('without --kubeconfig runs the local control plane, whatever the environment holds', () => {
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = '/somewhere/live-cluster';
    try {
      assert.deepEqual(planStart([]), { mode: 'local', dir: undefined });
      assert.deepEqual(planStart(['--local', '--dir', '/tmp/x']), { mode: 'local', dir: '/tmp/x' });
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });

  it('a named cluster: the controller is confined to the project namespace and serves no webhook by default', () => {
    const plan = planStart(['--kubeconfig', '/k/config']);
    assert.ok(plan.mode === 'cluster');
    assert.deepEqual(
      plan.runArgs,
      words(`--kubeconfig /k/config --controller-namespace ${DEFAULT_NAMESPACE} --namespace ${DEFAULT_NAMESPACE} --webhook-bind-address 0`),
    );
  });

  it('--all-namespaces and --webhook widen it only as far as they say; flags after -- go to run', () => {
    const plan = planStart(['--kubeconfig=/k', '--context', 'lab', '--namespace', 'pips', '--webhook', '--', '--log-level', 'debug']);
    assert.ok(plan.mode === 'cluster');
    assert.deepEqual(plan.runArgs, ['--kubeconfig', '/k', '--context', 'lab', '--controller-namespace', 'pips', '--namespace', 'pips', '--log-level', 'debug']);
    const wide = planStart(['--kubeconfig', '/k', '--all-namespaces']);
    assert.ok(wide.mode === 'cluster');
    assert.deepEqual(wide.runArgs, ['--kubeconfig', '/k', '--controller-namespace', DEFAULT_NAMESPACE, '--webhook-bind-address', '0']);
  });

  it('rejects unknown flags, stray arguments and combinations that make no sense', () => {
    for (const argv of [
      ['--kubecofig', '/k'],
      ['/k/config'],
      ['--webhook'],
      ['--context', 'lab'],
      ['--', '--log-level', 'debug'],
      ['--kubeconfig', '/k', '--local'],
      ['--kubeconfig', '/k', '--dir', '/tmp'],
      ['--kubeconfig', '/k', '--namespace', 'a', '--all-namespaces'],
      ['--kubeconfig', ''],
    ]) {
      assert.throws(() => planStart(argv), StartUsageError, argv.join(' '));
    }
  });
});

/** The words bash makes of a pasted line (up to a trailing `# comment`), printed one per line: what would run. */
function argvOf(line: string): string[] {
  const res = spawnSync('bash', ['-c', `set -f; printf '%s\\0' ${line}`], { encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  return res.stdout.split('\0').slice(0, -1);
}

describe('npm start: where to look next, once the demo VM has its claim', () => {
  // Paths with a space and a quote: the lines must still paste into a shell as they are.
  const demo: LocalDemo = {
    binDir: "/home/a b/it's/.cluster/local/bin",
    kubeconfig: "/home/a b/it's/.cluster/local/kubeconfig",
    metricsUrl: 'http://127.0.0.1:40123/metrics',
    logDir: '/repo/.cluster/local',
    controllerLog: 'controller-start.log',
    namespace: 'vm-demo',
    vm: 'vm-a',
    claim: 'vm-a.tenantblue',
  };
  const lines = localNextSteps(demo);
  const command = (label: string) => {
    const line = lines.find((l) => l.trimStart().startsWith(`${label}:`));
    assert.ok(line, `a "${label}:" line in:\n${lines.join('\n')}`);
    return line
      .slice(line.indexOf(':') + 1)
      .replace(/\s+#.*$/, '')
      .trim();
  };

  it('one export line points the shell at the local kubeconfig and puts the bin folder first on PATH', () => {
    const exports = lines.filter((l) => l.trimStart().startsWith('export '));
    assert.equal(exports.length, 1, lines.join('\n'));
    const res = spawnSync('bash', ['-c', `${exports[0]}; printf '%s\\0' "$KUBECONFIG" "$PATH"`], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
    assert.equal(res.status, 0, res.stderr);
    const [kubeconfig, path] = res.stdout.split('\0');
    assert.equal(kubeconfig, demo.kubeconfig);
    assert.ok(path?.startsWith(`${demo.binDir}:`) && path.endsWith(':/usr/bin:/bin'), path);
  });

  it('then short commands: kubectl and the kubectl plugin, with no path or kubeconfig repeated', () => {
    assert.deepEqual(argvOf(command('the claims')), words('kubectl get ipamclaims -n vm-demo -o wide'));
    assert.deepEqual(argvOf(command('one claim')), words('kubectl get ipamclaim -n vm-demo vm-a.tenantblue -o yaml'));
    assert.deepEqual(argvOf(command('status')), words('kubectl persistent-ips status -n vm-demo'));
    assert.deepEqual(argvOf(command('networks')), words('kubectl persistent-ips status -n vm-demo --networks'));
    for (const line of lines.filter((l) => /^\s+kubectl /.test(l))) assert.doesNotMatch(line, /--kubeconfig|\/bin\//, line);
  });

  it('the webhook line keeps its JSONPath in one word', () => {
    assert.equal(argvOf(command('the webhook')).at(-1), 'jsonpath={.items[*].metadata.annotations.k8s\\.v1\\.cni\\.cncf\\.io/networks}');
  });

  it('the metrics URL the controller serves, and how to stop on the last line', () => {
    assert.match(command('metrics'), /^http:\/\/127\.0\.0\.1:40123\/metrics\s/);
    assert.match(lines.at(-1)!, /^To stop: Ctrl-C here/);
  });

  it('shellWord leaves plain words alone and quotes the rest so that the shell gives them back unchanged', () => {
    assert.equal(shellWord('/usr/bin/kubectl'), '/usr/bin/kubectl');
    for (const word of ["it's", 'a b', '$HOME', '`x`', 'a;b', '*', '"q"', '']) assert.deepEqual(argvOf(shellWord(word)), [word], word);
  });
});
