import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { KubeApiError } from '../kube/errors.ts';
import type { Metrics } from '../telemetry/metrics.ts';

/** The object an Event is about: the VM, or the VMI when it has no VM. */
export interface EventTarget {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid: string;
}

export interface Cause {
  reason: string;
  message: string;
}

export interface CoreEvent {
  metadata: { generateName: string; namespace: string };
  involvedObject: EventTarget;
  reason: string;
  message: string;
  type: 'Warning' | 'Normal';
  source: { component: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
}

export type EventSink = (event: CoreEvent) => Promise<void>;

const COMPONENT = 'persistent-ips';

/**
 * The API server refuses objects in a namespace that is being deleted (403, cause NamespaceTerminating) or is gone
 * (404 on create).
 */
export function namespaceGoing(err: unknown): boolean {
  if (!(err instanceof KubeApiError)) return false;
  if (err.code === 404) return true;
  if (err.code !== 403) return false;
  const causes = err.status?.details?.causes ?? [];
  return causes.some((c) => c.reason === 'NamespaceTerminating') || /because it is being terminated/.test(err.status?.message ?? err.message);
}

/**
 * Emits one Warning Event per cause while it lasts. A reconcile reports the full set of current causes for an
 * object; only causes that were not already reported produce an Event, so a blocked VM that is reconciled every
 * resync does not flood the API server. When a cause clears and later comes back, it is reported again.
 */
export class EventRecorder {
  private readonly reported = new Map<string, Set<string>>();
  private readonly sink: EventSink;
  private readonly log: Logger;
  private readonly metrics: Metrics | undefined;
  private readonly instance: string;
  private readonly now: () => Date;

  constructor(sink: EventSink, log: Logger, metrics?: Metrics, options: { instance?: string; now?: () => Date } = {}) {
    this.sink = sink;
    this.log = log;
    this.metrics = metrics;
    this.instance = options.instance ?? hostname();
    this.now = options.now ?? (() => new Date());
  }

  /** Reports the complete current set of causes for `target`; returns the causes that were newly emitted. */
  async report(target: EventTarget, causes: readonly Cause[]): Promise<Cause[]> {
    const previous = this.reported.get(target.uid) ?? new Set<string>();
    const current = new Set<string>();
    const fresh: Cause[] = [];
    for (const cause of causes) {
      const id = `${cause.reason}\u0000${cause.message}`;
      if (current.has(id)) continue;
      current.add(id);
      if (!previous.has(id)) fresh.push(cause);
    }
    const delivered = new Set([...current].filter((id) => previous.has(id)));
    for (const cause of fresh) {
      this.metrics?.persistenceBlocked.inc({ reason: cause.reason });
      this.log.warn({ namespace: target.namespace, name: target.name, kind: target.kind, reason: cause.reason }, cause.message);
      try {
        await this.sink(this.toEvent(target, cause));
        delivered.add(`${cause.reason}\u0000${cause.message}`);
      } catch (err) {
        const fields = { namespace: target.namespace, name: target.name, kind: target.kind, reason: cause.reason };
        if (namespaceGoing(err)) {
          // Expected while a namespace is deleted: its VMs are reconciled on their way out, and the API server
          // refuses new objects there. Counted, logged at debug, and not retried (the namespace will not come back
          // to take it).
          this.metrics?.eventsDropped.inc({ reason: 'namespace_terminating' });
          this.log.debug({ ...fields, err }, 'event not recorded: the namespace is being deleted');
          delivered.add(`${cause.reason}\u0000${cause.message}`);
          continue;
        }
        // Not remembered as reported, so the next reconcile of this object tries again.
        this.metrics?.eventsDropped.inc({ reason: 'error' });
        this.log.error({ ...fields, err }, 'could not record event');
      }
    }
    if (delivered.size === 0) this.reported.delete(target.uid);
    else this.reported.set(target.uid, delivered);
    return fresh;
  }

  /** One Normal Event about something done (not a lasting cause); a failure is logged, not retried. */
  async notice(target: EventTarget, cause: Cause): Promise<void> {
    try {
      await this.sink({ ...this.toEvent(target, cause), type: 'Normal' });
    } catch (err) {
      if (namespaceGoing(err)) return;
      this.metrics?.eventsDropped.inc({ reason: 'error' });
      this.log.error({ namespace: target.namespace, name: target.name, kind: target.kind, reason: cause.reason, err }, 'could not record event');
    }
  }

  /** Drops what is remembered about an object that no longer exists. */
  forget(uid: string): void {
    this.reported.delete(uid);
  }

  private toEvent(target: EventTarget, cause: Cause): CoreEvent {
    const at = this.now().toISOString();
    return {
      metadata: { generateName: `${target.name}.`, namespace: target.namespace },
      involvedObject: target,
      reason: cause.reason,
      message: cause.message,
      type: 'Warning',
      source: { component: COMPONENT },
      reportingComponent: COMPONENT,
      reportingInstance: this.instance,
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
    };
  }
}
