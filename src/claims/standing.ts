// Whether a launcher pod may be pointed at a claim. OVN-Kubernetes hands a pod exactly the addresses of the claim its
// `ipam-claim-reference` names, whoever owns that claim, and frees them when that claim goes: a reference to a claim
// of another VM (or of an earlier VM of the same name, or one being deleted) is a duplicate address. So a reference
// is written only to a claim that is, by uid, the pod's VMI's or its controlling VM's, and is not being deleted.
// Everything else is a denial the webhook answers with a retriable reason (KubeVirt retries the pod).

import type { IPAMClaim, VirtualMachineInstance } from '../kube/types.ts';
import { controllerRef } from './owners.ts';

/** The uids a claim of this VMI's pods may be owned by: the VMI itself (standalone) and its controlling VM. */
export interface ClaimOwnerUids {
  vmiUid?: string;
  vmUid?: string;
  /** For messages and Events: the VM (or standalone VMI) name. */
  name: string;
}

export type ClaimStandingReason =
  | 'ClaimNotFound'
  | 'ClaimTerminating'
  | 'ClaimOwnedByAnotherObject'
  | 'ClaimNotOwned'
  | 'ClaimNetworkMismatch'
  /** The pod already names another claim than the VM's (written by someone else): not vouched for, so refused. */
  | 'ForeignClaimReference';

export type ClaimStanding = { usable: true } | { usable: false; reason: ClaimStandingReason; message: string };

const denied = (reason: ClaimStandingReason, message: string): ClaimStanding => ({ usable: false, reason, message });

export function ownerUidsOf(vmi: VirtualMachineInstance): ClaimOwnerUids {
  const vmRef = controllerRef(vmi, 'VirtualMachine');
  return {
    name: vmi.metadata.name,
    ...(vmi.metadata.uid ? { vmiUid: vmi.metadata.uid } : {}),
    ...(vmRef?.uid ? { vmUid: vmRef.uid } : {}),
  };
}

/**
 * Pure. `expectedNetwork`: the `spec.network` the claim must carry for the NAD the VMI now names; a claim left from
 * another NAD would have OVN-K allocate (or fail to) on the wrong network. Messages carry no resourceVersion or
 * time, so that the Event a repeated denial produces is recognised as the same one.
 */
export function claimStanding(claim: IPAMClaim | undefined, name: string, owners: ClaimOwnerUids, expectedNetwork?: string): ClaimStanding {
  if (!claim) {
    return denied(
      'ClaimNotFound',
      `IPAMClaim ${name} does not exist yet; the controller creates it for ${owners.name}, and the launcher pod is admitted on KubeVirt's retry once it does`,
    );
  }
  const refs = claim.metadata.ownerReferences ?? [];
  const mine = refs.some((ref) => !!ref.uid && (ref.uid === owners.vmUid || ref.uid === owners.vmiUid));
  if (!mine) {
    if (refs.length === 0) {
      return denied(
        'ClaimNotOwned',
        `IPAMClaim ${name} has no owner; its addresses are not ${owners.name}'s (delete it, or give it an ownerReference to the VM)`,
      );
    }
    const others = refs.map((ref) => `${ref.kind} ${ref.name} (uid ${ref.uid})`).join(', ');
    return denied(
      'ClaimOwnedByAnotherObject',
      `IPAMClaim ${name} belongs to ${others}, not to ${owners.name} (uid ${owners.vmUid ?? owners.vmiUid ?? 'unknown'}); the launcher pod waits until ${owners.name}'s own claim exists`,
    );
  }
  if (claim.metadata.deletionTimestamp) {
    return denied('ClaimTerminating', `IPAMClaim ${name} is being deleted; the launcher pod waits until it is gone and created anew`);
  }
  if (expectedNetwork !== undefined && claim.spec?.network !== expectedNetwork) {
    return denied(
      'ClaimNetworkMismatch',
      `IPAMClaim ${name} is for network "${claim.spec?.network ?? ''}", but the VM's NAD is now network "${expectedNetwork}"; it is replaced once no VMI uses it`,
    );
  }
  return { usable: true };
}
