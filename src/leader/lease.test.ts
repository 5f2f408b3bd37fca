import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DEFAULT_TIMING,
  decideLeaseAction,
  observe,
  releasedLease,
  renewDeadlineExceeded,
  renewedLease,
  toMicroTime,
  validateTiming,
  type Lease,
  type LeaseSpec,
} from './lease.ts';

const ref = { namespace: 'persistent-ips-system', name: 'persistent-ips-leader' };
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

function lease(spec: LeaseSpec, resourceVersion = '7'): Lease {
  return { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { ...ref, resourceVersion }, spec };
}

describe('toMicroTime', () => {
  it('writes exactly six fractional digits', () => {
    assert.equal(toMicroTime(T0 + 123), '2026-01-01T12:00:00.123000Z');
  });
});

describe('validateTiming', () => {
  it('accepts client-go defaults', () => validateTiming(DEFAULT_TIMING));
  const bad = [
    { name: 'lease not longer than the renew deadline', timing: { leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 } },
    { name: 'renew deadline within 1.2 retry periods', timing: { leaseDurationMs: 15_000, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 } },
    { name: 'zero retry period', timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 0 } },
    { name: 'fractional seconds of lease', timing: { leaseDurationMs: 15_500, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 } },
  ];
  for (const row of bad) it(`rejects ${row.name}`, () => assert.throws(() => validateTiming(row.timing)));
});

describe('observe', () => {
  const a = lease({ holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: toMicroTime(T0) });
  it('starts the clock when the record is first seen', () => {
    assert.deepEqual(observe(undefined, a, 100, DEFAULT_TIMING)?.observedAt, 100);
  });
  it('keeps the first observation time while the record does not change', () => {
    const first = observe(undefined, a, 100, DEFAULT_TIMING);
    assert.equal(observe(first, lease(a.spec!, '8'), 5000, DEFAULT_TIMING)?.observedAt, 100);
  });
  it('restarts the clock when the holder renews', () => {
    const first = observe(undefined, a, 100, DEFAULT_TIMING);
    const renewed = lease({ ...a.spec, renewTime: toMicroTime(T0 + 2000) });
    assert.equal(observe(first, renewed, 2100, DEFAULT_TIMING)?.observedAt, 2100);
  });
  it('uses the duration written in the lease (1 s after a release)', () => {
    assert.equal(observe(undefined, lease({ holderIdentity: '', leaseDurationSeconds: 1 }), 0, DEFAULT_TIMING)?.leaseDurationMs, 1000);
  });
  it('forgets everything when the lease is gone', () => {
    assert.equal(observe(observe(undefined, a, 0, DEFAULT_TIMING), undefined, 10, DEFAULT_TIMING), undefined);
  });
});

describe('decideLeaseAction', () => {
  const cases: {
    name: string;
    lease?: Lease;
    observedAt?: number;
    now: number;
    expect: { kind: string; renew?: boolean; holder?: string; transitions?: number; acquireTime?: string };
  }[] = [
    { name: 'no lease: create it holding it', now: T0, expect: { kind: 'create', holder: 'me', transitions: 0, acquireTime: toMicroTime(T0) } },
    {
      name: 'held by another, observed 14.999 s ago: wait',
      lease: lease({ holderIdentity: 'other', leaseDurationSeconds: 15, leaseTransitions: 3 }),
      observedAt: T0,
      now: T0 + 14_999,
      expect: { kind: 'wait', holder: 'other' },
    },
    {
      name: 'held by another, unchanged for 15 s of our clock: take over, one more transition',
      lease: lease({ holderIdentity: 'other', leaseDurationSeconds: 15, leaseTransitions: 3, acquireTime: toMicroTime(T0 - 60_000) }),
      observedAt: T0,
      now: T0 + 15_000,
      expect: { kind: 'update', renew: false, holder: 'me', transitions: 4, acquireTime: toMicroTime(T0 + 15_000) },
    },
    {
      name: 'released (no holder): take over at once',
      lease: lease({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 4 }),
      observedAt: T0,
      now: T0,
      expect: { kind: 'update', renew: false, holder: 'me', transitions: 5 },
    },
    {
      name: 'held by us: renew, keeping acquireTime and transitions',
      lease: lease({ holderIdentity: 'me', leaseDurationSeconds: 15, leaseTransitions: 2, acquireTime: toMicroTime(T0 - 1000) }),
      observedAt: T0,
      now: T0 + 2000,
      expect: { kind: 'update', renew: true, holder: 'me', transitions: 2, acquireTime: toMicroTime(T0 - 1000) },
    },
    {
      name: 'renewTime in the object is ignored: a far-future renewTime from a skewed clock expires on our clock',
      lease: lease({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: toMicroTime(T0 + 3_600_000) }),
      observedAt: T0,
      now: T0 + 15_000,
      expect: { kind: 'update', renew: false, holder: 'me', transitions: 1 },
    },
  ];
  for (const row of cases) {
    it(row.name, () => {
      const observation = row.lease ? { ...observe(undefined, row.lease, row.observedAt ?? row.now, DEFAULT_TIMING)! } : undefined;
      const action = decideLeaseAction(row.now, ref, row.lease, observation, 'me', DEFAULT_TIMING);
      assert.equal(action.kind, row.expect.kind);
      if (action.kind === 'wait') {
        assert.equal(action.holder, row.expect.holder);
        assert.equal(action.expiresAt, (row.observedAt ?? 0) + 15_000);
        return;
      }
      const spec = action.lease.spec!;
      if (action.kind === 'update') {
        assert.equal(action.renew, row.expect.renew);
        // The read resourceVersion is the precondition of the write.
        assert.equal(action.lease.metadata.resourceVersion, row.lease!.metadata.resourceVersion);
      } else {
        assert.deepEqual(action.lease.metadata, { name: ref.name, namespace: ref.namespace });
      }
      assert.equal(spec.holderIdentity, row.expect.holder);
      assert.equal(spec.leaseDurationSeconds, 15);
      assert.equal(spec.renewTime, toMicroTime(row.now));
      assert.equal(spec.leaseTransitions, row.expect.transitions);
      if (row.expect.acquireTime) assert.equal(spec.acquireTime, row.expect.acquireTime);
    });
  }
});

describe('renewal, release, deadline', () => {
  const mine = lease({ holderIdentity: 'me', leaseDurationSeconds: 15, leaseTransitions: 2, acquireTime: toMicroTime(T0) }, '42');
  it('renewedLease only moves renewTime and keeps the resourceVersion precondition', () => {
    const renewed = renewedLease(mine, T0 + 2000);
    assert.deepEqual(renewed.spec, { ...mine.spec, renewTime: toMicroTime(T0 + 2000) });
    assert.equal(renewed.metadata.resourceVersion, '42');
  });
  it('releasedLease clears the holder and shortens the duration to 1 s', () => {
    const released = releasedLease(mine, T0 + 5000);
    assert.equal(released.spec?.holderIdentity, '');
    assert.equal(released.spec?.leaseDurationSeconds, 1);
    assert.equal(released.spec?.leaseTransitions, 2);
    assert.equal(released.metadata.resourceVersion, '42');
  });
  const rows = [
    { since: 9_999, exceeded: false },
    { since: 10_000, exceeded: true },
    { since: 12_000, exceeded: true },
  ];
  for (const row of rows) {
    it(`renewDeadlineExceeded ${row.since} ms after the last renewal: ${row.exceeded}`, () => {
      assert.equal(renewDeadlineExceeded(T0 + row.since, T0, DEFAULT_TIMING), row.exceeded);
    });
  }
});
