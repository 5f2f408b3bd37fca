// Test-only helpers shared by the webhook's tests (and the e2e suite): a small RFC 6902 applier that is strict
// where the API server is strict, so a test fails on a patch the API server would reject; and what the API server
// answers when a patch's `test` op fails.

import assert from 'node:assert/strict';
import type { JsonPatchOp } from '../src/kube/patch.ts';

function unescapeToken(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~');
}

/** Applies add/replace/remove/test on object members and array indices (enough for this project's patches). */
export function applyJsonPatch<T>(doc: T, patch: readonly JsonPatchOp[]): T {
  const copy = structuredClone(doc) as Record<string, unknown>;
  for (const op of patch) {
    const parts = op.path.split('/').slice(1).map(unescapeToken);
    const last = parts.pop();
    assert.ok(last !== undefined, `empty path in ${JSON.stringify(op)}`);
    let target: Record<string, unknown> = copy;
    for (const part of parts) {
      const next = target[part];
      assert.ok(typeof next === 'object' && next !== null, `path ${op.path} does not exist`);
      target = next as Record<string, unknown>;
    }
    switch (op.op) {
      case 'test':
        assert.deepEqual(target[last], op.value, `test failed at ${op.path}`);
        break;
      case 'replace':
        assert.ok(last in target, `replace of missing ${op.path}`);
        target[last] = structuredClone(op.value);
        break;
      case 'add':
        target[last] = structuredClone(op.value);
        break;
      case 'remove':
        assert.ok(last in target, `remove of missing ${op.path}`);
        delete target[last];
        break;
      default:
        throw new Error(`unsupported op ${op.op}`);
    }
  }
  return copy as T;
}

/** The body kube-apiserver v1.34.4 returned for a JSON patch whose `test` op failed, captured from a real server. */
export const FAILED_TEST_OP_STATUS = {
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  message: 'the server rejected our request due to an error in our request',
  reason: 'Invalid',
  details: {},
  code: 422,
} as const;
