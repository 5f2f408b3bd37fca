// Which addresses a claim's owner asks for: the `network.kubevirt.io/addresses` annotation (interface name → list of
// addresses) of the VMI, or, while the VM has no VMI yet, of the VM's template (KubeVirt copies template
// annotations to the VMI). Claims are made as soon as a VM exists, so the VM template is usually what the allocator
// reads: the request must be known before the first address is chosen, because a claim's addresses never change.
//
// Pure over read-only caches.

import { claimName, collisionClaimName, podInterfaceName, PRIMARY_POD_INTERFACE } from '../claims/names.ts';
import { controllerRef, kubevirtOwner } from '../claims/owners.ts';
import type { IPAMClaim, VirtualMachine, VirtualMachineInstance, VmiSpecLike, VmNetwork } from '../kube/types.ts';
import { ADDRESSES_ANNOTATION } from '../claims/constants.ts';
import { parseAddressesAnnotation } from '../claims/addresses-annotation.ts';

export interface ReadCache<T> {
  get(namespace: string | undefined, name: string): T | undefined;
}

/** The object Events about a claim go on: its owner VM (or standalone VMI). */
export interface OwnerTarget {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid: string;
}

export type OwnerRequest =
  /** No request: any free address. */
  | { kind: 'none' }
  | { kind: 'addresses'; addresses: string[] }
  /** The owner asked for something unreadable for this interface: report, and allocate nothing. */
  | { kind: 'invalid'; message: string }
  /** The owner named by the claim is not in the cache yet: decide later (its add event brings the claim back). */
  | { kind: 'wait'; message: string }
  /** The owner is another incarnation or terminating: the claim is on its way out; allocate nothing. */
  | { kind: 'gone'; message: string };

export interface OwnerLookup {
  request: OwnerRequest;
  owner?: OwnerTarget;
  /** The logical network (VM network `name`) of the claim, when found. */
  network?: string;
  /** The owner's own VMI, when there is one: the owning VMI, or the VMI the owning VM controls. */
  vmi?: VirtualMachineInstance;
}

/** The VM network of `spec` the claim belongs to: same claim name, or same pod interface. */
export function networkOfClaim(claim: IPAMClaim, vmName: string, spec: VmiSpecLike | undefined): string | undefined {
  const nets = (spec?.networks ?? []).filter((net) => net && typeof net.name === 'string');
  const named = nets.find((net) => claimName(vmName, net.name) === claim.metadata.name || collisionClaimName(vmName, net.name) === claim.metadata.name);
  const iface = claim.spec?.interface;
  const podInterface = (net: VmNetwork) => (net.pod !== undefined || net.multus?.default === true ? PRIMARY_POD_INTERFACE : podInterfaceName(net.name));
  return (named ?? (iface ? nets.find((net) => podInterface(net) === iface) : undefined))?.name;
}

/** What the claim's owner asks for, and who to tell about it. */
export function ownerRequest(claim: IPAMClaim, vms: ReadCache<VirtualMachine>, vmis: ReadCache<VirtualMachineInstance>): OwnerLookup {
  const ref = kubevirtOwner(claim);
  if (!ref) return { request: { kind: 'none' } };
  const namespace = claim.metadata.namespace ?? '';
  const owner: OwnerTarget = { apiVersion: ref.apiVersion, kind: ref.kind, namespace, name: ref.name, uid: ref.uid };
  // Messages name the owner, not where the annotation was read (VM template, then VMI): they must not change when the
  // VMI appears, or a lasting refusal would be written and reported again.
  const what = `${ref.kind} ${namespace}/${ref.name}`;
  const vm = ref.kind === 'VirtualMachine' ? vms.get(namespace, ref.name) : undefined;
  const vmi = vmis.get(namespace, ref.name);
  const self = ref.kind === 'VirtualMachine' ? vm : vmi;
  if (!self) return { owner, request: { kind: 'wait', message: `${what} is not known yet` } };
  if (self.metadata.uid !== ref.uid) return { owner, request: { kind: 'gone', message: `${what} (uid ${ref.uid}) no longer exists` } };
  if (vm?.metadata.deletionTimestamp) return { owner, request: { kind: 'gone', message: `${what} is being deleted` } };
  // A VM's own VMI, once there, says what the VM runs with; before it, the VM's template.
  const fromVmi = vmi !== undefined && (vm === undefined || controllerRef(vmi, 'VirtualMachine')?.uid === vm.metadata.uid);
  const annotations = fromVmi ? vmi.metadata.annotations : vm?.spec?.template?.metadata?.annotations;
  const spec: VmiSpecLike | undefined = fromVmi ? vmi.spec : vm?.spec?.template?.spec;

  const network = networkOfClaim(claim, ref.name, spec);
  const base: OwnerLookup = { owner, request: { kind: 'none' }, ...(network !== undefined ? { network } : {}), ...(fromVmi ? { vmi } : {}) };
  const value = annotations?.[ADDRESSES_ANNOTATION];
  if (value === undefined || network === undefined) return base;
  const parsed = parseAddressesAnnotation(value);
  const mine = parsed.problems.find((p) => p.interface === network);
  if (mine) return { ...base, request: { kind: 'invalid', message: `${mine.message} (${what})` } };
  const requested = parsed.requests.get(network);
  if (requested) return { ...base, request: { kind: 'addresses', addresses: [...requested] } };
  // A document that cannot be read at all may well have meant this interface too: wait for the user to fix it.
  const whole = parsed.problems.filter((p) => p.interface === undefined);
  if (whole.length > 0 && parsed.requests.size === 0) {
    return { ...base, request: { kind: 'invalid', message: `${whole.map((p) => p.message).join('; ')} (${what})` } };
  }
  return base;
}
