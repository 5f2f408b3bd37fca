// The allocator's own metrics, registered next to the controller's: how full each pool is, how many addresses are
// held twice, and what the allocator wrote. Networks are few (one per pool), so the `network` label stays small.

import { Counter, Gauge, type Registry } from '../telemetry/prom.ts';
import type { AllocatorStats } from './allocator.ts';

export interface AllocatorMetrics {
  /** After a pass: the pool's state. */
  observe(network: string, stats: AllocatorStats): void;
  /** A status written, by its condition reason (SuccessfulAllocation, SubnetExhausted, ...). */
  written(network: string, reason: string): void;
  /** The network is no longer served: drop its series. */
  forget(network: string): void;
}

export function createAllocatorMetrics(registry: Registry): AllocatorMetrics {
  const registers = [registry];
  const addresses = new Gauge({
    name: 'persistent_ips_allocator_addresses',
    help: 'Addresses of each allocator pool by family and state (used: held by a claim; free: may be handed out).',
    labelNames: ['network', 'family', 'state'],
    registers,
  });
  const conflicts = new Gauge({
    name: 'persistent_ips_allocator_conflicting_addresses',
    help: 'Addresses held by more than one claim of the network (each reported as IPAddressConflict).',
    labelNames: ['network'],
    registers,
  });
  const writes = new Counter({
    name: 'persistent_ips_allocator_status_writes_total',
    help: 'IPAMClaim statuses written by the allocator, by the reason of the IPsAllocated condition written.',
    labelNames: ['network', 'reason'],
    registers,
  });
  return {
    observe(network, stats) {
      for (const f of stats.families) {
        addresses.set({ network, family: `ipv${f.family}`, state: 'used' }, Number(f.used));
        addresses.set({ network, family: `ipv${f.family}`, state: 'free' }, Number(f.free));
      }
      conflicts.set({ network }, stats.conflicts);
    },
    written(network, reason) {
      writes.inc({ network, reason });
    },
    forget(network) {
      // Removing a series that was never set is a no-op: every family's go.
      for (const family of ['ipv4', 'ipv6']) for (const state of ['used', 'free']) addresses.remove({ network, family, state });
      conflicts.remove({ network });
    },
  };
}
