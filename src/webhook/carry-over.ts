// A reference, once on a running pod's element, is never taken away (spec §8). virt-controller rebuilds the whole
// networks annotation of a running launcher pod (hotplug, unplug, NAD swap) from the VMI spec, without our
// `ipam-claim-reference`; OVN-Kubernetes frees a pod's addresses at its deletion unless the pod's element still
// names a claim that holds them. So at UPDATE, what the old object referenced is carried over to the new one, as a
// pure function of the two objects: whatever the gate, the NADs or the caches say now, since any of them may have
// changed since the reference was written while the running VM keeps its address.
//
// Elements are matched by NAD (namespace/name) and interface; elements without an interface by their order among
// those of the same NAD. An element whose NAD changed under the same hashed interface name is the same attachment:
// KubeVirt names such an interface after the VM network, not the NAD, and rebuilds a running pod's annotation from
// the VMI spec, which after a NAD swap names the new NAD while the pod is still attached to the old network (the new
// network's claim is for the migration target, a CREATE). Dropping that reference would let the old claim, and the
// address the guest still has, be released. With a carried reference go the `ips` the old element had and the new
// one lacks (what the built-in allocator wrote at CREATE). What this function does not decide: an element new at
// this UPDATE, or an element that gains a reference its old self did not have. Those are `fresh`, for the caller to
// decide with CREATE's checks.

import { keyString } from '../kube/key.ts';
import { MULTUS_DEFAULT_NETWORK_ANNOTATION, MULTUS_NETWORKS_ANNOTATION, OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION } from '../claims/constants.ts';
import { isHashedPodInterfaceName } from '../claims/names.ts';
import { escapeJsonPointer, type JsonPatchOp } from '../kube/patch.ts';
import type { NetworkSelectionElement, Pod } from '../kube/types.ts';
import { elementNamespace, IPAM_CLAIM_REFERENCE, parseNetworkSelection, referenceOf, serializeNetworkSelection } from '../claims/network-selection.ts';

type CarriedAnnotation = typeof MULTUS_NETWORKS_ANNOTATION | typeof MULTUS_DEFAULT_NETWORK_ANNOTATION | typeof OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION;

export interface CarriedReference {
  annotation: CarriedAnnotation;
  /** `namespace/name[@interface]` of the element (the annotation's key for the legacy one). */
  element: string;
  claim: string;
}

export interface CarryOver {
  /** The new pod with every old reference in place: what the rest of the admission works on. */
  pod: Pod;
  /** Applied to the request's object, gives `pod`. Empty when nothing was dropped. */
  patch: JsonPatchOp[];
  carried: CarriedReference[];
  /** The UPDATE changes or removes a reference in a way that cannot be carried over: it must be refused. */
  refusals: string[];
  /**
   * Elements (index in the new networks annotation) that are new at this UPDATE, or that name a claim their old self
   * did not: what the caller decides afresh. The default-network element and the legacy annotation are only
   * decided at CREATE, so a reference new there is a refusal, not fresh.
   */
  fresh: number[];
}

const path = (annotation: string): string => `/metadata/annotations/${escapeJsonPointer(annotation)}`;

/**
 * `namespace/name@interface`, or `namespace/name#k` for the k-th element of that NAD without an interface; a repeat
 * of the same NAD and interface (invalid for Multus, but text anyone may write) is `…@interface#k`, so that no two
 * elements share an identity and no reference is copied onto a second element or lost to one.
 */
function identities(elements: readonly NetworkSelectionElement[], namespace: string): string[] {
  const seen = new Map<string, number>();
  return elements.map((element) => {
    const nad = keyString({ namespace: elementNamespace(element, namespace), name: element.name });
    const base = typeof element.interface === 'string' && element.interface !== '' ? `${nad}@${element.interface}` : nad;
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    if (base === nad) return `${nad}#${k}`;
    return k === 0 ? base : `${base}#${k}`;
  });
}

/**
 * The references of `oldPod` carried over to `newPod` (an UPDATE of a pod in `namespace`). Never removes a reference,
 * never writes one the old object did not have.
 */
export function carryOverReferences(oldPod: Pod | undefined, newPod: Pod, namespace: string): CarryOver {
  const result: CarryOver = { pod: newPod, patch: [], carried: [], refusals: [], fresh: [] };
  const oldAnnotations = oldPod?.metadata?.annotations ?? {};
  const newAnnotations = newPod.metadata?.annotations ?? {};
  const annotations: Record<string, string> = { ...newAnnotations };
  let changed = false;

  for (const annotation of [MULTUS_NETWORKS_ANNOTATION, MULTUS_DEFAULT_NETWORK_ANNOTATION] as const) {
    const oldSelection = parseNetworkSelection(oldAnnotations[annotation] ?? '');
    const oldElements = oldSelection.ok ? oldSelection.elements : [];
    const newText = newAnnotations[annotation];
    const newSelection = parseNetworkSelection(newText ?? '');
    const oldRefs = new Map<string, string>();
    identities(oldElements, namespace).forEach((id, i) => {
      const ref = referenceOf(oldElements[i]);
      if (ref !== undefined) oldRefs.set(id, ref);
    });
    const oldIndexOf = new Map(identities(oldElements, namespace).map((id, i) => [id, i]));
    const oldIds = new Set(oldIndexOf.keys());
    if (!newSelection.ok) {
      if (oldRefs.size > 0)
        result.refusals.push(
          `annotation ${annotation} cannot be read (${newSelection.error}), and the running pod's element${oldRefs.size > 1 ? 's name IPAMClaims' : ' names IPAMClaim'} ${[...oldRefs.values()].join(', ')}, which must not be lost`,
        );
      continue;
    }
    const elements = newSelection.elements.map((e) => ({ ...e }));
    const newIds = identities(elements, namespace);
    // Old elements gone from the new object, by interface: a new element on that interface under another NAD is them.
    const goneByInterface = new Map<string, string>();
    for (const [id, i] of oldIndexOf) {
      const iface = oldElements[i]?.interface;
      if (isHashedPodInterfaceName(iface) && !newIds.includes(id)) goneByInterface.set(iface, id);
    }
    let touched = false;
    newIds.forEach((id, i) => {
      const element = elements[i]!;
      let from: string | undefined = id;
      if (!oldIds.has(id) && typeof element.interface === 'string') {
        from = goneByInterface.get(element.interface);
        goneByInterface.delete(element.interface);
      }
      const had = from === undefined ? undefined : oldRefs.get(from);
      const has = referenceOf(element);
      if (had !== undefined && has === undefined) {
        element[IPAM_CLAIM_REFERENCE] = had;
        // The addresses the built-in allocator gave this pod at CREATE go with its reference: the pod still has
        // them, and its element is where static IPAM and anyone reading the pod find them.
        const oldIps = oldElements[oldIndexOf.get(from!)!]?.ips;
        if (element.ips === undefined && oldIps !== undefined) element.ips = [...oldIps];
        touched = true;
        result.carried.push({ annotation, element: id.replace(/#\d+$/, ''), claim: had });
      } else if (had !== undefined && has !== had) {
        result.refusals.push(
          `element ${i} (${id.replace(/#\d+$/, '')}) of ${annotation} would change its IPAMClaim reference from ${had} to ${has}; a running pod keeps the claim it started with`,
        );
      } else if (had === undefined && (has !== undefined || !oldIds.has(id))) {
        if (annotation === MULTUS_NETWORKS_ANNOTATION) result.fresh.push(i);
        else if (has !== undefined) result.refusals.push(`the ${annotation} element of a running pod cannot gain an IPAMClaim reference (${has})`);
      }
    });
    if (touched) {
      const value = serializeNetworkSelection(elements);
      annotations[annotation] = value;
      result.patch.push({ op: 'replace', path: path(annotation), value });
      changed = true;
    }
  }

  if (carryLegacy(oldAnnotations, newPod, result, annotations)) changed = true;

  if (changed) result.pod = { ...newPod, metadata: { ...newPod.metadata, annotations } } as Pod;
  return result;
}

/**
 * The primary network's claim in `k8s.ovn.org/primary-udn-ipamclaim`: carried over when the update drops it; a change
 * or a new one is refused (it is named at CREATE only). Writes into `result` and `annotations`; true when carried.
 */
function carryLegacy(oldAnnotations: Record<string, string>, newPod: Pod, result: CarryOver, annotations: Record<string, string>): boolean {
  const legacy = OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION;
  const had = oldAnnotations[legacy];
  const has = newPod.metadata?.annotations?.[legacy];
  if (typeof had === 'string' && had !== '') {
    if (has === undefined || has === '') {
      if (newPod.metadata?.annotations === undefined) result.patch.push({ op: 'add', path: '/metadata/annotations', value: {} });
      result.patch.push({ op: has === undefined ? 'add' : 'replace', path: path(legacy), value: had });
      annotations[legacy] = had;
      result.carried.push({ annotation: legacy, element: legacy, claim: had });
      return true;
    }
    if (has !== had) result.refusals.push(`annotation ${legacy} would change from ${had} to ${has}; a running pod keeps the claim it started with`);
  } else if (typeof has === 'string' && has !== '') {
    result.refusals.push(`a running pod cannot gain annotation ${legacy} (${has}); the primary network's claim is named at CREATE only`);
  }
  return false;
}
