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
// The claim is the one the webhook points the element at (its name chosen among the claims the webhook resolved,
// by the same rule as the mutation's): the pod's `ips` and its `ipam-claim-reference` always name one claim. A claim
// shown without addresses is read again from the API, and taken only if it is still the same claim by uid (the
// allocator's write may simply not have been seen yet).

import { keyString } from '../kube/key.ts';
import type { NetworkVerdict } from '../claims/decide.ts';
import { parseNadReference } from '../claims/nad-reference.ts';
import { claimStanding, ownerUidsOf } from '../claims/standing.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, VirtualMachineInstance } from '../kube/types.ts';
import { isAllocatorNad } from '../claims/nad-config.ts';
import { readAllocatorNad } from './nad.ts';
import { currentCondition } from './plan.ts';

export type PodAddresses =
  | { ips: string[] }
  /** Deny the pod; `message` says why and what happens next. */
  | { deny: string };

/** A read failed (API error or timeout): the admission cannot be decided now (the webhook denies, KubeVirt retries). */
export class TransientLookupError extends Error {
  override readonly name = 'TransientLookupError';
  readonly object: { kind: string; namespace: string; name: string };
  constructor(object: { kind: string; namespace: string; name: string }, cause: unknown) {
    super(`cannot read ${object.kind} ${object.namespace}/${object.name}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.object = object;
  }
}

/** A read of the admission: any failure is a TransientLookupError (the abort reason once the request is over). */
async function lookup<T>(object: TransientLookupError['object'], read: () => Promise<T>, signal: AbortSignal): Promise<T> {
  try {
    return await read();
  } catch (err) {
    throw new TransientLookupError(object, signal.aborted ? signal.reason : err);
  }
}

export interface PodAddressDeps {
  /** The allocator's NAD cache (it keeps the allocator annotations, which the shared cache drops). */
  allocatorNad(namespace: string, name: string): NetworkAttachmentDefinition | undefined;
  /** GET a NAD the allocator's cache has not seen yet; undefined for 404, throws on any other failure. */
  fetchNad?(namespace: string, name: string, signal: AbortSignal): Promise<NetworkAttachmentDefinition | undefined>;
  /** GET a claim; undefined for 404, throws on any other failure. */
  fetchClaim(namespace: string, name: string, signal: AbortSignal): Promise<IPAMClaim | undefined>;
}

/**
 * Network (VMI network name) → addresses or denial, for the allocator networks of `vmi` only. `verdicts`: the VMI's
 * persistent networks with their claim names as the mutation chooses them (withClaimNames over `claims`); `claims`:
 * by name, the claims the webhook resolved for the pod.
 */
export type PodAddressLookup = (
  namespace: string,
  vmi: VirtualMachineInstance,
  nads: ReadonlyMap<string, NetworkAttachmentDefinition>,
  verdicts: readonly NetworkVerdict[],
  claims: ReadonlyMap<string, IPAMClaim>,
  signal: AbortSignal,
) => Promise<Map<string, PodAddresses>>;

export function createPodAddressLookup(deps: PodAddressDeps): PodAddressLookup {
  return async (namespace, vmi, nads, verdicts, claims, signal) => {
    const out = new Map<string, PodAddresses>();
    for (const verdict of verdicts) {
      if (!verdict.claimSpec) continue;
      const net = vmi.spec?.networks?.find((n) => n?.name === verdict.network);
      const ref = net?.multus ? parseNadReference(net.multus.networkName, namespace) : undefined;
      if (!ref) continue; // the primary network is not served by the allocator
      let nad = deps.allocatorNad(ref.namespace, ref.name);
      if (!nad) {
        // Not seen by the allocator's cache yet (a NAD created a moment ago). The NAD the caller has may come from a
        // cache that drops the allocator annotations: ask the API, so a pod never misses its addresses for that.
        const given = nads.get(keyString(ref));
        const { fetchNad } = deps;
        if (isAllocatorNad(given) || !fetchNad) nad = given;
        else nad = await lookup({ kind: 'NetworkAttachmentDefinition', ...ref }, () => fetchNad(ref.namespace, ref.name, signal), signal);
      }
      if (!nad || !isAllocatorNad(nad)) continue;
      const read = readAllocatorNad(nad);
      // OVN-Kubernetes gives the pod its claim's addresses itself; `ips` from us would be a second source of them.
      if (read.refused !== undefined) continue;
      const poolProblems = read.problems;

      let claim = claims.get(verdict.claim);
      if (claim && !claim.status?.ips?.length) {
        const fresh = await lookup({ kind: 'IPAMClaim', namespace, name: verdict.claim }, () => deps.fetchClaim(namespace, verdict.claim, signal), signal);
        if (fresh?.metadata.uid !== claim.metadata.uid) {
          out.set(verdict.network, {
            deny: `IPAMClaim ${namespace}/${verdict.claim} for network "${verdict.network}" was deleted or replaced while the launcher pod was admitted`,
          });
          continue;
        }
        claim = fresh;
      }
      const result = addressesOf(claim, `${namespace}/${verdict.claim}`, vmi, verdict.network, verdict.claimSpec.network);
      if ('deny' in result && poolProblems.length > 0 && !claim?.status?.ips?.length) {
        result.deny += `; NetworkAttachmentDefinition ${ref.namespace}/${ref.name} cannot be served: ${poolProblems.join('; ')}`;
      }
      out.set(verdict.network, result);
    }
    return out;
  };
}

/**
 * What one claim means for the pod of `vmi` (pure). `expectedNetwork`: the `spec.network` of the NAD the VMI names now.
 * Only a claim the pod may be pointed at (claims/standing.ts: this VM's by uid, not being deleted, for that network)
 * lends it addresses.
 */
export function addressesOf(claim: IPAMClaim | undefined, key: string, vmi: VirtualMachineInstance, network: string, expectedNetwork?: string): PodAddresses {
  const on = `network "${network}"`;
  if (!claim) {
    return { deny: `IPAMClaim ${key} for ${on} does not exist yet; it is created for the VM and gets its addresses moments later` };
  }
  const standing = claimStanding(claim, key, ownerUidsOf(vmi), expectedNetwork);
  if (!standing.usable) return { deny: `${standing.message} (${on})` };
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
