// prom-client, loaded by the modules this project uses. `import … from 'prom-client'` runs its index, which loads
// every default-metric collector and the Pushgateway client at once; the CPU collector alone loads
// @opentelemetry/api (for exemplars, which nothing here uses). Together that was about 6.7 MiB of resident memory
// in every controller process, measured by importing both ways (docs/benchmarks, round 4). The package has no
// exports map, its lib/ files are plain CommonJS modules with stable names across 15.x, and the types still come
// from 'prom-client' (erased at build time, so they load nothing). Every metric keeps prom-client's own name, help
// and behaviour: the collectors are prom-client's, except the three CPU counters, which are re-made below without
// the exemplar path.

import { createRequire } from 'node:module';
import type * as Prom from 'prom-client';

const load = createRequire(import.meta.url);

export const Registry: typeof Prom.Registry = load('prom-client/lib/registry.js');
export type Registry = Prom.Registry;
export const Counter: typeof Prom.Counter = load('prom-client/lib/counter.js');
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge: typeof Prom.Gauge = load('prom-client/lib/gauge.js');
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram: typeof Prom.Histogram = load('prom-client/lib/histogram.js');
export type Histogram<T extends string = string> = Prom.Histogram<T>;

type Collector = (registry: Registry, config: { eventLoopMonitoringPrecision: number }) => void;

/** prom-client's default collectors, in its own order, without processCpuTotal (see processCpu). */
const DEFAULT_COLLECTORS = [
  'processStartTime',
  'osMemoryHeap',
  'processOpenFileDescriptors',
  'processMaxFileDescriptors',
  'eventLoopLag',
  'processResources',
  'processHandles',
  'processRequests',
  'heapSizeAndUsed',
  'heapSpacesSizeAndUsed',
  'version',
  'gc',
] as const;

/** What prom-client's collectDefaultMetrics({ register }) registers: the same metric names and help texts. */
export function collectDefaultMetrics(registry: Registry): void {
  processCpu(registry);
  for (const name of DEFAULT_COLLECTORS) {
    (load(`prom-client/lib/metrics/${name}.js`) as Collector)(registry, { eventLoopMonitoringPrecision: 10 });
  }
}

/** process_cpu_{user,system}_seconds_total and process_cpu_seconds_total, as prom-client counts them. */
function processCpu(registry: Registry): void {
  let last = process.cpuUsage();
  const system = new Counter({ name: 'process_cpu_system_seconds_total', help: 'Total system CPU time spent in seconds.', registers: [] });
  const total = new Counter({ name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', registers: [] });
  // One collect() brings all three up to date, as in prom-client; registered first so it runs before the others
  // are read.
  registry.registerMetric(
    new Counter({
      name: 'process_cpu_user_seconds_total',
      help: 'Total user CPU time spent in seconds.',
      registers: [],
      collect() {
        const now = process.cpuUsage();
        const user = now.user - last.user;
        const sys = now.system - last.system;
        last = now;
        this.inc(user / 1e6);
        system.inc(sys / 1e6);
        total.inc((user + sys) / 1e6);
      },
    }),
  );
  registry.registerMetric(system);
  registry.registerMetric(total);
}
