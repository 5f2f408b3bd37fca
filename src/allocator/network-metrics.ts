// The address space of each persistent network as metrics, computed from the caches, no API read. At 3,000 VMs a
// computation takes a few milliseconds; done at every scrape (the benchmark scrapes once a second) that was a few per
// cent of a cold start's CPU, so the figures are computed every REFRESH_MS from the caches' first sync on (partial
// caches would show partial figures), and a scrape shows the last ones. The same pass logs what is wrong with a
// network's inputs, whether or not anyone scrapes. The label sets are per network and family, never per VM or claim,
// so the series stay few however many VMs run.

import type { Logger } from 'pino';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';
import { Gauge, type Registry } from '../telemetry/prom.ts';
import { type NetworkFigures, addressSpace } from './address-space.ts';

export interface NetworkMetricsInput {
  nads(): readonly NetworkAttachmentDefinition[];
  claims(): readonly IPAMClaim[];
}

export const REFRESH_MS = 10_000;

export interface NetworkMetrics {
  /** Once the caches have synced: compute now, then every REFRESH_MS until stop(). Before, scrapes show no series. */
  start(): void;
  stop(): void;
  /** Computes the figures afresh (what the timer does). */
  refresh(): void;
}

export function registerNetworkMetrics(registry: Registry, input: NetworkMetricsInput, log: Pick<Logger, 'warn'>): NetworkMetrics {
  let last: NetworkFigures[] = [];
  let timer: NodeJS.Timeout | undefined;
  const logged = new Set<string>();
  const figures = (): NetworkFigures[] => last;
  const refresh = (): void => {
    last = addressSpace(input.nads(), input.claims());
    logOnce(last, logged, log);
  };
  new Gauge({
    name: 'persistent_ips_network_addresses',
    help:
      'Addresses of each persistent network by family and state: capacity (what the IPAM may hand out; absent when unknown), ' +
      'held (recorded in IPAMClaims status.ips), free (capacity - held).',
    labelNames: ['network', 'family', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const f of figures()) {
        for (const [family, { capacity, held, free }] of Object.entries(f.families)) {
          this.set({ network: f.network, family, state: 'held' }, held);
          if (capacity !== undefined) this.set({ network: f.network, family, state: 'capacity' }, Number(capacity));
          if (free !== undefined) this.set({ network: f.network, family, state: 'free' }, Number(free));
        }
      }
    },
  });
  new Gauge({
    name: 'persistent_ips_network_claims',
    help: 'IPAMClaims of each persistent network by state: allocated, pending (no address yet), refused (by the IPAM, per reason).',
    labelNames: ['network', 'state', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const f of figures()) {
        this.set({ network: f.network, state: 'allocated', reason: '' }, f.claims.allocated);
        this.set({ network: f.network, state: 'pending', reason: '' }, f.claims.pending);
        for (const [reason, count] of Object.entries(f.claims.refused)) this.set({ network: f.network, state: 'refused', reason }, count);
      }
    },
  });
  return {
    refresh,
    start() {
      refresh();
      timer ??= setInterval(refresh, REFRESH_MS).unref();
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}

/** Each problem is logged when it first appears, not at every scrape; one that clears and comes back is logged again. */
function logOnce(figures: readonly NetworkFigures[], logged: Set<string>, log: Pick<Logger, 'warn'>): void {
  const current = new Set<string>();
  for (const f of figures) {
    for (const problem of f.problems) {
      const key = `${f.network}\n${problem}`;
      current.add(key);
      if (!logged.has(key)) log.warn({ network: f.network, nads: f.nads }, `address space of network ${f.network}: ${problem}`);
    }
  }
  logged.clear();
  for (const key of current) logged.add(key);
}
