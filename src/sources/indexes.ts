// Every index of the shared caches: its name, what it maps an object to, and its registration, in one place, so a
// newcomer finds what a cache can be asked and by whom (the idea of cluster-api-ipam-provider-in-cluster's
// internal/index). Values are namespaced (`namespace/name`) wherever a name alone would be ambiguous across
// namespaces. Every index costs memory per object and work per event: add one only for a lookup a loop makes.

import { VM_LABEL } from '../claims/constants.ts';
import { parseNadConfig } from '../claims/nad-config.ts';
import { parseNadReference } from '../claims/nad-reference.ts';
import { resources } from '../kube/resources.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachine, VirtualMachineInstance, VmiSpecLike } from '../kube/types.ts';
import { keyString } from '../kube/key.ts';
import type { IndexFn } from './store.ts';

/** Claims by the VM named in their `kubevirt.io/vm` label: value `namespace/vmName`. */
export const CLAIMS_BY_VM = 'claimsByVm';
/** Claims by the uid of each owner reference: value `uid`. */
export const CLAIMS_BY_OWNER_UID = 'claimsByOwnerUid';
/**
 * Claims by the VM/VMI names in their owner references: value `namespace/ownerName`. The claims loop gathers a key's
 * claims by it; the allocator finds the networks a VM or VMI event concerns by it.
 */
export const CLAIMS_BY_OWNER_NAME = 'claimsByOwnerName';
/** VMs by the NADs their template references: value `namespace/nadName`. */
export const VMS_BY_NAD = 'vmsByNad';
/** VMIs by the NADs their spec references: value `namespace/nadName`. */
export const VMIS_BY_NAD = 'vmisByNad';
/** NADs by the network name of their CNI config (allocator only). */
export const NADS_BY_NETWORK = 'allocator.nadsByNetwork';
/** Claims by `spec.network` (allocator only). */
export const CLAIMS_BY_NETWORK = 'allocator.claimsByNetwork';

const ownerKinds = new Set<string>([resources.virtualMachines.kind, resources.virtualMachineInstances.kind]);

export const claimsByVm = (c: IPAMClaim): string[] => {
  const vm = c.metadata.labels?.[VM_LABEL];
  return vm ? [keyString({ namespace: c.metadata.namespace, name: vm })] : [];
};

export const claimsByOwnerUid = (c: IPAMClaim): string[] => (c.metadata.ownerReferences ?? []).map((o) => o.uid);

export const claimsByOwnerName = (c: IPAMClaim): string[] =>
  (c.metadata.ownerReferences ?? []).filter((r) => ownerKinds.has(r.kind)).map((r) => keyString({ namespace: c.metadata.namespace, name: r.name }));

/**
 * `networkName` is `name` (the object's namespace) or `namespace/name`. Whatever cannot be a reference is skipped
 * here; reporting it is the controller's business.
 */
export function nadKeysOf(namespace: string | undefined, spec: VmiSpecLike | undefined): string[] {
  const out = new Set<string>();
  for (const net of spec?.networks ?? []) {
    const ref = parseNadReference(net.multus?.networkName, namespace);
    if (ref) out.add(keyString(ref));
  }
  return [...out];
}

export const vmsByNad = (vm: VirtualMachine): string[] => nadKeysOf(vm.metadata.namespace, vm.spec?.template?.spec);
export const vmisByNad = (vmi: VirtualMachineInstance): string[] => nadKeysOf(vmi.metadata.namespace, vmi.spec);

export const nadNetwork = (nad: NetworkAttachmentDefinition): string[] => {
  const name = parseNadConfig(nad).networkName;
  return name === undefined ? [] : [name];
};

export const claimNetwork = (claim: IPAMClaim): string[] => (claim.spec?.network ? [claim.spec.network] : []);

interface Indexable<T> {
  addIndex(name: string, fn: IndexFn<T>): void;
}

export interface IndexedCaches {
  vms: Indexable<VirtualMachine>;
  vmis: Indexable<VirtualMachineInstance>;
  nads: Indexable<NetworkAttachmentDefinition>;
  claims: Indexable<IPAMClaim>;
}

/**
 * Registers the indexes of `set` on the caches given (a test may give only the caches it uses): `shared`, what the
 * claims loop and the webhook need, when the caches are made; `allocator`, only when the allocator runs.
 */
export function registerIndexes(caches: Partial<IndexedCaches>, set: 'shared' | 'allocator'): void {
  if (set === 'allocator') {
    caches.nads?.addIndex(NADS_BY_NETWORK, nadNetwork);
    caches.claims?.addIndex(CLAIMS_BY_NETWORK, claimNetwork);
    return;
  }
  caches.vms?.addIndex(VMS_BY_NAD, vmsByNad);
  caches.vmis?.addIndex(VMIS_BY_NAD, vmisByNad);
  caches.claims?.addIndex(CLAIMS_BY_VM, claimsByVm);
  caches.claims?.addIndex(CLAIMS_BY_OWNER_UID, claimsByOwnerUid);
  caches.claims?.addIndex(CLAIMS_BY_OWNER_NAME, claimsByOwnerName);
}
