import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCommandLine, UsageError } from './parser.ts';
import { defaultNetworkNad } from './run-flags.ts';

describe('--default-network-nad', () => {
  it('NAMESPACE/NAME', () => {
    assert.deepEqual(defaultNetworkNad('ovn-kubernetes/default'), { namespace: 'ovn-kubernetes', name: 'default' });
    assert.deepEqual(defaultNetworkNad('openshift-ovn-kubernetes/default'), { namespace: 'openshift-ovn-kubernetes', name: 'default' });
  });
  it('anything else is refused', () => {
    for (const bad of ['default', 'a/b/c', '/default', 'ns/', 'NS/default', 'ns/Default', '']) assert.equal(defaultNetworkNad(bad), undefined, bad);
  });
  it('default ovn-kubernetes/default; the flag sets it; a bad value is a usage error', async () => {
    const quiet = { print: () => undefined, env: {} };
    const byDefault = await parseCommandLine(['run'], quiet);
    assert.ok(byDefault.command === 'run');
    assert.deepEqual(byDefault.options.defaultNetworkNad, { namespace: 'ovn-kubernetes', name: 'default' });
    const set = await parseCommandLine(['run', '--default-network-nad', 'openshift-ovn-kubernetes/default'], quiet);
    assert.ok(set.command === 'run');
    assert.deepEqual(set.options.defaultNetworkNad, { namespace: 'openshift-ovn-kubernetes', name: 'default' });
    await assert.rejects(
      parseCommandLine(['run', '--default-network-nad', 'default'], quiet),
      (err) => err instanceof UsageError && /NAMESPACE\/NAME/.test(err.message),
    );
  });
});
