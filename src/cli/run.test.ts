import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseNadReference } from './run.ts';

describe('parseNadReference (--default-network-nad)', () => {
  it('NAMESPACE/NAME', () => {
    assert.deepEqual(parseNadReference('ovn-kubernetes/default'), { namespace: 'ovn-kubernetes', name: 'default' });
    assert.deepEqual(parseNadReference('openshift-ovn-kubernetes/default'), { namespace: 'openshift-ovn-kubernetes', name: 'default' });
  });
  it('anything else is refused', () => {
    for (const bad of ['default', 'a/b/c', '/default', 'ns/', 'NS/default', 'ns/Default', '']) assert.equal(parseNadReference(bad), undefined, bad);
  });
});
