// Small facts about objects, read the same way by every rule of decide.ts and the modules it uses.

import type { IPAMClaim, KubeObject, VmiSpecLike } from '../kube/types.ts';
import { CLAIM_FINALIZER } from './constants.ts';

export function isTerminating(obj: KubeObject): boolean {
  return !!obj.metadata.deletionTimestamp;
}

export function hasFinalizer(claim: IPAMClaim): boolean {
  return claim.metadata.finalizers?.includes(CLAIM_FINALIZER) ?? false;
}

export function isOwnedBy(claim: IPAMClaim, uid: string): boolean {
  return (claim.metadata.ownerReferences ?? []).some((ref) => ref.uid === uid);
}

export function isAbsent(spec: VmiSpecLike | undefined, network: string): boolean {
  return spec?.domain?.devices?.interfaces?.find((iface) => iface?.name === network)?.state === 'absent';
}
