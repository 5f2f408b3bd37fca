// A claim made after its VM's pod started (the gate turned on while VMs run, a NAD made persistent, the controller
// installed on a live cluster) is empty, and the running pod's element does not name it. The next launcher pod (a
// migration target) would then be given a new address from the claim, and the running pod's deletion would free the
// one the guest has. Pointing the running pod's element at the claim makes the IPAM plugin record the address that
// pod has now in the claim (OVN-Kubernetes does), and keep it at the pod's deletion (spec §8).
//
// The patch goes through the webhook's UPDATE path like any other: an element that gains a reference is checked to
// be this VM's usable claim. Only secondary networks: a running pod cannot gain the primary network's reference
// (the webhook refuses it; the default network of a running pod does not change).

import { keyString } from '../kube/key.ts';
import type { Logger } from 'pino';
import {
  elementNamespace,
  hasActivePods,
  interfacesOfNetwork,
  IPAM_CLAIM_REFERENCE,
  isRunningLauncherPod,
  launcherPodSelector,
  MULTUS_NETWORKS_ANNOTATION,
  parseNadConfig,
  parseNetworkSelection,
  referenceOf,
  serializeNetworkSelection,
} from '../claims/index.ts';
import type { DecideInput, Plan, Problem } from '../claims/index.ts';
import type { KubeClient } from '../kube/client.ts';
import { escapeJsonPointer, type JsonPatchOp } from '../kube/patch.ts';
import { resources } from '../kube/resources.ts';
import type { IPAMClaim, NetworkSelectionElement, Pod, VirtualMachineInstance } from '../kube/types.ts';

/** The API reads and writes of one reconcile: its client, logger and signal. */
export interface Api {
  client: KubeClient;
  log: Logger;
  signal: AbortSignal;
}

type EmptyClaim = { network: string; claim: IPAMClaim };

/** The claims of this plan that exist, are ours, hold no address yet, and belong to a secondary network of a running VMI. */
export function emptyClaimsOfRunningVmi(input: DecideInput, plan: Plan): EmptyClaim[] {
  const { vmi } = input;
  if (!input.gateEnabled || !plan.owner || !vmi?.metadata.uid || vmi.metadata.deletionTimestamp) return [];
  if (!hasActivePods(vmi)) return [];
  const namespace = vmi.metadata.namespace ?? input.key.namespace;
  const byName = new Map(input.claims.map((c) => [c.metadata.name, c]));
  return plan.wanted.flatMap((w) => {
    const claim = byName.get(w.claim);
    if (w.status !== 'created' || !claim || (claim.status?.ips?.length ?? 0) > 0) return [];
    // The running pod's element is on the NAD the VMI names; a claim made for another NAD network (the VM's NAD
    // swapped, the move pending) is not for it, and the webhook would refuse the patch.
    const iface = interfacesOfNetwork(vmi, w.network, namespace);
    const nad = iface ? input.nads.get(iface.nad) : undefined;
    if (!nad || parseNadConfig(nad).networkName !== claim.spec?.network) return [];
    // A claim that existed before the VMI was there before its pods, which the webhook pointed at it at CREATE.
    if (!madeAfter(claim, vmi)) return [];
    return [{ network: w.network, claim }];
  });
}

/**
 * Whether the claim may have been created after the VMI: not in an earlier second (creation times have one-second
 * resolution, so the same second counts; either time unknown: assume so).
 */
function madeAfter(claim: IPAMClaim, vmi: VirtualMachineInstance): boolean {
  const made = Date.parse(claim.metadata.creationTimestamp ?? '');
  const started = Date.parse(vmi.metadata.creationTimestamp ?? '');
  return Number.isNaN(made) || Number.isNaN(started) || made >= started;
}

/**
 * Patches the running launcher pods of the VMI whose element of an empty claim's network names no claim; returns the
 * problems to report while such claims wait for their addresses (none for an ordinary start, where the webhook named
 * the claim when the pod was created). `checked` remembers, per VMI, pod set and claims, whether a pod had to be
 * pointed at them, so that a VM waiting for an IPAM plugin that never fills its claims costs one read, not one per
 * reconcile.
 */
export async function pointRunningPods(
  input: DecideInput,
  plan: Plan,
  checked: Map<string, boolean>,
  api: Api,
): Promise<{ problems: Problem[]; retry: boolean }> {
  const empty = emptyClaimsOfRunningVmi(input, plan);
  if (empty.length === 0) return { problems: [], retry: false };
  const vmi = input.vmi!;
  const active = Object.keys(vmi.status?.activePods ?? {}).sort();
  const memo = `${vmi.metadata.uid}/${active.join(',')}/${empty.map((e) => e.claim.metadata.name).join(',')}`;
  const problems: Problem[] = [];
  let retry = false;
  if (!checked.has(memo)) {
    // From the API server's watch cache (resourceVersion 0), not etcd: this read follows most VM starts (a claim and its
    // VMI are usually made in the same second). A stale answer costs nothing: the patch tests the annotation it read.
    const pods = await api.client.list<Pod>(resources.pods, {
      namespace: input.key.namespace,
      labelSelector: launcherPodSelector(vmi.metadata.uid!),
      resourceVersion: '0',
      signal: api.signal,
    });
    let complete = true;
    let pointed = false;
    for (const pod of pods.items) {
      // Only the VMI's own pods, by controller owner uid: the same rule as the webhook's.
      if (!isRunningLauncherPod(pod, vmi.metadata.uid!)) continue;
      const outcome = await pointPod(pod, vmi, empty, input.key.namespace, api);
      if (outcome === 'failed') complete = false;
      if (outcome === 'pointed') pointed = true;
    }
    if (checked.size > 10_000) checked.clear();
    if (complete) checked.set(memo, pointed);
    else retry = true;
    if (!complete && !pointed) return { problems, retry };
  }
  if (checked.get(memo) === false) return { problems, retry };
  for (const { network, claim } of empty) {
    problems.push({
      reason: 'ClaimAwaitingAddresses',
      network,
      claim: claim.metadata.name,
      message:
        `IPAMClaim ${claim.metadata.name} was made while the VM was running: its running launcher pod now refers to it, so that ` +
        'the IPAM plugin records the address the VM has now; until it does, the next launcher pod (a migration) would get another one',
    });
  }
  return { problems, retry };
}

/** Whether the pod had to be pointed at the claims, already named them, or could not be patched. */
async function pointPod(pod: Pod, vmi: VirtualMachineInstance, empty: EmptyClaim[], namespace: string, api: Api): Promise<'pointed' | 'already' | 'failed'> {
  const { client, log, signal } = api;
  const text = pod.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION];
  const selection = parseNetworkSelection(text ?? '');
  if (text === undefined || !selection.ok) return 'already';
  const elements: NetworkSelectionElement[] = selection.elements.map((e) => ({ ...e }));
  const added: string[] = [];
  for (const { network, claim } of empty) {
    // The element the webhook would match: KubeVirt's pod interface name (hashed or ordinal) on the network's NAD.
    const ifaces = interfacesOfNetwork(vmi, network, namespace);
    const element = elements.find(
      (e) =>
        typeof e.interface === 'string' &&
        ifaces?.names.has(e.interface) &&
        keyString({ namespace: elementNamespace(e, namespace), name: e.name }) === ifaces.nad,
    );
    if (!element || referenceOf(element) !== undefined) continue;
    element[IPAM_CLAIM_REFERENCE] = claim.metadata.name;
    added.push(claim.metadata.name);
  }
  if (added.length === 0) return 'already';
  const path = `/metadata/annotations/${escapeJsonPointer(MULTUS_NETWORKS_ANNOTATION)}`;
  // The test keeps the patch from landing on an annotation virt-controller rewrote meanwhile: read again next time.
  const ops: JsonPatchOp[] = [
    { op: 'test', path: '/metadata/uid', value: pod.metadata.uid },
    { op: 'test', path, value: text },
    { op: 'replace', path, value: serializeNetworkSelection(elements) },
  ];
  try {
    await client.jsonPatch(resources.pods, namespace, pod.metadata.name, ops, { signal });
    log.info({ pod: pod.metadata.name, claims: added }, 'pointed the running launcher pod at IPAMClaims made after it started');
    return 'pointed';
  } catch (err) {
    log.info({ pod: pod.metadata.name, claims: added, err }, 'could not point the running launcher pod at its IPAMClaims yet; will retry');
    return 'failed';
  }
}
