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

  const resolved: [string, Parameters<typeof resolveGate>, ReturnType<typeof resolveGate>][] = [
    ['the flag overrides the KubeVirt CR: off', [false, [cr(['PersistentIPs'])]], { enabled: false, source: 'flag' }],
    ['the flag overrides the KubeVirt CR: on', [true, [cr([])]], { enabled: true, source: 'flag' }],
    ['without a flag the KubeVirt CR decides: listed', [undefined, [cr(['LiveMigration', 'PersistentIPs'])]], { enabled: true, source: 'kubevirt-cr' }],
    ['without a flag the KubeVirt CR decides: not listed', [undefined, [cr(['LiveMigration'])]], { enabled: false, source: 'kubevirt-cr' }],
    ['without a flag the KubeVirt CR decides: no configuration', [undefined, [cr()]], { enabled: false, source: 'kubevirt-cr' }],
    ['with neither flag nor CR the gate is off, as in KubeVirt', [undefined, []], { enabled: false, source: 'default' }],
  ];
  for (const [name, args, expected] of resolved) it(name, () => assert.deepEqual(resolveGate(...args), expected));

  it('describes the gate for a person: state, who decided, and what off means', () => {
    assert.equal(describeGate({ enabled: true, source: 'flag' }), 'on (set by --feature-gates)');
    assert.equal(describeGate({ enabled: true, source: 'kubevirt-cr' }), 'on (listed in the KubeVirt CR)');
    assert.match(describeGate({ enabled: false, source: 'kubevirt-cr' }), /^off \(not listed in the KubeVirt CR .*\): no IPAMClaims are created/);
    assert.match(describeGate({ enabled: false, source: 'default' }), /^off \(no KubeVirt CR found and no --feature-gates\)/);
  });
});
