// The pod side of the allocator: for a launcher pod being created, the addresses each allocator network of its VMI
// must carry in its network-selection element (`ips`, which static IPAM and other CNIs with the `ips` capability
// assign), or why the pod cannot be admitted yet.
//
// The decision (docs/allocator.md, "Pod admission"):
// - The claim holds addresses: the element gets exactly those.
// - The claim has none yet, or does not exist yet: DENY, with a message saying so. KubeVirt records FailedCreate and
//   retries the pod with backoff; the claim is made when the VM appears and its addresses follow within
//   milliseconds, so the retry succeeds. Admitting would start a VM with no address (static IPAM assigns none) or
//   with one its claim does not have; blocking the admission to wait would hold an API server request for a
//   condition we cannot bound, and the webhook answers within 3 s by design.
// - The claim was refused (requested address in use, pool exhausted, invalid request) or conflicts with another
//   claim: DENY with the claim's condition message. The retry succeeds once the cause is fixed.
// - The claim belongs to another object (a leftover of an earlier VM of the same name): DENY; its addresses are not
//   this VM's.
// - The NAD is OVN-Kubernetes' (the allocator refuses to serve it, nad.ts): nothing here; OVN-Kubernetes hands the pod
//   its claim's addresses.
// Reads are cache first; a claim the cache shows without addresses is read again from the API before a denial (the
// cache may simply not have caught up with the allocator's write).

import { persistentNetworks } from '../claims/decide.ts';
import { parseNadReference } from '../claims/nad-reference.ts';
import { controllerRef } from '../claims/owners.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachineInstance } from '../kube/types.ts';
import { isAllocatorNad, readAllocatorNad } from './nad.ts';
import { currentCondition } from './plan.ts';

export type PodAddresses =
  | { ips: string[] }
  /** Deny the pod; `message` says why and what happens next. */
  | { deny: string };

/** A claim read failed: the admission cannot be decided now (the webhook denies, KubeVirt retries). */
export class ClaimLookupError extends Error {
  override readonly name = 'ClaimLookupError';
  readonly object: { kind: string; namespace: string; name: string };
  constructor(object: { kind: string; namespace: string; name: string }, cause: unknown) {
    super(`cannot read ${object.kind} ${object.namespace}/${object.name}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.object = object;
  }
}

export interface PodAddressDeps {
  /** The allocator's NAD cache (it keeps the allocator annotations, which the shared cache drops). */
  allocatorNad(namespace: string, name: string): NetworkAttachmentDefinition | undefined;
  /** GET a NAD the allocator's cache has not seen yet; undefined for 404, throws on any other failure. */
  fetchNad?(namespace: string, name: string, signal: AbortSignal): Promise<NetworkAttachmentDefinition | undefined>;
  claims: { get(namespace: string | undefined, name: string): IPAMClaim | undefined };
  /** GET a claim; undefined for 404, throws on any other failure. */
  fetchClaim(namespace: string, name: string, signal: AbortSignal): Promise<IPAMClaim | undefined>;
}

/** Network (VMI network name) → addresses or denial, for the allocator networks of `vmi` only. */
export type PodAddressLookup = (
  namespace: string,
  vmi: VirtualMachineInstance,
  nads: ReadonlyMap<string, NetworkAttachmentDefinition>,
  signal: AbortSignal,
) => Promise<Map<string, PodAddresses>>;

export function createPodAddressLookup(deps: PodAddressDeps): PodAddressLookup {
  return async (namespace, vmi, nads, signal) => {
    const out = new Map<string, PodAddresses>();
    const verdicts = persistentNetworks({ namespace, name: vmi.metadata.name }, vmi.spec, nads, (name) => deps.claims.get(namespace, name));
    for (const verdict of verdicts) {
      if (!verdict.claimSpec) continue;
      const net = vmi.spec?.networks?.find((n) => n?.name === verdict.network);
      const ref = net?.multus ? parseNadReference(net.multus.networkName, namespace) : undefined;
      if (!ref) continue; // the primary network is not served by the allocator
      let nad = deps.allocatorNad(ref.namespace, ref.name);
      if (!nad) {
        // Not seen by the allocator's cache yet (a NAD created a moment ago). The NAD the caller has may come from a
        // cache that drops the allocator annotations: ask the API, so a pod never misses its addresses for that.
        const given = nads.get(`${ref.namespace}/${ref.name}`);
        if (isAllocatorNad(given) || !deps.fetchNad) nad = given;
        else {
          try {
            nad = await deps.fetchNad(ref.namespace, ref.name, signal);
          } catch (err) {
            throw new ClaimLookupError({ kind: 'NetworkAttachmentDefinition', namespace: ref.namespace, name: ref.name }, signal.aborted ? signal.reason : err);
          }
        }
      }
      if (!nad || !isAllocatorNad(nad)) continue;
      const read = readAllocatorNad(nad);
      // OVN-Kubernetes gives the pod its claim's addresses itself; `ips` from us would be a second source of them.
      if (read.refused !== undefined) continue;
      const poolProblems = read.problems;

      let claim = deps.claims.get(namespace, verdict.claim);
      if (!claim?.status?.ips?.length) {
        try {
          claim = await deps.fetchClaim(namespace, verdict.claim, signal);
        } catch (err) {
          throw new ClaimLookupError({ kind: 'IPAMClaim', namespace, name: verdict.claim }, signal.aborted ? signal.reason : err);
        }
      }
      const result = addressesOf(claim, `${namespace}/${verdict.claim}`, vmi, verdict.network);
      if ('deny' in result && poolProblems.length > 0 && !claim?.status?.ips?.length) {
        result.deny += `; NetworkAttachmentDefinition ${ref.namespace}/${ref.name} cannot be served: ${poolProblems.join('; ')}`;
      }
      out.set(verdict.network, result);
    }
    return out;
  };
}

/** What one claim means for the pod of `vmi` (pure). */
export function addressesOf(claim: IPAMClaim | undefined, key: string, vmi: VirtualMachineInstance, network: string): PodAddresses {
  const on = `network "${network}"`;
  if (!claim) {
    return { deny: `IPAMClaim ${key} for ${on} does not exist yet; it is created for the VM and gets its addresses moments later` };
  }
  if (!ownedByVmiOrItsVm(claim, vmi)) {
    const owners = (claim.metadata.ownerReferences ?? []).map((r) => `${r.kind} ${r.name} (uid ${r.uid})`).join(', ') || 'nobody';
    return { deny: `IPAMClaim ${key} for ${on} belongs to ${owners}, not to this VM; its addresses are not this VM's` };
  }
  const cond = currentCondition(claim);
  const ips = claim.status?.ips ?? [];
  if (cond?.status === 'False' && (cond.reason === 'IPAddressConflict' || ips.length === 0)) {
    return { deny: `IPAMClaim ${key} for ${on}: ${cond.reason}: ${cond.message ?? ''}`.trim() };
  }
  if (ips.length === 0) {
    return { deny: `IPAMClaim ${key} for ${on} has no address yet; the allocator records it moments after the claim is created` };
  }
  return { ips: [...ips] };
}

function ownedByVmiOrItsVm(claim: IPAMClaim, vmi: VirtualMachineInstance): boolean {
  const uids = new Set<string>();
  if (vmi.metadata.uid) uids.add(vmi.metadata.uid);
  const vmRef = controllerRef(vmi, 'VirtualMachine');
  if (vmRef?.uid) uids.add(vmRef.uid);
  return (claim.metadata.ownerReferences ?? []).some((r) => uids.has(r.uid));
}
