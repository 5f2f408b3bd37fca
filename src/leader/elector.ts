// The I/O half of leader election: the acquire and renew loops around the pure decisions of lease.ts.
//
// Guarantees:
// - `onStartedLeading(signal)` is called when this replica acquires the Lease; `signal` aborts, and
//   `onStoppedLeading()` is called right after, exactly once per term.
// - A leader that has not renewed within renewDeadline stops leading at once, from a timer of its own: a renewal
//   hanging in the network cannot hold the abort back. The in-flight request is aborted too.
// - A leader that reads the Lease and finds another holder stops leading at once.
// - stop() (graceful shutdown) aborts the leader's signal, keeps renewing while the leader's work (the promise
//   returned by onStartedLeading) winds down, then releases the Lease (no holder, 1 s duration), so a standby
//   takes over at its next retry instead of after leaseDuration, and the two never write at the same time.
// - After losing the Lease (not by stop()), the elector waits for the old term's work to end, then competes again.

import type { Logger } from '../telemetry/logger.ts';
import { realClock, type Clock, type TimerHandle } from '../kube/clock.ts';
import { AbandonInFlight } from '../queue/serve.ts';
import {
  DEFAULT_TIMING,
  JITTER_FACTOR,
  decideLeaseAction,
  observe,
  releasedLease,
  renewDeadlineExceeded,
  renewedLease,
  validateTiming,
  type LeaderElectionTiming,
  type Lease,
  type LeaseRef,
  type Observation,
} from './lease.ts';

/** The API calls on the one Lease, injected (the controller wires them to src/kube's client). */
export interface LeaseClient {
  /** GET; resolves undefined when the Lease does not exist (404). */
  get(signal: AbortSignal): Promise<Lease | undefined>;
  /** POST; rejects when it already exists. */
  create(lease: Lease, signal: AbortSignal): Promise<Lease>;
  /** PUT with `lease.metadata.resourceVersion` as precondition; rejects on conflict. */
  update(lease: Lease, signal: AbortSignal): Promise<Lease>;
}

export interface LeaderCallbacks {
  /** The work of a leader. It must stop when `signal` aborts; the returned promise tells when it has. */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  onStoppedLeading(): void;
  /** A holder other than the last one seen (including ourselves); '' when the Lease was released. */
  onNewLeader?(identity: string): void;
}

export interface LeaderElectorOptions {
  lease: LeaseRef;
  /** Unique per replica (the pod name, plus a random suffix in case a pod name is reused). */
  identity: string;
  client: LeaseClient;
  callbacks: LeaderCallbacks;
  logger: Logger;
  timing?: Partial<LeaderElectionTiming>;
  clock?: Clock;
  /** In [0, 1): jitter of the acquire retry period. */
  random?: () => number;
  /** leader_election_master_status from src/telemetry/metrics.ts. */
  isLeaderGauge?: { set(value: number): void };
}

export interface LeaderElector {
  /** Competes for the Lease until stop(); resolves once stopped (and released, if it was leading). */
  run(): Promise<void>;
  /** Graceful: stop leading (signal), wait for the leader's work, release the Lease; resolves when run() has. */
  stop(): Promise<void>;
  isLeader(): boolean;
  /** The holder last seen in the Lease ('' or undefined when none). */
  leader(): string | undefined;
}

type AttemptResult = { kind: 'held' } | { kind: 'other'; holder: string } | { kind: 'error' };

export function createLeaderElector(options: LeaderElectorOptions): LeaderElector {
  const timing: LeaderElectionTiming = { ...DEFAULT_TIMING, ...options.timing };
  validateTiming(timing);
  const { client, callbacks, identity } = options;
  const clock = options.clock ?? realClock;
  const random = options.random ?? Math.random;
  const log = options.logger.child({ component: 'leader-election', lease: `${options.lease.namespace}/${options.lease.name}`, identity });

  let observation: Observation | undefined;
  let lastHolder: string | undefined;
  /** The Lease as we last wrote it while holding it: the base of fast renewals and of the release. */
  let written: Lease | undefined;
  let stopping = false;
  const stopController = new AbortController();
  let running: Promise<void> | undefined;

  // While we hold the Lease (from acquisition to loss or release) we renew it; a term of leadership (the leader's
  // signal) lies within: it ends at loss, or at stop() while we go on holding until the work has wound down.
  let holding = false;
  let leading = false;
  let termController: AbortController | undefined; // aborted when the term ends (lost or stop): the leader's signal
  let lossController: AbortController | undefined; // aborted only when the Lease is lost: cancels in-flight renewals
  let deadlineTimer: TimerHandle | undefined;
  let lastRenewAt = 0;
  let wake: (() => void) | undefined;

  const sleep = (ms: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const handle = clock.setTimeout(() => {
        wake = undefined;
        resolve();
      }, ms);
      wake = () => {
        clock.clearTimeout(handle);
        wake = undefined;
        resolve();
      };
    });
  const wakeUp = (): void => wake?.();

  const noteHolder = (holder: string): void => {
    if (holder === lastHolder) return;
    lastHolder = holder;
    log.info({ holder }, holder === '' ? 'lease released' : 'new leader observed');
    try {
      callbacks.onNewLeader?.(holder);
    } catch (error) {
      log.error({ err: error }, 'onNewLeader failed');
    }
  };

  const withTimeout = (signal: AbortSignal, ms: number): { signal: AbortSignal; done: () => void } => {
    const controller = new AbortController();
    const handle = clock.setTimeout(() => controller.abort(new Error(`lease request timed out after ${ms} ms`)), ms);
    return { signal: AbortSignal.any([signal, controller.signal]), done: () => clock.clearTimeout(handle) };
  };

  /** One acquire-or-renew attempt, as client-go's tryAcquireOrRenew. */
  const attempt = async (signal: AbortSignal): Promise<AttemptResult> => {
    const startedAt = clock.now();
    // Fast path while holding: renew what we wrote, without reading first. On failure (a conflict means someone
    // else wrote), read and decide.
    if (holding && written) {
      try {
        written = await client.update(renewedLease(written, startedAt), signal);
        return { kind: 'held' };
      } catch (error) {
        if (signal.aborted) return { kind: 'error' };
        log.debug({ err: error }, 'lease renewal without read failed; reading the lease');
        written = undefined;
      }
    }
    try {
      const current = await client.get(signal);
      const now = clock.now();
      observation = observe(observation, current, now, timing);
      if (current) noteHolder(current.spec?.holderIdentity ?? '');
      const action = decideLeaseAction(now, options.lease, current, observation, identity, timing);
      switch (action.kind) {
        case 'wait':
          return { kind: 'other', holder: action.holder };
        case 'create':
          written = await client.create(action.lease, signal);
          break;
        case 'update':
          written = await client.update(action.lease, signal);
          break;
      }
      observation = observe(observation, written, clock.now(), timing);
      noteHolder(identity);
      return { kind: 'held' };
    } catch (error) {
      if (!signal.aborted) log.warn({ err: error }, holding ? 'failed to renew the lease' : 'failed to acquire the lease');
      return { kind: 'error' };
    }
  };

  const armDeadline = (): void => {
    if (deadlineTimer !== undefined) clock.clearTimeout(deadlineTimer);
    deadlineTimer = clock.setTimeout(
      () => {
        deadlineTimer = undefined;
        loseLease(`lease not renewed within ${timing.renewDeadlineMs} ms`);
      },
      lastRenewAt + timing.renewDeadlineMs - clock.now(),
    );
  };
  const disarmDeadline = (): void => {
    if (deadlineTimer !== undefined) clock.clearTimeout(deadlineTimer);
    deadlineTimer = undefined;
  };

  /** Ends the term: the leader's signal fires, then onStoppedLeading. Exactly once per term. */
  const endTerm = (reason: string, lost: boolean): void => {
    if (!leading) return;
    leading = false;
    // Lost: nothing of the term may write on (queue/serve.ts). Stepping down: in-flight work drains.
    termController?.abort(lost ? new AbandonInFlight(reason) : new Error(reason));
    options.isLeaderGauge?.set(0);
    if (lost) log.warn({ reason }, 'stopped leading');
    else log.info({ reason }, 'stepping down');
    try {
      callbacks.onStoppedLeading();
    } catch (error) {
      log.error({ err: error }, 'onStoppedLeading failed');
    }
  };

  /** We can no longer be sure to hold the Lease: stop at once, before anyone else may take it. */
  const loseLease = (reason: string): void => {
    if (!holding) return;
    holding = false;
    written = undefined;
    disarmDeadline();
    lossController?.abort(new Error(reason));
    if (leading) endTerm(reason, true);
    else log.warn({ reason }, 'lost the lease while stepping down');
    wakeUp();
  };

  const startTerm = (): Promise<void> => {
    holding = true;
    leading = true;
    termController = new AbortController();
    lossController = new AbortController();
    armDeadline();
    options.isLeaderGauge?.set(1);
    log.info('started leading');
    const signal = termController.signal;
    return Promise.resolve()
      .then(() => callbacks.onStartedLeading(signal))
      .then(
        () => undefined,
        (error: unknown) => log.error({ err: error }, 'the leader work failed'),
      );
  };

  /** Holds the Lease from a successful acquisition until it is lost or, after stop(), released. */
  const lead = async (): Promise<void> => {
    const work = startTerm();
    const loss = lossController!.signal;
    let workDone = false;
    void work.then(() => {
      workDone = true;
      // Only a stepping-down leader waits for the work; a leader whose work returned early keeps its rhythm.
      if (stopping) wakeUp();
    });
    for (;;) {
      if (loss.aborted || (stopping && workDone)) break;
      await sleep(timing.retryPeriodMs);
      if (loss.aborted || (stopping && workDone)) continue;
      const startedAt = clock.now();
      const result = await attempt(loss);
      if (loss.aborted) continue;
      if (result.kind === 'held') {
        lastRenewAt = startedAt;
        armDeadline();
      } else if (result.kind === 'other') {
        loseLease(`lease is held by ${result.holder}`);
      } else if (renewDeadlineExceeded(clock.now(), lastRenewAt, timing)) {
        // The deadline timer normally fired first; this covers a timer delayed by a blocked event loop.
        loseLease(`lease not renewed within ${timing.renewDeadlineMs} ms`);
      }
    }
    if (holding) await release();
    // A lost term's work may still be winding down: never start a new term over it.
    await work;
  };

  const release = async (): Promise<void> => {
    let base = written;
    holding = false;
    written = undefined;
    disarmDeadline();
    const { signal, done } = withTimeout(new AbortController().signal, timing.renewDeadlineMs);
    try {
      // First with our last write; if that is stale (or missing), with what the API holds, if it is still ours.
      for (let attempt = 0; attempt < 2; attempt++) {
        const current = base ?? (await client.get(signal));
        if (current?.spec?.holderIdentity !== identity) return;
        try {
          await client.update(releasedLease(current, clock.now()), signal);
          log.info('released the lease');
          return;
        } catch (error) {
          if (base === undefined || signal.aborted) throw error;
          base = undefined;
        }
      }
    } catch (error) {
      log.warn({ err: error }, 'failed to release the lease; a standby takes over when it expires');
    } finally {
      done();
    }
  };

  const loop = async (): Promise<void> => {
    while (!stopping) {
      const startedAt = clock.now();
      const { signal, done } = withTimeout(stopController.signal, timing.renewDeadlineMs);
      const result = await attempt(signal);
      done();
      if (stopping) {
        // Acquired just as we were told to stop: hand it back at once.
        if (result.kind === 'held') {
          holding = true;
          await release();
        }
        break;
      }
      if (result.kind === 'held') {
        lastRenewAt = startedAt;
        await lead();
        continue;
      }
      await sleep(timing.retryPeriodMs * (1 + random() * (JITTER_FACTOR - 1)));
    }
    log.info('leader election stopped');
  };

  return {
    run() {
      running ??= loop();
      return running;
    },
    async stop() {
      if (!stopping) {
        stopping = true;
        stopController.abort(new Error('leader election stopped'));
        endTerm('shutting down', false);
        wakeUp();
      }
      await running;
    },
    isLeader: () => leading,
    leader: () => lastHolder,
  };
}
