// Owner references, read one way by every room: who controls an object (a VMI's VM, a pod's VMI), and which KubeVirt
// objects own a claim. A claim's owners decide whose addresses it holds, so the controller, the allocator and `status`
// must not disagree about them.
import { resources } from '../kube/resources.ts';
import type { IPAMClaim, KubeObject, OwnerReference } from '../kube/types.ts';

/** The owner reference of kind `kind` that is the object's controller. */
export function controllerRef(obj: KubeObject, kind: string): OwnerReference | undefined {
  return obj.metadata.ownerReferences?.find((ref) => ref.controller === true && ref.kind === kind);
}

const KUBEVIRT_GROUP = resources.virtualMachines.group;

/** A reference into KubeVirt's API group (any version): a `VirtualMachine` of another group is not KubeVirt's. */
export function isKubevirtRef(ref: OwnerReference): boolean {
  return typeof ref.apiVersion === 'string' && ref.apiVersion.startsWith(`${KUBEVIRT_GROUP}/`);
}

/** The claim's owner references to KubeVirt VMs and VMIs (group kubevirt.io), whatever their name. */
export function kubevirtOwnerRefs(claim: IPAMClaim): OwnerReference[] {
  return (claim.metadata.ownerReferences ?? []).filter((ref) => (ref.kind === 'VirtualMachine' || ref.kind === 'VirtualMachineInstance') && isKubevirtRef(ref));
}

/** The claim's KubeVirt owner: the controller reference among them, else the first. */
export function kubevirtOwner(claim: IPAMClaim): OwnerReference | undefined {
  const refs = kubevirtOwnerRefs(claim);
  return refs.find((ref) => ref.controller === true) ?? refs[0];
}
