// The one Event recorder of the project: the claims loop (on a VM, or a standalone VMI), the webhook's denials (on the
// VM) and the allocator (on a NAD, on a claim's VM) all report through it. A caller reports the complete set of
// current causes of one scope; only causes that were not already reported become Events, so a cause that lasts does
// not flood the API server at every reconcile or resync, and a cause that clears and comes back is reported again.
// A scope is an object (the usual case: the causes go on it, and the scope is its uid) or a name (the allocator: a
// network's causes go on several objects, each cause naming its own).

import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { EventInput } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { Metrics } from '../telemetry/metrics.ts';

/** The object an Event is about. */
export interface EventTarget {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

export interface Cause {
  /** Default: the object the scope is. */
  target?: EventTarget;
  /** Default Warning. */
  type?: 'Warning' | 'Normal';
  reason: string;
  message: string;
}

export type EventSink = (event: EventInput) => Promise<unknown>;

/** Counts new Warning causes (persistenceBlocked, by reason) and Events not recorded (eventsDropped). */
export type EventMetrics = Pick<Metrics, 'persistenceBlocked' | 'eventsDropped'>;

export interface EventRecorderOptions {
  /** `source.component` and `reportingComponent`; default `persistent-ips`. */
  component?: string;
  instance?: string;
  now?: () => Date;
}

/** The API server rejects longer Event messages. */
const MAX_MESSAGE = 1024;

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

export class EventRecorder {
  readonly #reported = new Map<string, Set<string>>();
  readonly #sink: EventSink;
  readonly #log: Logger;
  readonly #metrics: EventMetrics | undefined;
  readonly #component: string;
  readonly #instance: string;
  readonly #now: () => Date;

  constructor(sink: EventSink, log: Logger, metrics?: EventMetrics, options: EventRecorderOptions = {}) {
    this.#sink = sink;
    this.#log = log;
    this.#metrics = metrics;
    this.#component = options.component ?? 'persistent-ips';
    this.#instance = options.instance ?? hostname();
    this.#now = options.now ?? (() => new Date());
  }

  /** Reports every current cause of `scope`; returns those newly emitted (delivered or not). */
  async report(scope: EventTarget | string, causes: readonly Cause[]): Promise<Cause[]> {
    const subject = typeof scope === 'string' ? undefined : scope;
    const id = typeof scope === 'string' ? scope : (scope.uid ?? `${scope.kind}/${scope.namespace}/${scope.name}`);
    const previous = this.#reported.get(id);
    if (causes.length === 0 && previous === undefined) return [];
    const delivered = new Set<string>();
    const fresh: Cause[] = [];
    const seen = new Set<string>();
    for (const cause of causes) {
      const t = cause.target ?? subject;
      if (!t) throw new Error(`event cause ${cause.reason} of scope ${id} names no object`);
      const key = identity(t, cause);
      if (seen.has(key)) continue;
      seen.add(key);
      if (previous?.has(key)) {
        delivered.add(key);
        continue;
      }
      fresh.push(cause);
      const fields = { kind: t.kind, namespace: t.namespace, name: t.name, reason: cause.reason };
      if ((cause.type ?? 'Warning') === 'Warning') {
        this.#metrics?.persistenceBlocked.inc({ reason: cause.reason });
        this.#log.warn(fields, cause.message);
      } else this.#log.info(fields, cause.message);
      if (await this.#send(t, cause, fields)) delivered.add(key);
    }
    if (delivered.size === 0) this.#reported.delete(id);
    else this.#reported.set(id, delivered);
    return fresh;
  }

  /** One Normal Event about something done (not a lasting cause); a failure is logged, not retried. */
  async notice(target: EventTarget, cause: Pick<Cause, 'reason' | 'message'>): Promise<void> {
    await this.#send(target, { ...cause, type: 'Normal' }, { kind: target.kind, namespace: target.namespace, name: target.name, reason: cause.reason });
  }

  /** Drops what is remembered of a scope that is gone (a deleted object's uid). */
  forget(scope: string): void {
    this.#reported.delete(scope);
  }

  /** True when the Event need not be sent again: delivered, or refused for good. */
  async #send(target: EventTarget, cause: Cause, fields: Record<string, string>): Promise<boolean> {
    try {
      await this.#sink(this.#event(target, cause));
      return true;
    } catch (err) {
      if (namespaceGoing(err)) {
        // Expected while a namespace is deleted: its objects are reconciled on their way out, and the API server
        // refuses new objects there. Counted, logged at debug, and not retried (the namespace will not come back
        // to take it).
        this.#metrics?.eventsDropped.inc({ reason: 'namespace_terminating' });
        this.#log.debug({ ...fields, err }, 'event not recorded: the namespace is being deleted');
        return true;
      }
      // Not remembered as reported, so the next report of this scope tries again.
      this.#metrics?.eventsDropped.inc({ reason: 'error' });
      this.#log.error({ ...fields, err }, 'could not record event');
      return false;
    }
  }

  #event(target: EventTarget, cause: Cause): EventInput {
    const at = this.#now().toISOString();
    return {
      metadata: { generateName: `${target.name}.`, namespace: target.namespace },
      involvedObject: {
        apiVersion: target.apiVersion,
        kind: target.kind,
        namespace: target.namespace,
        name: target.name,
        ...(target.uid ? { uid: target.uid } : {}),
      },
      reason: cause.reason,
      message: cause.message.length > MAX_MESSAGE ? `${cause.message.slice(0, MAX_MESSAGE - 1)}…` : cause.message,
      type: cause.type ?? 'Warning',
      source: { component: this.#component },
      reportingComponent: this.#component,
      reportingInstance: this.#instance,
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
    };
  }
}

function identity(t: EventTarget, cause: Cause): string {
  return [t.kind, t.namespace, t.name, t.uid ?? '', cause.type ?? 'Warning', cause.reason, cause.message].join('\u0000');
}
