import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { intern, internedCount, INTERN_MAX_ENTRIES } from './intern.ts';

describe('intern', () => {
  it('returns the string it is given (or undefined), and stops growing at its bound', () => {
    assert.equal(intern('kubevirt.io/v1'), 'kubevirt.io/v1');
    assert.equal(intern(undefined), undefined);
    for (let i = 0; i < INTERN_MAX_ENTRIES + 100; i++) assert.equal(intern(`ns-${i}`), `ns-${i}`);
    assert.equal(internedCount(), INTERN_MAX_ENTRIES);
  });
});
