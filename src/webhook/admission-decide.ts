// The launcher-pod rules of the webhook, as a pure function over what admission.ts has read: a verdict (admit, with
// a patch, or refuse: admission-verdicts.ts), or the one fact still to be read. The caller reads it and asks again,
// so nothing is read that an earlier rule makes needless (the VMI of a pod on ordinary networks, the claims of a VMI
// that is gone). claim-guard.ts has run before, on every request; these rules see launcher pods only.
//
// The rules, in order; the first that decides wins:
//
//   CARRY-REFUSED     an UPDATE changes or drops a reference of the running pod (carry-over.ts): refused
//   NOTHING-FRESH     an UPDATE with no element that is new or gains a reference: admitted, references carried over
//   NOT-SYNCED        the caches have not had their first list: refused, retriable
//   NOT-A-LAUNCHER    a pod that names a claim without the launcher label (it had it before the UPDATE): refused
//   GATE-OFF          the PersistentIPs gate is off: refused if the pod names a claim, else admitted as it is
//   ORDINARY          the pod names no claim, and the NADs alone show none of its networks can be persistent:
//                     admitted as it is, without reading the VMI
//   NO-OWNER          no controller owner reference to a VMI, or that VMI does not exist or has another uid:
//                     refused if the pod names a claim, else admitted as it is with a warning
//   STALE-VMI         an element matches no network of the cached VMI: read the VMI from the API, decide again
//   UNCHECKABLE       the annotations cannot be read: refused if the pod names a claim, else admitted unchanged
//   CLAIMS            a claim the pod needs is not its VM's (yet), or has no address for it: refused, retriable
//   PATCH             otherwise: admitted, with the carried references and the mutation's patch

import { MULTUS_NETWORKS_ANNOTATION } from '../claims/constants.ts';
import { controllerRef, isKubevirtRef } from '../claims/index.ts';
import { namedClaims, parseNetworkSelection, referenceOf } from '../claims/network-selection.ts';
import type { Pod, VirtualMachineInstance } from '../kube/types.ts';
import type { CarryOver } from './carry-over.ts';
import { allow, deny, refusal, type LogLine, type Verdict } from './admission-verdicts.ts';
import { isLauncherPod, mutateLauncherPod, type PodMutation, type PodMutationInput } from './pod-mutation.ts';
import { aggregateReports } from './report-aggregation.ts';

/**
 * The reason of the Events the webhook posts on a VM whose launcher pods it refuses; the message starts with the
 * cause (ClaimNotFound, ClaimOwnedByAnotherObject, ...). Distinct from the controller's reasons, which say what
 * blocks a claim, so that `kubectl get events --field-selector reason=LauncherPodRefused` lists the VMs kept from
 * starting.
 */
export const LAUNCHER_POD_REFUSED = 'LauncherPodRefused';

export interface AdmissionFacts {
  namespace: string;
  podName: string;
  operation: 'CREATE' | 'UPDATE';
  /** UPDATE: what carry-over.ts kept of the running pod. */
  carry?: CarryOver;
  /** The pod to decide: the request's, with the references of the running pod carried over. */
  subject: Pod;
  /** The claims the elements to decide already name: each must be proved this VM's, or the pod is refused. */
  named: readonly string[];
  synced: boolean;
  gateEnabled: boolean;
  clusterDefaultNetwork?: { namespace: string; name: string };
  /** Read on demand (`nads`): mayNeedReferences() of the subject with the cached NADs. */
  mayNeedReferences?: boolean;
  /** Read on demand (`vmi`, `vmiFromApi`): the VMI the owner reference names, and whether the API gave it. */
  vmi?: { value: VirtualMachineInstance | undefined; fromApi: boolean };
  /** Read on demand (`networks`), for `vmi.value`. */
  networks?: NetworkFacts;
}

/** What the pure mutation needs beyond the pod and its VMI. */
export type NetworkFacts = Pick<PodMutationInput, 'nads' | 'persistent' | 'claims' | 'addresses'>;

export type Owner = { name: string; uid: string };
export type Need = { need: 'nads' } | { need: 'vmi' | 'vmiFromApi'; owner: Owner } | { need: 'networks'; vmi: VirtualMachineInstance };
export type Decision = Verdict | Need;

/**
 * The VMI a launcher pod belongs to: its controller owner reference, uid and all. Nothing else identifies it: a pod
 * that merely carries the launcher label and `kubevirt.io/domain` (`kubectl debug --copy-to`, a hand-made pod) is not
 * the VMI's, and pointing it at the VM's claim would give it the VM's address.
 */
export function vmiOf(pod: Pod): Owner | undefined {
  // The API server lets an object have one controller reference at most.
  const owner = controllerRef(pod, 'VirtualMachineInstance');
  return owner && isKubevirtRef(owner) && owner.name && owner.uid ? { name: owner.name, uid: owner.uid } : undefined;
}

/** The claims the elements to decide already name: at UPDATE those of the fresh elements, at CREATE all. */
export function claimsToProve(subject: Pod, carry: CarryOver | undefined): string[] {
  if (!carry) return namedClaims(subject);
  const selection = parseNetworkSelection(subject.metadata?.annotations?.[MULTUS_NETWORKS_ANNOTATION] ?? '');
  if (!selection.ok) return [];
  return carry.fresh.flatMap((i) => referenceOf(selection.elements[i]) ?? []);
}

const podOf = (f: AdmissionFacts): string => `${f.namespace}/${f.podName}`;
const carried = (f: AdmissionFacts) => f.carry?.patch ?? [];

function refuse(f: AdmissionFacts, why: string, logs: LogLine[] = []): Verdict {
  const refused = refusal('UnprovenClaim', podOf(f), f.named, why);
  return deny(refused, [...logs, { level: 'warn', fields: { claims: f.named }, message: refused.message }]);
}

/** No VMI of this pod to decide by: refused if the pod names a claim, else admitted as it is, with a warning. */
function withoutVmi(f: AdmissionFacts, owner: Owner | undefined, why: string): Verdict {
  if (f.named.length > 0) return refuse(f, owner ? `VirtualMachineInstance ${f.namespace}/${owner.name} ${why}` : `it ${why}`);
  const message = owner
    ? `persistent-ips: VirtualMachineInstance ${f.namespace}/${owner.name} ${why}; launcher pod admitted without IPAM claim references`
    : `persistent-ips: launcher pod ${podOf(f)} ${why}; admitted without IPAM claim references`;
  return allow('allowed_without_vmi', carried(f), [message], [{ level: 'warn', message, ...(owner ? { vmi: owner.name } : {}) }]);
}

const rules: readonly ((f: AdmissionFacts) => Decision | undefined)[] = [
  function carryRefused(f) {
    if (!f.carry || f.carry.refusals.length === 0) return undefined;
    const log: LogLine = { level: 'warn', fields: { refusals: f.carry.refusals }, message: 'refusing an update that would change a claim reference' };
    return deny(refusal('ReferenceChanged', podOf(f), f.carry.refusals), [log]);
  },
  function nothingFresh(f) {
    return f.carry && f.carry.fresh.length === 0 ? allow('unchanged', carried(f)) : undefined;
  },
  function notSynced(f) {
    return f.synced ? undefined : deny(refusal('NotSynced', podOf(f)), [{ level: 'info', message: 'denying launcher pod: caches not synced yet' }]);
  },
  // A pod that names a claim must be proved to be that VM's launcher pod; nothing below may wave it through.
  function notALauncher(f) {
    return f.named.length > 0 && !isLauncherPod(f.subject) ? refuse(f, 'it is not a virt-launcher pod') : undefined;
  },
  function gateOff(f) {
    if (f.gateEnabled) return undefined;
    return f.named.length > 0 ? refuse(f, 'the PersistentIPs feature gate is off') : allow('skipped', carried(f));
  },
  function ordinary(f) {
    if (f.named.length > 0) return undefined;
    if (f.mayNeedReferences === undefined) return { need: 'nads' };
    return f.mayNeedReferences ? undefined : allow('unchanged', carried(f), [], [{ level: 'debug', message: 'launcher pod on ordinary networks only' }]);
  },
  function noOwner(f) {
    const owner = vmiOf(f.subject);
    if (!owner) return withoutVmi(f, undefined, 'has no controller owner reference to a VirtualMachineInstance (a copied or hand-made pod)');
    if (!f.vmi) return { need: 'vmi', owner };
    const uid = f.vmi.value?.metadata.uid;
    if (!f.vmi.value) return withoutVmi(f, owner, 'does not exist');
    return uid === owner.uid ? undefined : withoutVmi(f, owner, `has uid ${uid ?? '(none)'}, not the pod owner's ${owner.uid}`);
  },
  function mutation(f) {
    const owner = vmiOf(f.subject);
    const vmi = f.vmi?.value;
    if (!owner || !vmi || !f.vmi) return undefined; // noOwner decided
    if (!f.networks) return { need: 'networks', vmi };
    const result = mutateLauncherPod({
      ...f.networks,
      pod: f.subject,
      namespace: f.namespace,
      operation: f.operation,
      vmi,
      ...(f.carry ? { fresh: new Set(f.carry.fresh) } : {}),
      ...(f.clusterDefaultNetwork ? { clusterDefaultNetwork: f.clusterDefaultNetwork } : {}),
    });
    // The pod has a network the cached VMI lacks: a hotplug the cache has not caught up with. Ask the API.
    if (result.staleVmiSuspected && !f.vmi.fromApi) return { need: 'vmiFromApi', owner };
    return verdictOf(f, owner, result);
  },
];

/** The first rule that decides, or the fact it needs read first. */
export function decideAdmission(facts: AdmissionFacts): Decision {
  for (const rule of rules) {
    const decision = rule(facts);
    if (decision) return decision;
  }
  throw new Error('no admission rule decided'); // the last rule always decides
}

/** UNCHECKABLE, CLAIMS and PATCH: what the mutation of the pod says. */
function verdictOf(f: AdmissionFacts, owner: Owner, result: PodMutation): Verdict {
  const reports = aggregateReports(result.reports);
  const warnings = reports.filter((r) => r.reason !== 'PersistenceBlocked' && r.reason !== 'MissingNetworkElement').map((r) => `persistent-ips: ${r.message}`);
  const logs: LogLine[] = reports.map((r) => ({ level: 'warn', vmi: owner.name, fields: { reason: r.reason, network: r.network }, message: r.message }));
  if (result.skipped && f.named.length > 0) return refuse(f, `its annotations cannot be checked (${result.skipped})`, logs);
  if (result.skipped === 'UnreadableAnnotation') return allow('unreadable', [], warnings, logs);
  if (result.denials.length > 0) {
    const message = 'denying launcher pod: a claim it needs is not its own, or has no address';
    const events = result.denials.map((d) => ({
      reason: LAUNCHER_POD_REFUSED,
      message: `launcher pods are not admitted (${d.reason ?? 'AddressesNotAllocated'}): ${d.message}`,
    }));
    return {
      ...deny(refusal('NotAdmittedYet', result.denials), [...logs, { level: 'warn', vmi: owner.name, fields: { denials: result.denials }, message }]),
      events,
    };
  }
  if (result.patch.length === 0) return { ...allow('unchanged', carried(f), warnings, logs), events: [] };
  logs.push({ level: 'debug', vmi: owner.name, fields: { references: result.references }, message: 'adding IPAM claim references' });
  // The mutation was computed on the pod with its references carried over: both patches apply in turn.
  return { ...allow('patched', [...carried(f), ...result.patch], warnings, logs), events: [] };
}
