import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_NAMESPACE, planStart, StartUsageError } from './start-plan.ts';

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
    assert.equal(plan.mode, 'cluster');
    if (plan.mode !== 'cluster') return;
    assert.deepEqual(plan.runArgs, ['--kubeconfig', '/k/config', '--controller-namespace', DEFAULT_NAMESPACE, '--namespace', DEFAULT_NAMESPACE, '--webhook-bind-address', '0']);
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
