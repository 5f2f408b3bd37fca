import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { intern, internedCount, INTERN_MAX_ENTRIES, share, SHARED_MAX_ENTRIES } from './intern.ts';

describe('intern', () => {
  it('returns the string it is given (or undefined), and stops growing at its bound', () => {
    assert.equal(intern('kubevirt.io/v1'), 'kubevirt.io/v1');
    assert.equal(intern(undefined), undefined);
    for (let i = 0; i < INTERN_MAX_ENTRIES + 100; i++) assert.equal(intern(`ns-${i}`), `ns-${i}`);
    assert.equal(internedCount(), INTERN_MAX_ENTRIES);
  });
});

describe('share', () => {
  it('returns the first object of equal content for every later one, deep-frozen; different content stays apart', () => {
    const a = share({ networks: [{ name: 'net-a', multus: { networkName: 'nad-a' } }] });
    const b = share({ networks: [{ name: 'net-a', multus: { networkName: 'nad-a' } }] });
    const c = share({ networks: [{ name: 'net-a', multus: { networkName: 'nad-b' } }] });
    assert.equal(a, b);
    assert.notEqual(a, c);
    assert.deepEqual(c, { networks: [{ name: 'net-a', multus: { networkName: 'nad-b' } }] });
    assert.ok(Object.isFrozen(a) && Object.isFrozen(a.networks[0]!.multus));
    assert.throws(() => {
      (a.networks[0] as { name: string }).name = 'changed';
    }, TypeError);
  });

  it('past its bound hands back what it was given, unshared and unfrozen', () => {
    for (let i = 0; i < SHARED_MAX_ENTRIES; i++) share({ filler: i });
    const late = { late: true };
    assert.equal(share(late), late);
    assert.notEqual(share({ late: true }), late);
    assert.equal(Object.isFrozen(late), false);
  });
});
