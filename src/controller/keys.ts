// Which reconcile keys (`namespace/vmName`) an event on each kind concerns. A VMI has its VM's name, and a claim
// names its VM or VMI as owner (and in its label), so every kind maps to keys without scanning; NADs go through the
// informers' indexes.

import { keyString } from '../kube/key.ts';
import { VM_LABEL } from '../claims/constants.ts';
import { kubevirtOwnerRefs, parseNadConfig } from '../claims/index.ts';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';

/** Claims concern the VM/VMI they are owned by (any incarnation) and the VM their label names. */
export function keysOfClaim(claim: IPAMClaim): string[] {
  const ns = claim.metadata.namespace;
  const out = new Set<string>();
  for (const ref of kubevirtOwnerRefs(claim)) out.add(keyString({ namespace: ns, name: ref.name }));
  const vm = claim.metadata.labels?.[VM_LABEL];
  if (vm) out.add(keyString({ namespace: ns, name: vm }));
  return [...out];
}

export interface NadKeyLookup {
  /** Keys of VMs and VMIs that reference the NAD `namespace/name`. */
  referencing(nadKey: string): Iterable<string>;
  /** Keys of every VM and VMI in a namespace. */
  inNamespace(namespace: string): Iterable<string>;
}

/**
 * Keys a NAD change concerns: what references it, and, if it is (or was) a primary network, its whole namespace (a
 * primary user-defined network is used by every `pod: {}` network there).
 */
export function keysOfNadChange(current: NetworkAttachmentDefinition, old: NetworkAttachmentDefinition | undefined, lookup: NadKeyLookup): Set<string> {
  const isPrimaryNad = (nad: NetworkAttachmentDefinition | undefined) => nad !== undefined && parseNadConfig(nad).role === 'primary';
  const out = new Set(lookup.referencing(keyString(current.metadata)));
  if (isPrimaryNad(current) || isPrimaryNad(old)) {
    for (const key of lookup.inNamespace(current.metadata.namespace ?? '')) out.add(key);
  }
  return out;
}
