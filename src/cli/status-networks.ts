// `persistent-ips status --networks`: one line per persistent network with its address space (the figures of
// allocator/address-space.ts, the same the controller exports as metrics), then the notes that explain a line:
// why a capacity is unknown, what is wrong with the inputs, which claims the IPAM refused and why.

import { type NetworkFigures, addressSpace } from '../allocator/address-space.ts';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';
import { textTable } from './table.ts';

const OVN_HELD_NOTE =
  'held counts the addresses recorded in IPAMClaims; on OVN-Kubernetes, pods on the network that name no claim hold addresses too, so free is at most what is shown';

/** The networks a namespace uses (a NAD of the network lives there), or all of them. */
export function networksOf(nads: readonly NetworkAttachmentDefinition[], claims: readonly IPAMClaim[], namespace: string | undefined): NetworkFigures[] {
  const all = addressSpace(nads, claims);
  return namespace === undefined ? all : all.filter((f) => f.nads.some((key) => key.startsWith(`${namespace}/`)));
}

/** Figures of every family, one cell: "6" for one family, "ipv4 6, ipv6 7" for two; "?" when unknown. */
function perFamily(f: NetworkFigures, pick: (family: NonNullable<NetworkFigures['families']['ipv4']>) => bigint | number | undefined, none = '?'): string {
  const entries = Object.entries(f.families);
  if (entries.length === 0) return none;
  const cell = ([family, figures]: (typeof entries)[number]) => {
    const value = pick(figures);
    return `${entries.length > 1 ? `${family} ` : ''}${value === undefined ? '?' : String(value)}`;
  };
  return entries.map(cell).join(', ');
}

export function renderNetworks(figures: readonly NetworkFigures[], notes: readonly string[] = []): string {
  if (figures.length === 0) return 'No network that allows persistent IPs found.\n';
  const headers = ['NETWORK', 'IPAM', 'NADS', 'SUBNETS', 'CAPACITY', 'HELD', 'FREE', 'PENDING', 'REFUSED'];
  const below: string[] = [];
  const lines = figures.map((f) => {
    const refused = Object.entries(f.claims.refused)
      .map(([reason, n]) => `${n} ${reason}`)
      .join(', ');
    const explain = [
      ...(f.unknownBecause && !f.problems.includes(f.unknownBecause) ? [`capacity unknown: ${f.unknownBecause}`] : []),
      ...f.problems,
      ...f.refusedClaims.map((r) => `IPAMClaim ${r.claim} refused (${r.reason}): ${r.message}`),
    ];
    let network = f.network;
    if (explain.length > 0) {
      network = `${network} [${below.length + 1}]`;
      below.push(...explain.map((text) => `[${below.length + 1}] ${f.network}: ${text}`));
    }
    return [
      network,
      f.ipam,
      f.nads.join(','),
      f.subnets.join(',') || '-',
      perFamily(f, (x) => x.capacity),
      perFamily(f, (x) => x.held, '0'),
      perFamily(f, (x) => x.free),
      String(f.claims.pending),
      refused || '0',
    ];
  });
  const ovn = figures.some((f) => f.ipam === 'ovn-kubernetes') ? [OVN_HELD_NOTE] : [];
  const footer = [...below, ...[...notes, ...ovn].map((n) => `Note: ${n}`)];
  return textTable(headers, lines, footer);
}

/** Capacity and free as strings: an IPv6 /64 holds more addresses than a JSON number can say exactly. */
export function renderNetworksJson(figures: readonly NetworkFigures[], notes: readonly string[] = []): string {
  const items = figures.map((f) => ({
    ...f,
    families: Object.fromEntries(
      Object.entries(f.families).map(([family, x]) => [
        family,
        { ...(x.capacity !== undefined ? { capacity: String(x.capacity) } : {}), held: x.held, ...(x.free !== undefined ? { free: String(x.free) } : {}) },
      ]),
    ),
  }));
  return `${JSON.stringify({ apiVersion: 'persistent-ips.kubevirt.io/v1', kind: 'NetworkList', notes, items }, null, 2)}\n`;
}
