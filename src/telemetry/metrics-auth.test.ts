import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMetricsAuthorizer, type ReviewClient, type UserInfo } from './metrics-auth.ts';

/** Tokens → users, and who may get /metrics; counts the reviews asked for. */
function reviews(users: Record<string, UserInfo>, readers: string[], failing = false) {
  const calls = { authenticate: 0, authorize: 0 };
  const client: ReviewClient = {
    async authenticate(token) {
      calls.authenticate++;
      if (failing) throw new Error('connection refused');
      return users[token];
    },
    async authorize(user, verb, path) {
      calls.authorize++;
      const allowed = readers.includes(user.username) && verb === 'get' && path === '/metrics';
      return allowed ? { allowed } : { allowed, reason: 'no RBAC policy matched' };
    },
  };
  return { client, calls };
}

const users = {
  'tok-reader': { username: 'system:serviceaccount:monitoring:prometheus', groups: ['system:serviceaccounts'] },
  'tok-other': { username: 'system:serviceaccount:default:nobody' },
};

describe('metrics authorisation (TokenReview + SubjectAccessReview)', () => {
  it('no bearer token: 401', async () => {
    const { client, calls } = reviews(users, []);
    const authorize = createMetricsAuthorizer({ reviews: client });
    assert.equal((await authorize(undefined, 'get', '/metrics')).status, 401);
    assert.equal((await authorize('Basic dXNlcjpwYXNz', 'get', '/metrics')).status, 401);
    assert.deepEqual(calls, { authenticate: 0, authorize: 0 });
  });

  it('a token the cluster does not accept: 401', async () => {
    const { client } = reviews(users, []);
    const decision = await createMetricsAuthorizer({ reviews: client })('Bearer forged', 'get', '/metrics');
    assert.deepEqual(decision, { status: 401, message: 'Unauthorized: the token was not accepted' });
  });

  it('an accepted token whose user may not get /metrics: 403 naming the user', async () => {
    const { client } = reviews(users, ['system:serviceaccount:monitoring:prometheus']);
    const decision = await createMetricsAuthorizer({ reviews: client })('Bearer tok-other', 'get', '/metrics');
    assert.equal(decision.status, 403);
    assert.match((decision as { message: string }).message, /user "system:serviceaccount:default:nobody" may not get \/metrics \(no RBAC policy matched\)/);
  });

  it('a reader: 200; the answers are cached for the TTL, then asked again', async () => {
    let now = 1_000;
    const { client, calls } = reviews(users, ['system:serviceaccount:monitoring:prometheus']);
    const authorize = createMetricsAuthorizer({ reviews: client, now: () => now, allowedTtlMs: 60_000, deniedTtlMs: 10_000 });
    for (let i = 0; i < 5; i++)
      assert.deepEqual(await authorize('Bearer tok-reader', 'get', '/metrics'), { status: 200, user: 'system:serviceaccount:monitoring:prometheus' });
    assert.deepEqual(calls, { authenticate: 1, authorize: 1 });
    now += 60_001;
    await authorize('Bearer tok-reader', 'get', '/metrics');
    assert.deepEqual(calls, { authenticate: 2, authorize: 2 });
  });

  it('denials are remembered for the shorter TTL', async () => {
    let now = 0;
    const { client, calls } = reviews(users, []);
    const authorize = createMetricsAuthorizer({ reviews: client, now: () => now, deniedTtlMs: 10_000 });
    await authorize('Bearer tok-other', 'get', '/metrics');
    await authorize('Bearer tok-other', 'get', '/metrics');
    assert.deepEqual(calls, { authenticate: 1, authorize: 1 });
    now += 10_001;
    await authorize('Bearer tok-other', 'get', '/metrics');
    assert.deepEqual(calls, { authenticate: 1, authorize: 2 }, 'the token is still known; the denial is asked again');
  });

  it('the cache is bounded: the oldest answers go first', async () => {
    const many: Record<string, UserInfo> = {};
    for (let i = 0; i < 10; i++) many[`t${i}`] = { username: `u${i}` };
    const { client, calls } = reviews(many, []);
    const authorize = createMetricsAuthorizer({ reviews: client, maxEntries: 4 });
    for (let i = 0; i < 10; i++) await authorize(`Bearer t${i}`, 'get', '/metrics');
    await authorize('Bearer t9', 'get', '/metrics');
    assert.equal(calls.authenticate, 10, 'the newest is still cached');
    await authorize('Bearer t0', 'get', '/metrics');
    assert.equal(calls.authenticate, 11, 'the oldest was evicted');
  });

  it('the API server cannot be asked: fail closed with 500, not cached', async () => {
    const { client, calls } = reviews(users, [], true);
    const authorize = createMetricsAuthorizer({ reviews: client });
    assert.equal((await authorize('Bearer tok-reader', 'get', '/metrics')).status, 500);
    assert.equal((await authorize('Bearer tok-reader', 'get', '/metrics')).status, 500);
    assert.equal(calls.authenticate, 2);
  });
});
