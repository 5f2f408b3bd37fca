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
import { keyString } from '../kube/key.ts';
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

type AttemptResult = { kind: 'held' } | { kind: 'other'; holder: string } | { kind: 'error' };

export const createLeaderElector = (options: LeaderElectorOptions): LeaderElector => new LeaderElector(options);

// While we hold the Lease (from acquisition to loss or release) we renew it; a term of leadership (the leader's
// signal) lies within: it ends at loss, or at stop() while we go on holding until the work has wound down.
export class LeaderElector {
  readonly #o: LeaderElectorOptions;
  readonly #timing: LeaderElectionTiming;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #log: Logger;
  #observation: Observation | undefined;
  #lastHolder: string | undefined;
  /** The Lease as we last wrote it while holding it: the base of fast renewals and of the release. */
  #written: Lease | undefined;
  #stopping = false;
  readonly #stopController = new AbortController();
  #running: Promise<void> | undefined;
  #holding = false;
  #leading = false;
  #termController: AbortController | undefined; // aborted when the term ends (lost or stop): the leader's signal
  #lossController: AbortController | undefined; // aborted only when the Lease is lost: cancels in-flight renewals
  #deadlineTimer: TimerHandle | undefined;
  #lastRenewAt = 0;
  #wake: (() => void) | undefined;

  constructor(options: LeaderElectorOptions) {
    this.#timing = { ...DEFAULT_TIMING, ...options.timing };
    validateTiming(this.#timing);
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#random = options.random ?? Math.random;
    this.#log = options.logger.child({ component: 'leader-election', lease: keyString(options.lease), identity: options.identity });
  }

  /** Competes for the Lease until stop(); resolves once stopped (and released, if it was leading). */
  run(): Promise<void> {
    this.#running ??= this.#loop();
    return this.#running;
  }

  /** Graceful: stop leading (signal), wait for the leader's work, release the Lease; resolves when run() has. */
  async stop(): Promise<void> {
    if (!this.#stopping) {
      this.#stopping = true;
      this.#stopController.abort(new Error('leader election stopped'));
      this.#endTerm('shutting down', false);
      this.#wake?.();
    }
    await this.#running;
  }

  isLeader(): boolean {
    return this.#leading;
  }

  /** The holder last seen in the Lease ('' or undefined when none). */
  leader(): string | undefined {
    return this.#lastHolder;
  }

  async #loop(): Promise<void> {
    const { retryPeriodMs, renewDeadlineMs } = this.#timing;
    while (!this.#stopping) {
      const startedAt = this.#clock.now();
      const { signal, done } = this.#withTimeout(this.#stopController.signal, renewDeadlineMs);
      const result = await this.#tryAcquireOrRenew(signal);
      done();
      if (this.#stopping) {
        // Acquired just as we were told to stop: hand it back at once.
        if (result.kind === 'held') {
          this.#holding = true;
          await this.#release();
        }
        break;
      }
      if (result.kind === 'held') {
        this.#lastRenewAt = startedAt;
        await this.#lead();
        continue;
      }
      await this.#sleep(retryPeriodMs * (1 + this.#random() * (JITTER_FACTOR - 1)));
    }
    this.#log.info('leader election stopped');
  }

  /** Holds the Lease from a successful acquisition until it is lost or, after stop(), released. */
  async #lead(): Promise<void> {
    const work = this.#startTerm();
    const loss = this.#lossController!.signal;
    let workDone = false;
    void work.then(() => {
      workDone = true;
      // Only a stepping-down leader waits for the work; a leader whose work returned early keeps its rhythm.
      if (this.#stopping) this.#wake?.();
    });
    const over = (): boolean => loss.aborted || (this.#stopping && workDone);
    while (!over()) {
      await this.#sleep(this.#timing.retryPeriodMs);
      if (!over()) await this.#renew(loss);
    }
    if (this.#holding) await this.#release();
    // A lost term's work may still be winding down: never start a new term over it.
    await work;
  }

  /** One renewal while holding; a Lease found held by another, or not renewed by the deadline, is lost. */
  async #renew(loss: AbortSignal): Promise<void> {
    const startedAt = this.#clock.now();
    const result = await this.#tryAcquireOrRenew(loss);
    if (loss.aborted) return;
    if (result.kind === 'held') {
      this.#lastRenewAt = startedAt;
      this.#armDeadline();
    } else if (result.kind === 'other') {
      this.#loseLease(`lease is held by ${result.holder}`);
    } else if (renewDeadlineExceeded(this.#clock.now(), this.#lastRenewAt, this.#timing)) {
      // The deadline timer normally fired first; this covers a timer delayed by a blocked event loop.
      this.#loseLease(`lease not renewed within ${this.#timing.renewDeadlineMs} ms`);
    }
  }

  /** One acquire-or-renew attempt, as client-go's tryAcquireOrRenew. */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<AttemptResult> {
    // Fast path while holding: renew what we wrote, without reading first. On failure (a conflict means someone
    // else wrote), read and decide.
    if (this.#holding && this.#written) {
      const renewed = await this.#renewWithoutRead(signal, this.#written);
      if (renewed) return renewed;
    }
    try {
      return await this.#readAndDecide(signal);
    } catch (error) {
      if (!signal.aborted) this.#log.warn({ err: error }, this.#holding ? 'failed to renew the lease' : 'failed to acquire the lease');
      return { kind: 'error' };
    }
  }

  /** The fast renewal; undefined when the Lease must be read. */
  async #renewWithoutRead(signal: AbortSignal, written: Lease): Promise<AttemptResult | undefined> {
    try {
      this.#written = await this.#o.client.update(renewedLease(written, this.#clock.now()), signal);
      return { kind: 'held' };
    } catch (error) {
      if (signal.aborted) return { kind: 'error' };
      this.#log.debug({ err: error }, 'lease renewal without read failed; reading the lease');
      this.#written = undefined;
      return undefined;
    }
  }

  async #readAndDecide(signal: AbortSignal): Promise<AttemptResult> {
    const { client, identity } = this.#o;
    const current = await client.get(signal);
    const now = this.#clock.now();
    this.#observation = observe(this.#observation, current, now, this.#timing);
    if (current) this.#noteHolder(current.spec?.holderIdentity ?? '');
    const action = decideLeaseAction(now, this.#o.lease, current, this.#observation, identity, this.#timing);
    if (action.kind === 'wait') return { kind: 'other', holder: action.holder };
    this.#written = await (action.kind === 'create' ? client.create(action.lease, signal) : client.update(action.lease, signal));
    this.#observation = observe(this.#observation, this.#written, this.#clock.now(), this.#timing);
    this.#noteHolder(identity);
    return { kind: 'held' };
  }

  #startTerm(): Promise<void> {
    this.#holding = true;
    this.#leading = true;
    this.#termController = new AbortController();
    this.#lossController = new AbortController();
    this.#armDeadline();
    this.#o.isLeaderGauge?.set(1);
    this.#log.info('started leading');
    const signal = this.#termController.signal;
    return Promise.resolve()
      .then(() => this.#o.callbacks.onStartedLeading(signal))
      .then(
        () => undefined,
        (error: unknown) => this.#log.error({ err: error }, 'the leader work failed'),
      );
  }

  /** Ends the term: the leader's signal fires, then onStoppedLeading. Exactly once per term. */
  #endTerm(reason: string, lost: boolean): void {
    if (!this.#leading) return;
    this.#leading = false;
    // Lost: nothing of the term may write on (queue/serve.ts). Stepping down: in-flight work drains.
    this.#termController?.abort(lost ? new AbandonInFlight(reason) : new Error(reason));
    this.#o.isLeaderGauge?.set(0);
    if (lost) this.#log.warn({ reason }, 'stopped leading');
    else this.#log.info({ reason }, 'stepping down');
    this.#safely('onStoppedLeading', () => this.#o.callbacks.onStoppedLeading());
  }

  /** We can no longer be sure to hold the Lease: stop at once, before anyone else may take it. */
  #loseLease(reason: string): void {
    if (!this.#holding) return;
    this.#holding = false;
    this.#written = undefined;
    this.#disarmDeadline();
    this.#lossController?.abort(new Error(reason));
    if (this.#leading) this.#endTerm(reason, true);
    else this.#log.warn({ reason }, 'lost the lease while stepping down');
    this.#wake?.();
  }

  async #release(): Promise<void> {
    const { client, identity } = this.#o;
    let base = this.#written;
    this.#holding = false;
    this.#written = undefined;
    this.#disarmDeadline();
    const { signal, done } = this.#withTimeout(new AbortController().signal, this.#timing.renewDeadlineMs);
    try {
      // First with our last write; if that is stale (or missing), with what the API holds, if it is still ours.
      for (let attempt = 0; attempt < 2; attempt++) {
        const current = base ?? (await client.get(signal));
        if (current?.spec?.holderIdentity !== identity) return;
        try {
          await client.update(releasedLease(current, this.#clock.now()), signal);
          this.#log.info('released the lease');
          return;
        } catch (error) {
          if (base === undefined || signal.aborted) throw error;
          base = undefined;
        }
      }
    } catch (error) {
      this.#log.warn({ err: error }, 'failed to release the lease; a standby takes over when it expires');
    } finally {
      done();
    }
  }

  #armDeadline(): void {
    this.#disarmDeadline();
    this.#deadlineTimer = this.#clock.setTimeout(
      () => {
        this.#deadlineTimer = undefined;
        this.#loseLease(`lease not renewed within ${this.#timing.renewDeadlineMs} ms`);
      },
      this.#lastRenewAt + this.#timing.renewDeadlineMs - this.#clock.now(),
    );
  }

  #disarmDeadline(): void {
    if (this.#deadlineTimer !== undefined) this.#clock.clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
  }

  #noteHolder(holder: string): void {
    if (holder === this.#lastHolder) return;
    this.#lastHolder = holder;
    this.#log.info({ holder }, holder === '' ? 'lease released' : 'new leader observed');
    this.#safely('onNewLeader', () => this.#o.callbacks.onNewLeader?.(holder));
  }

  /** A callback that throws is logged; it does not break the election. */
  #safely(name: string, callback: () => void): void {
    try {
      callback();
    } catch (error) {
      this.#log.error({ err: error }, `${name} failed`);
    }
  }

  #withTimeout(signal: AbortSignal, ms: number): { signal: AbortSignal; done: () => void } {
    const controller = new AbortController();
    const handle = this.#clock.setTimeout(() => controller.abort(new Error(`lease request timed out after ${ms} ms`)), ms);
    return { signal: AbortSignal.any([signal, controller.signal]), done: () => this.#clock.clearTimeout(handle) };
  }

  /** A pause that stop() or the loss of the Lease cuts short (#wake). */
  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        this.#clock.clearTimeout(handle);
        this.#wake = undefined;
        resolve();
      };
      const handle = this.#clock.setTimeout(wake, ms);
      this.#wake = wake;
    });
  }
}
