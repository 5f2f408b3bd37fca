// NAME: which of the names a network's claim may have is its name, given the claims that exist. The controller
// (decide) and the webhook (the launcher pod's claim reference) call claimNameFor with the same claims, and so agree.

import type { IPAMClaim } from '../kube/types.ts';
import { claimName, collisionClaimName, swapClaimName } from './names.ts';
import { kubevirtOwnerRefs } from './owners.ts';

/** The claims of the namespace by name, as far as the caller knows them. */
export type ClaimLookup = (name: string) => IPAMClaim | undefined;

/**
 * NAME: the claim name of one network of VM `vmName`. `<vm>.<network>` (claimName) unless that name is already
 * another VM's claim, which a dotted-name collision makes possible (VM `a` with network `b.c`, VM `a.b` with network
 * `c`): then collisionClaimName(), which is this VM's alone. The second VM of a collision thus gets its own claim
 * while every VM that does not collide keeps the name ipam-extensions gives it. Once a VM has its claim under the
 * collision name it keeps it, even after the other VM is gone, so its address never changes. "Another VM's" is read
 * from the KubeVirt owner references' NAMES: an earlier VM of the same name is not a collision (its claim is waited
 * for, EXISTING-OTHER-OWNER), and a claim with no KubeVirt owner is reported, not avoided (EXISTING-NOT-OWNED).
 * Controller and webhook call this with the same claims and get the same name.
 */
export function claimNameFor(vmName: string, network: string, lookup?: ClaimLookup, nadNetwork?: string): string {
  const plain = claimName(vmName, network);
  if (!lookup) return plain;
  const alternative = collisionClaimName(vmName, network);
  // SWAP: a claim of this VM already made for the network its NAD names now, under any of its names, is the one.
  if (nadNetwork !== undefined) {
    for (const name of claimNamesOf(vmName, network, nadNetwork)) {
      const claim = lookup(name);
      if (claim?.spec?.network === nadNetwork && kubevirtOwnerNames(claim).includes(vmName)) return name;
    }
  }
  if (alternative === plain) return plain;
  if (kubevirtOwnerNames(lookup(alternative)).includes(vmName)) return alternative;
  const holders = kubevirtOwnerNames(lookup(plain));
  return holders.length > 0 && !holders.includes(vmName) ? alternative : plain;
}

/** Every name the claim of `network` of VM `vmName` may have: plain, collision, and (with its NAD network) swap. */
export function claimNamesOf(vmName: string, network: string, nadNetwork?: string): string[] {
  const names = [claimName(vmName, network), collisionClaimName(vmName, network)];
  if (nadNetwork !== undefined) names.push(swapClaimName(vmName, network, nadNetwork));
  return [...new Set(names)];
}

function kubevirtOwnerNames(claim: IPAMClaim | undefined): string[] {
  return claim ? kubevirtOwnerRefs(claim).map((ref) => ref.name) : [];
}
