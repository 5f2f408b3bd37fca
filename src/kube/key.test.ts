import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keyString, type ObjectKey, parseKey } from './key.ts';

test('keyString and parseKey', async (t) => {
  // [object, its key, what the key parses back to]
  const table: [{ namespace?: string; name: string }, string, ObjectKey][] = [
    [{ namespace: 'ns', name: 'a' }, 'ns/a', { namespace: 'ns', name: 'a' }],
    [{ name: 'cluster-wide' }, 'cluster-wide', { namespace: '', name: 'cluster-wide' }],
    [{ namespace: '', name: 'cluster-wide' }, 'cluster-wide', { namespace: '', name: 'cluster-wide' }],
    [{ namespace: 'ns', name: 'abc' }, 'ns/abc', { namespace: 'ns', name: 'abc' }],
  ];
  for (const [ref, key, parsed] of table) {
    await t.test(key, () => {
      assert.equal(keyString(ref), key);
      assert.deepEqual(parseKey(key), parsed);
    });
  }
  await t.test('a bare name is cluster-scoped, not split (requestOf gave {ab, abc})', () => assert.deepEqual(parseKey('abc'), { namespace: '', name: 'abc' }));
  await t.test('the /name key of a cluster-wide request', () => assert.deepEqual(parseKey('/net'), { namespace: '', name: 'net' }));
  await t.test('only the first / separates', () => assert.deepEqual(parseKey('ns/a/b'), { namespace: 'ns', name: 'a/b' }));
});
