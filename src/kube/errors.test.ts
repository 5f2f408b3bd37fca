import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  KubeApiError,
  classifyStatus,
  errorFromException,
  errorFromResponse,
  errorFromWatchStatus,
  ifFound,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  isTerminalApiError,
  isTransient,
  type ApiErrorReason,
  type ApiStatus,
} from './errors.ts';
import { FAILED_TEST_OP_STATUS } from '../../test/json-patch.ts';

const claim = { kind: 'IPAMClaim', namespace: 'ns1', name: 'vm1.net1' };

function status(code: number, reason?: string, message = 'm'): string {
  return JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message });
}

describe('classifyStatus', () => {
  const table: [number, string | undefined, string, ApiErrorReason][] = [
    [404, 'NotFound', 'get', 'notFound'],
    [404, undefined, 'get', 'notFound'],
    [409, 'AlreadyExists', 'create', 'alreadyExists'],
    [409, undefined, 'create', 'alreadyExists'],
    [409, 'Conflict', 'patch', 'conflict'],
    [409, undefined, 'delete', 'conflict'],
    [410, 'Expired', 'list', 'gone'],
    [410, 'Gone', 'watch', 'gone'],
    [410, undefined, 'list', 'gone'],
    [422, 'Invalid', 'create', 'invalid'],
    [400, 'BadRequest', 'patch', 'badRequest'],
    [415, 'UnsupportedMediaType', 'patch', 'badRequest'],
    [401, 'Unauthorized', 'get', 'unauthorized'],
    [403, 'Forbidden', 'create', 'forbidden'],
    [429, 'TooManyRequests', 'get', 'transient'],
    [500, 'InternalError', 'get', 'transient'],
    [503, 'ServiceUnavailable', 'get', 'transient'],
    [504, 'Timeout', 'list', 'transient'],
    [408, undefined, 'get', 'transient'],
    [502, undefined, 'get', 'transient'],
    [418, undefined, 'get', 'unknown'],
  ];
  for (const [code, reason, verb, want] of table) {
    it(`${code} ${reason ?? '(no reason)'} on ${verb} → ${want}`, () => {
      assert.equal(classifyStatus(code, reason ? { kind: 'Status', code, reason } : undefined, verb), want);
    });
  }

  it('treats a JSON patch that does not apply (as kube-apiserver 1.34 reports it) as a conflict', () => {
    const s: ApiStatus = FAILED_TEST_OP_STATUS;
    assert.equal(classifyStatus(422, s, 'patch', { jsonPatch: true }), 'conflict');
    assert.equal(classifyStatus(422, s, 'patch'), 'invalid', 'not for other kinds of request');
    const legacy: ApiStatus = { kind: 'Status', code: 422, message: 'Testing value /metadata/finalizers failed' };
    assert.equal(classifyStatus(422, legacy, 'patch'), 'conflict');
  });

  it('keeps a JSON-patched object that fails validation invalid', () => {
    const s: ApiStatus = {
      kind: 'Status',
      code: 422,
      reason: 'Invalid',
      message: 'IPAMClaim.k8s.cni.cncf.io "v2" is invalid: spec.network: Invalid value',
      details: { name: 'v2', group: 'k8s.cni.cncf.io', kind: 'IPAMClaim', causes: [{ reason: 'FieldValueTypeInvalid', field: 'spec.network' }] },
    };
    assert.equal(classifyStatus(422, s, 'patch', { jsonPatch: true }), 'invalid');
  });
});

describe('errorFromResponse', () => {
  it('carries the object, the verb, the code and the server message', () => {
    const err = errorFromResponse(409, status(409, 'AlreadyExists', 'ipamclaims "vm1.net1" already exists'), claim, 'create');
    assert.ok(err instanceof KubeApiError);
    assert.equal(err.reason, 'alreadyExists');
    assert.equal(err.code, 409);
    assert.deepEqual(err.object, claim);
    assert.match(err.message, /create IPAMClaim ns1\/vm1\.net1: alreadyExists 409: ipamclaims "vm1\.net1" already exists/);
    assert.ok(isAlreadyExists(err));
    assert.equal(isNotFound(err), false);
  });

  it('falls back to the code when the body is not a Status, and reads Retry-After', () => {
    const err = errorFromResponse(429, '<html>slow down</html>', claim, 'get', { 'retry-after': '3' });
    assert.equal(err.reason, 'transient');
    assert.equal(err.retryAfterSeconds, 3);
    assert.equal(err.status, undefined);
    assert.ok(isTransient(err));
  });

  it('marks invalid and bad requests as terminal and nothing else', () => {
    assert.equal(errorFromResponse(422, status(422, 'Invalid'), claim, 'create').terminal, true);
    assert.equal(errorFromResponse(400, status(400, 'BadRequest'), claim, 'patch').terminal, true);
    assert.equal(isTerminalApiError(errorFromResponse(422, status(422, 'Invalid'), claim, 'create')), true);
    assert.equal(errorFromResponse(409, status(409, 'Conflict'), claim, 'patch').terminal, false);
    assert.equal(errorFromResponse(503, status(503), claim, 'get').terminal, false);
    assert.ok(isConflict(errorFromResponse(409, status(409, 'Conflict'), claim, 'delete')));
  });
});

describe('errorFromWatchStatus', () => {
  it('turns an ERROR event with code 410 into gone, naming the collection', () => {
    const err = errorFromWatchStatus(
      { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 1 (2)' },
      { kind: 'VirtualMachine', namespace: 'ns1' },
    );
    assert.ok(isGone(err));
    assert.equal(err.verb, 'watch');
    assert.match(err.message, /watch VirtualMachine ns1\/\*: gone 410/);
  });

  it('treats a Status without a code as a server error', () => {
    assert.equal(errorFromWatchStatus({ kind: 'Status', message: 'boom' }, { kind: 'IPAMClaim' }).reason, 'transient');
  });
});

describe('errorFromException', () => {
  const sysErr = (code: string): Error => Object.assign(new Error(code), { code });

  it('classifies connection failures (also nested in fetch failed) as transient', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'EAI_AGAIN']) {
      const err = errorFromException(new TypeError('fetch failed', { cause: sysErr(code) }), claim, 'get');
      assert.equal(err.reason, 'transient', code);
      assert.equal(err.code, undefined);
      assert.deepEqual(err.object, claim);
    }
  });

  it('sees failures inside an AggregateError and timeouts', () => {
    const agg = new AggregateError([sysErr('ECONNREFUSED'), sysErr('ECONNREFUSED')], 'all addresses failed');
    assert.equal(errorFromException(new TypeError('fetch failed', { cause: agg }), claim, 'get').reason, 'transient');
    assert.equal(errorFromException(new DOMException('timed out', 'TimeoutError'), claim, 'get').reason, 'transient');
  });

  it('classifies HTTP/2 stream resets and closing connections as transient, and a cancel by its cause', () => {
    for (const code of [
      'ERR_HTTP2_STREAM_ERROR',
      'ERR_HTTP2_SESSION_ERROR',
      'ERR_HTTP2_GOAWAY_SESSION',
      'ERR_HTTP2_INVALID_SESSION',
      'ERR_HTTP2_OUT_OF_STREAMS',
    ]) {
      assert.equal(errorFromException(sysErr(code), claim, 'create').reason, 'transient', code);
    }
    const cancelled = (cause: Error): Error => Object.assign(new Error('The pending stream has been canceled', { cause }), { code: 'ERR_HTTP2_STREAM_CANCEL' });
    assert.equal(errorFromException(cancelled(sysErr('ECONNRESET')), claim, 'get').reason, 'transient');
    assert.equal(errorFromException(cancelled(sysErr('UNABLE_TO_VERIFY_LEAF_SIGNATURE')), claim, 'get').reason, 'unknown');
  });

  it('does not call a TLS verification failure transient', () => {
    const err = errorFromException(new TypeError('fetch failed', { cause: sysErr('DEPTH_ZERO_SELF_SIGNED_CERT') }), claim, 'get');
    assert.equal(err.reason, 'unknown');
    assert.match(err.message, /fetch failed: DEPTH_ZERO_SELF_SIGNED_CERT/);
  });

  it('passes a KubeApiError through unchanged', () => {
    const e = errorFromResponse(404, status(404, 'NotFound'), claim, 'get');
    assert.equal(errorFromException(e, { kind: 'Other' }, 'list'), e);
  });
});

describe('ifFound', () => {
  it('a 404 is "there is none"; any other failure still rejects', async () => {
    assert.deepEqual(await ifFound(Promise.resolve({ a: 1 })), { a: 1 });
    assert.equal(await ifFound(Promise.reject(errorFromResponse(404, status(404, 'NotFound'), claim, 'get'))), undefined);
    const forbidden = errorFromResponse(403, status(403, 'Forbidden'), claim, 'get');
    await assert.rejects(ifFound(Promise.reject(forbidden)), (err) => err === forbidden);
  });
});
