// The pure half of leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics: what to write
// (create, renew, take over) or whether to wait, given the time, the Lease as last read, and our identity.
//
// Time safety rests on one rule, also client-go's: a candidate measures a holder's lease from the moment IT SAW the
// lease record change (its own clock), never from the renewTime written in the object, so clocks need not agree
// between replicas, only run at the same rate. A holder that last renewed at T (the time it SENT the renewal) is
// seen by others at some moment >= T, so nobody takes over before T + leaseDuration; the holder gives up at
// T + renewDeadline < T + leaseDuration, so two leaders never overlap.

import type { KubeObject } from '../kube/types.ts';
import type { ObjectKey } from '../kube/key.ts';
import { apiVersionOf, resources } from '../kube/resources.ts';

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number | null;
  /** MicroTime: RFC 3339 with exactly 6 fractional digits. */
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number | null;
}

export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export interface LeaderElectionTiming {
  /** How long a non-leader waits, after the record last changed, before it may take over (client-go: 15 s). */
  leaseDurationMs: number;
  /** How long the leader keeps trying to renew before it gives up leadership (client-go: 10 s). */
  renewDeadlineMs: number;
  /** Pause between attempts, to acquire or to renew (client-go: 2 s). */
  retryPeriodMs: number;
}

export const DEFAULT_TIMING: LeaderElectionTiming = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

/** client-go's jitter on the acquire retry period. */
export const JITTER_FACTOR = 1.2;

/** Rejects timings under which two leaders could overlap or a healthy leader could not keep its lease. */
export function validateTiming(timing: LeaderElectionTiming): void {
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = timing;
  if (!(retryPeriodMs > 0 && renewDeadlineMs > 0 && leaseDurationMs > 0)) {
    throw new Error(`leader election timing must be positive: ${JSON.stringify(timing)}`);
  }
  if (leaseDurationMs <= renewDeadlineMs) {
    throw new Error(`leaseDuration (${leaseDurationMs} ms) must be greater than renewDeadline (${renewDeadlineMs} ms)`);
  }
  if (renewDeadlineMs <= JITTER_FACTOR * retryPeriodMs) {
    throw new Error(`renewDeadline (${renewDeadlineMs} ms) must be greater than ${JITTER_FACTOR} × retryPeriod (${retryPeriodMs} ms)`);
  }
  if (leaseDurationMs % 1000 !== 0) {
    throw new Error(`leaseDuration (${leaseDurationMs} ms) must be whole seconds: the Lease stores seconds`);
  }
}

/** Formats a time as a Kubernetes MicroTime (the API server rejects fewer than 6 fractional digits). */
export function toMicroTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** What a candidate remembers of the record it last saw, and when (its own clock) it first saw it. */
export interface Observation {
  record: string;
  holder: string;
  leaseDurationMs: number;
  observedAt: number;
}

function recordOf(spec: LeaseSpec | undefined): string {
  const s = spec ?? {};
  return JSON.stringify([s.holderIdentity ?? '', s.leaseDurationSeconds ?? 0, s.acquireTime ?? '', s.renewTime ?? '', s.leaseTransitions ?? 0]);
}

/**
 * Updates the observation with a freshly read Lease: the clock restarts only when the record changed. A Lease read
 * again without change keeps the old observation time, which is what lets an abandoned lease expire.
 */
export function observe(previous: Observation | undefined, lease: Lease | undefined, now: number, timing: LeaderElectionTiming): Observation | undefined {
  if (!lease) return undefined;
  const record = recordOf(lease.spec);
  if (previous && previous.record === record) return previous;
  const seconds = lease.spec?.leaseDurationSeconds;
  return {
    record,
    holder: lease.spec?.holderIdentity ?? '',
    // A record without a duration is taken at ours, as client-go does with its zero value: the safe side is to wait.
    leaseDurationMs: typeof seconds === 'number' && seconds > 0 ? seconds * 1000 : timing.leaseDurationMs,
    observedAt: now,
  };
}

export type LeaseAction =
  /** No Lease yet: create it, holding it. */
  | { kind: 'create'; lease: Lease }
  /** Write our record with the read resourceVersion as precondition; `renew` when we already held it. */
  | { kind: 'update'; lease: Lease; renew: boolean }
  /** Someone else holds a lease that has not expired by our observation. */
  | { kind: 'wait'; holder: string; expiresAt: number };

/** The namespace and name of the Lease. */
export type LeaseRef = ObjectKey;

/**
 * The decision of one acquire-or-renew attempt. `lease` is what was just read (undefined: not found) and
 * `observation` the result of `observe` on it.
 */
export function decideLeaseAction(
  now: number,
  ref: LeaseRef,
  lease: Lease | undefined,
  observation: Observation | undefined,
  identity: string,
  timing: LeaderElectionTiming,
): LeaseAction {
  const durationSeconds = Math.round(timing.leaseDurationMs / 1000);
  const stamp = toMicroTime(now);
  if (!lease) {
    return {
      kind: 'create',
      lease: {
        apiVersion: apiVersionOf(resources.leases),
        kind: resources.leases.kind,
        metadata: { name: ref.name, namespace: ref.namespace },
        spec: { holderIdentity: identity, leaseDurationSeconds: durationSeconds, acquireTime: stamp, renewTime: stamp, leaseTransitions: 0 },
      },
    };
  }
  const spec = lease.spec ?? {};
  const holder = spec.holderIdentity ?? '';
  const ours = holder === identity;
  if (holder !== '' && !ours && observation) {
    const expiresAt = observation.observedAt + observation.leaseDurationMs;
    if (expiresAt > now) return { kind: 'wait', holder, expiresAt };
  }
  const transitions = spec.leaseTransitions ?? 0;
  return {
    kind: 'update',
    renew: ours,
    lease: {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: durationSeconds,
        renewTime: stamp,
        acquireTime: ours && spec.acquireTime ? spec.acquireTime : stamp,
        leaseTransitions: ours ? transitions : transitions + 1,
      },
    },
  };
}

/** The renewal of a Lease we wrote ourselves, without reading it first (its resourceVersion is the precondition). */
export function renewedLease(written: Lease, now: number): Lease {
  return { ...written, spec: { ...written.spec, renewTime: toMicroTime(now) } };
}

/**
 * What a leader writes when it steps down on purpose: no holder, a 1 s duration, so that a standby takes over at
 * its next attempt instead of waiting out the lease (client-go's ReleaseOnCancel).
 */
export function releasedLease(written: Lease, now: number): Lease {
  const stamp = toMicroTime(now);
  return {
    ...written,
    spec: {
      ...written.spec,
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: stamp,
      renewTime: stamp,
      leaseTransitions: written.spec?.leaseTransitions ?? 0,
    },
  };
}

/** True once a leader has gone `renewDeadline` without a successful renewal: it must stop leading now. */
export function renewDeadlineExceeded(now: number, lastRenewAt: number, timing: LeaderElectionTiming): boolean {
  return now - lastRenewAt >= timing.renewDeadlineMs;
}
