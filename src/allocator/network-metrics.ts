// The address space of each persistent network as metrics, computed from the caches when scraped, no API read. At
// 3,000 VMs a computation takes a few milliseconds; scraped once a second (as the benchmark does) that was a few
// per cent of a cold start's CPU, so the figures are computed at most every REFRESH_MS and a scrape in between
// shows the last ones: Prometheus' usual 15-30 s interval sees fresh figures each time. The label sets are per
// network and family, never per VM or claim, so the series stay few however many VMs run.

import type { Logger } from 'pino';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';
import { Gauge, type Registry } from '../telemetry/prom.ts';
import { type NetworkFigures, addressSpace } from './address-space.ts';

export interface NetworkMetricsInput {
  nads(): readonly NetworkAttachmentDefinition[];
  claims(): readonly IPAMClaim[];
}

export const REFRESH_MS = 10_000;

export function registerNetworkMetrics(registry: Registry, input: NetworkMetricsInput, log: Pick<Logger, 'warn'>, now = Date.now): void {
  let last: { at: number; figures: NetworkFigures[] } | undefined;
  const logged = new Set<string>();
  const figures = (): NetworkFigures[] => {
    const at = now();
    if (last && at - last.at < REFRESH_MS) return last.figures;
    last = { at, figures: addressSpace(input.nads(), input.claims()) };
    logOnce(last.figures, logged, log);
    return last.figures;
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
