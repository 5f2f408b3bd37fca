// "In use", which UNPLUG, KEEP-NOT-PERSISTENT, FINALIZER-DELETED-UNUSED and ORPHAN (decide.ts) ask of a claim: does
// it belong to a network of a VM template or of a VMI spec.

import type { IPAMClaim, VmiSpecLike, VmNetwork } from '../kube/types.ts';
import { effectiveVmiSpec } from './effective-spec.ts';
import { isAbsent } from './facts.ts';
import { claimName, collisionClaimName, podInterfaceName, PRIMARY_POD_INTERFACE, referenceClaimName, swapClaimName } from './names.ts';

export interface Usage {
  vmName: string;
  networks: readonly VmNetwork[];
  /** Worked out by identitiesOf() when a claim is first judged against this usage. */
  identities?: UsageIdentities;
}

interface UsageIdentities {
  networks: Set<string>;
  claimNames: Set<string>;
  interfaces: Set<string>;
}

/**
 * The networks of a VM template (skipping absent interfaces) or of a VMI spec (all of them: an unplug in progress
 * keeps the network there until the interface is gone).
 */
export function* networksOf(spec: VmiSpecLike | undefined, includeAbsent: boolean): Generator<VmNetwork> {
  spec = effectiveVmiSpec(spec);
  for (const net of spec?.networks ?? []) {
    if (!net || typeof net.name !== 'string') continue;
    if (includeAbsent || !isAbsent(spec, net.name)) yield net;
  }
}

/**
 * What identifies the claim of each network: its claim name, the name kubevirt/ipam-extensions gave it (claims
 * adopted after a switch from the reference implementation keep the reference's name), and its pod interface.
 * Worked out once per decision, and only when there is a claim to judge: a VM without claims (every VM of a cold
 * start) would otherwise hash names it never compares.
 */
function identitiesOf(usage: Usage): UsageIdentities {
  if (usage.identities) return usage.identities;
  const ids: UsageIdentities = { networks: new Set(), claimNames: new Set(), interfaces: new Set() };
  for (const net of usage.networks) {
    ids.networks.add(net.name);
    ids.claimNames.add(claimName(usage.vmName, net.name));
    ids.claimNames.add(collisionClaimName(usage.vmName, net.name));
    ids.claimNames.add(referenceClaimName(usage.vmName, net.name));
    ids.interfaces.add(net.pod || net.multus?.default ? PRIMARY_POD_INTERFACE : podInterfaceName(net.name));
  }
  usage.identities = ids;
  return ids;
}

/**
 * By name (any name this VM gives or gave the claim of a network it has), or by pod interface, which for a secondary
 * network is a hash of the network's name and so identifies it whatever the claim is called. `eth0` identifies no
 * network (every pod network is on eth0): an eth0 claim is in use only under a name this VM produces for a pod
 * network it has, so a renamed pod network's old claim is not kept for the VM's whole life.
 */
export function isUsed(claim: IPAMClaim, usage: Usage): boolean {
  const ids = identitiesOf(usage);
  const iface = claim.spec?.interface;
  if (ids.claimNames.has(claim.metadata.name)) return true;
  // A swap name (SWAP) carries the claim's own NAD network in its hash: recognised from the claim itself.
  const nadNetwork = claim.spec?.network;
  if (typeof nadNetwork === 'string' && [...ids.networks].some((net) => swapClaimName(usage.vmName, net, nadNetwork) === claim.metadata.name)) return true;
  return !!iface && iface !== PRIMARY_POD_INTERFACE && ids.interfaces.has(iface);
}
