import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { longFunctions } from './function-lengths.ts';

const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');

describe('function-lengths', () => {
  it('measures a factory with its inner functions as one function, and names arrows by their variable', () => {
    const text = `export function factory() {\n${body(50)}\n  const inner = () => {\n${body(40)}\n  };\n  return inner;\n}\n`;
    assert.deepEqual(longFunctions('x.ts', text, 80), [{ key: 'x.ts:factory', lines: 95 }]);
    assert.deepEqual(longFunctions('x.ts', text, 40), [
      { key: 'x.ts:factory', lines: 95 },
      { key: 'x.ts:inner', lines: 42 },
    ]);
    assert.deepEqual(longFunctions('x.ts', 'function short() {\n  return 1;\n}\n', 2), [{ key: 'x.ts:short', lines: 3 }]);
  });
});
