// prom-client, loaded by the modules this project uses. `import … from 'prom-client'` runs its index, which loads
// every default-metric collector and the Pushgateway client at once; the CPU collector alone loads
// @opentelemetry/api (for exemplars, which nothing here uses). Together that was about 6.7 MiB of resident memory
// in every controller process, measured by importing both ways (docs/benchmarks, round 4). The package has no
// exports map, its lib/ files are plain CommonJS modules with stable names across 15.x, and the types still come
// from 'prom-client' (erased at build time, so they load nothing). Every metric keeps prom-client's own name, help
// and behaviour: the collectors are prom-client's, except the three CPU counters, which are re-made below without
// the exemplar path.
//
// The files are imported statically (a CommonJS module's default export is its module.exports), so that the build
// bundles them like every other dependency and the image needs no node_modules at all.

import type * as Prom from 'prom-client';
import registryModule from 'prom-client/lib/registry.js';
import counterModule from 'prom-client/lib/counter.js';
import gaugeModule from 'prom-client/lib/gauge.js';
import histogramModule from 'prom-client/lib/histogram.js';
import processStartTime from 'prom-client/lib/metrics/processStartTime.js';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap.js';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors.js';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors.js';
import eventLoopLag from 'prom-client/lib/metrics/eventLoopLag.js';
import processResources from 'prom-client/lib/metrics/processResources.js';
import processHandles from 'prom-client/lib/metrics/processHandles.js';
import processRequests from 'prom-client/lib/metrics/processRequests.js';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed.js';
import heapSpacesSizeAndUsed from 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js';
import version from 'prom-client/lib/metrics/version.js';
import gc from 'prom-client/lib/metrics/gc.js';

export const Registry = registryModule as typeof Prom.Registry;
export type Registry = Prom.Registry;
export const Counter = counterModule as typeof Prom.Counter;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge = gaugeModule as typeof Prom.Gauge;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram = histogramModule as typeof Prom.Histogram;
export type Histogram<T extends string = string> = Prom.Histogram<T>;

type Collector = (registry: Registry, config: { eventLoopMonitoringPrecision: number }) => void;

/** prom-client's default collectors, in its own order, without processCpuTotal (see processCpu). */
const DEFAULT_COLLECTORS = [
  processStartTime,
  osMemoryHeap,
  processOpenFileDescriptors,
  processMaxFileDescriptors,
  eventLoopLag,
  processResources,
  processHandles,
  processRequests,
  heapSizeAndUsed,
  heapSpacesSizeAndUsed,
  version,
  gc,
] as Collector[];

/** What prom-client's collectDefaultMetrics({ register }) registers: the same metric names and help texts. */
export function collectDefaultMetrics(registry: Registry): void {
  processCpu(registry);
  for (const collect of DEFAULT_COLLECTORS) collect(registry, { eventLoopMonitoringPrecision: 10 });
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
