// prom-client, through its package entry point (docs/architecture.md has what the bundle pays for it).

import { collectDefaultMetrics as promDefaults, type Registry } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** prom-client's default metrics (names, help texts, behaviour), in `registry` instead of its global one. */
export function collectDefaultMetrics(registry: Registry): void {
  promDefaults({ register: registry });
}
