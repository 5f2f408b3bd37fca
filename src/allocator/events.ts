// Events of the allocator: on a NAD whose pool cannot be served, on a VM whose claim was refused or conflicts. Each
// pass reports the complete set of current causes for one scope (a network, or a NAD); only causes that were not
// already reported become Events, so a refusal that lasts does not flood the API server, and a cause that clears
// and comes back is reported again.

import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { EventInput } from '../kube/client.ts';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

export interface Cause {
  target: EventTarget;
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export type EventSink = (event: EventInput) => Promise<unknown>;

const COMPONENT = 'persistent-ips-allocator';
/** The API server rejects longer Event messages. */
const MAX_MESSAGE = 1024;

export class ScopedEventRecorder {
  readonly #reported = new Map<string, Set<string>>();
  readonly #sink: EventSink;
  readonly #log: Logger;
  readonly #instance: string;
  readonly #now: () => Date;

  constructor(sink: EventSink, log: Logger, options: { instance?: string; now?: () => Date } = {}) {
    this.#sink = sink;
    this.#log = log;
    this.#instance = options.instance ?? hostname();
    this.#now = options.now ?? (() => new Date());
  }

  /** Reports every current cause of `scope`; returns those newly emitted (delivered or not). */
  async report(scope: string, causes: readonly Cause[]): Promise<Cause[]> {
    const previous = this.#reported.get(scope) ?? new Set<string>();
    const delivered = new Set<string>();
    const fresh: Cause[] = [];
    const seen = new Set<string>();
    for (const cause of causes) {
      const id = identity(cause);
      if (seen.has(id)) continue;
      seen.add(id);
      if (previous.has(id)) {
        delivered.add(id);
        continue;
      }
      fresh.push(cause);
      const t = cause.target;
      const fields = { kind: t.kind, namespace: t.namespace, name: t.name, reason: cause.reason };
      if (cause.type === 'Warning') this.#log.warn(fields, cause.message);
      else this.#log.info(fields, cause.message);
      try {
        await this.#sink(this.#event(cause));
        delivered.add(id);
      } catch (err) {
        // Not remembered, so the next pass tries again.
        this.#log.error({ err, ...fields }, 'could not record event');
      }
    }
    if (delivered.size === 0) this.#reported.delete(scope);
    else this.#reported.set(scope, delivered);
    return fresh;
  }

  #event(cause: Cause): EventInput {
    const at = this.#now().toISOString();
    const { target } = cause;
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
      type: cause.type,
      source: { component: COMPONENT },
      reportingComponent: COMPONENT,
      reportingInstance: this.#instance,
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
    };
  }
}

function identity(cause: Cause): string {
  const t = cause.target;
  return [t.kind, t.namespace, t.name, t.uid ?? '', cause.type, cause.reason, cause.message].join('\u0000');
}
