import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeGate, parseFeatureGatesFlag, resolveGate } from './feature-gate.ts';
import { kubeVirtCR as cr } from '../../test/objects.ts';

describe('feature gate', () => {
  const flagCases: [string | undefined, boolean | undefined][] = [
    [undefined, undefined],
    ['', undefined],
    ['PersistentIPs=true', true],
    ['PersistentIPs=false', false],
    ['Other=true, PersistentIPs=TRUE', true],
    ['Other=true', undefined],
  ];
  for (const [flag, expected] of flagCases) {
    it(`parses --feature-gates=${JSON.stringify(flag)} as ${expected}`, () => {
      assert.equal(parseFeatureGatesFlag(flag), expected);
    });
  }

  it('rejects a malformed entry instead of guessing', () => {
    assert.throws(() => parseFeatureGatesFlag('PersistentIPs'), /invalid --feature-gates entry "PersistentIPs"/);
    assert.throws(() => parseFeatureGatesFlag('PersistentIPs=yes'), /invalid/);
  });

  it('the flag overrides the KubeVirt CR in both directions', () => {
    assert.deepEqual(resolveGate(false, [cr(['PersistentIPs'])]), { enabled: false, source: 'flag' });
    assert.deepEqual(resolveGate(true, [cr([])]), { enabled: true, source: 'flag' });
  });

  it('without a flag the KubeVirt CR decides', () => {
    assert.deepEqual(resolveGate(undefined, [cr(['LiveMigration', 'PersistentIPs'])]), { enabled: true, source: 'kubevirt-cr' });
    assert.deepEqual(resolveGate(undefined, [cr(['LiveMigration'])]), { enabled: false, source: 'kubevirt-cr' });
    assert.deepEqual(resolveGate(undefined, [cr()]), { enabled: false, source: 'kubevirt-cr' });
  });

  it('with neither flag nor CR the gate is off, as in KubeVirt', () => {
    assert.deepEqual(resolveGate(undefined, []), { enabled: false, source: 'default' });
  });

  it('describes the gate for a person: state, who decided, and what off means', () => {
    assert.equal(describeGate({ enabled: true, source: 'flag' }), 'on (set by --feature-gates)');
    assert.equal(describeGate({ enabled: true, source: 'kubevirt-cr' }), 'on (listed in the KubeVirt CR)');
    assert.match(describeGate({ enabled: false, source: 'kubevirt-cr' }), /^off \(not listed in the KubeVirt CR .*\): no IPAMClaims are created/);
    assert.match(describeGate({ enabled: false, source: 'default' }), /^off \(no KubeVirt CR found and no --feature-gates\)/);
  });
});
