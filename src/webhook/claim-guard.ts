// Who may name an IPAMClaim at all. OVN-Kubernetes hands a pod the addresses of the claim its annotations name without
// asking whose claim it is, so a pod that is not a launcher pod of the claim's VM must never get a reference past
// admission. These rules run on every request the webhook receives, before the launcher-pod decisions, as a pure
// function of the request; each refusal is final (HTTP 403), since retrying the same object cannot change the answer.
//
// | rule                    | refuses                                                                               |
// |-------------------------|---------------------------------------------------------------------------------------|
// | BindingCarriesClaimKeys | a pods/binding whose annotations hold any of the three claim annotations: the API     |
// |                         | server merges a Binding's annotations into the pod, past every pod webhook; the       |
// |                         | scheduler never sets them                                                             |
// | UnreadableReference     | a claim annotation (new, or changed at UPDATE) that could name a claim in a way this  |
// |                         | parser would not see as Multus and OVN-Kubernetes (Go's encoding/json) read it        |
// | NotALauncherPod         | a pod without `kubevirt.io: virt-launcher` (before and after) that names a claim at   |
// |                         | CREATE, or adds or changes one at UPDATE (pods or pods/status)                        |
//
// What Go's decoder reads and JSON.parse may not: a key in another ASCII letter case ("IPAM-Claim-Reference"), a
// key spelled with \u escapes, and duplicate keys (the last one wins in Go, including after a null, which leaves the
// value of an earlier duplicate in place, while JSON.parse keeps only the null). A \u escape anywhere, a key that
// folds to ipam-claim-reference under another spelling, or text that looks like a non-empty reference but does not
// parse is therefore refused rather than guessed at. virt-controller writes none of these.

import { OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION } from '../claims/constants.ts';
import { isObject } from '../claims/nad-config.ts';
import { CLAIM_ANNOTATIONS, claimsNamedIn, IPAM_CLAIM_REFERENCE, parseNetworkSelection } from '../claims/network-selection.ts';

export type GuardRule = 'BindingCarriesClaimKeys' | 'UnreadableReference' | 'NotALauncherPod';

export interface GuardRefusal {
  rule: GuardRule;
  message: string;
  /** The claims the request names, where they could be read. */
  claims: string[];
}

export interface GuardInput {
  kind: 'Pod' | 'Binding';
  operation: 'CREATE' | 'UPDATE';
  /** `namespace/name` of the pod (or of the pod a Binding binds). */
  subject: string;
  annotations: Readonly<Record<string, unknown>>;
  oldAnnotations?: Readonly<Record<string, unknown>>;
  /** The pod, or its old self at UPDATE, carries the launcher label: the launcher-pod rules decide its references. */
  launcher: boolean;
}

type Annotations = Readonly<Record<string, unknown>>;

/** The text-level test the webhook's matchConditions and the claim-reference policy apply: may this value name a claim? */
const MAY_NAME_CLAIM = /"ipam-claim-reference"\s*:\s*"[^"]|\\u/i;

/** Go's encoding/json matches a key to a struct field ignoring ASCII letter case (and nothing else, for this key). */
const foldsToReference = (key: string): boolean => key.toLowerCase() === IPAM_CLAIM_REFERENCE;

const textOf = (annotations: Annotations | undefined, key: string): string => {
  const value = annotations?.[key];
  return typeof value === 'string' ? value : '';
};

/** Why a networks or default-network value cannot be read as Go reads its claim references; undefined when it can. */
export function unreadableReference(text: string): string | undefined {
  if (!MAY_NAME_CLAIM.test(text)) return undefined;
  if (text.includes('\\u')) return 'it contains a \\u escape, which can spell ipam-claim-reference';
  const selection = parseNetworkSelection(text);
  if (!selection.ok) return `it looks like it names a claim but cannot be read (${selection.error})`;
  for (const [i, element] of selection.elements.entries()) {
    const variant = Object.keys(element).find((key) => key !== IPAM_CLAIM_REFERENCE && foldsToReference(key));
    if (variant !== undefined) return `element ${i} spells "${IPAM_CLAIM_REFERENCE}" as "${variant}", which Multus and OVN-Kubernetes read as the same key`;
  }
  return undefined;
}

/** The claim annotations a request sets: all at CREATE, those whose value changed at UPDATE. */
function touched(input: GuardInput): (typeof CLAIM_ANNOTATIONS)[number][] {
  return CLAIM_ANNOTATIONS.filter((key) => input.operation === 'CREATE' || textOf(input.annotations, key) !== textOf(input.oldAnnotations, key));
}

const rules: readonly ((input: GuardInput) => GuardRefusal | undefined)[] = [
  function bindingCarriesClaimKeys(input) {
    if (input.kind !== 'Binding') return undefined;
    const keys = CLAIM_ANNOTATIONS.filter((key) => key in input.annotations);
    if (keys.length === 0) return undefined;
    return {
      rule: 'BindingCarriesClaimKeys',
      claims: keys.flatMap((key) => claimsNamedIn(input.annotations, key)),
      message: `persistent-ips: a Binding of pod ${input.subject} may not carry annotation ${keys.join(', ')}: the API server would copy it into the pod past admission, and only a VM's launcher pods may name its IPAMClaim`,
    };
  },
  function unreadable(input) {
    if (input.kind !== 'Pod') return undefined;
    for (const key of touched(input)) {
      if (key === OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION) continue;
      const why = unreadableReference(textOf(input.annotations, key));
      if (why === undefined) continue;
      return {
        rule: 'UnreadableReference',
        claims: [],
        message: `persistent-ips: annotation ${key} of pod ${input.subject} cannot be checked: ${why}; the pod is refused rather than let Multus and OVN-Kubernetes read a claim reference nobody checked`,
      };
    }
    return undefined;
  },
  function notALauncherPod(input) {
    if (input.kind !== 'Pod' || input.launcher) return undefined;
    const added = touched(input).flatMap((key) => {
      const before = new Set(input.operation === 'UPDATE' ? claimsNamedIn(input.oldAnnotations, key) : []);
      return claimsNamedIn(input.annotations, key)
        .filter((claim) => !before.has(claim))
        .map((claim) => ({ key, claim }));
    });
    if (added.length === 0) return undefined;
    const naming = added.map(({ key, claim }) => `IPAMClaim ${claim} (${key})`).join(', ');
    const verb = input.operation === 'CREATE' ? 'names' : 'would add';
    return {
      rule: 'NotALauncherPod',
      claims: added.map((a) => a.claim),
      message: `persistent-ips: pod ${input.subject} ${verb} ${naming}, but it is not a virt-launcher pod: only the launcher pods KubeVirt creates for a VM may name that VM's claim, whose addresses the IPAM plugin would otherwise hand to this pod`,
    };
  },
];

/** The first rule that refuses the request, or undefined when none does (the launcher-pod rules then decide). */
export function guardClaimReferences(input: GuardInput): GuardRefusal | undefined {
  for (const rule of rules) {
    const refusal = rule(input);
    if (refusal) return refusal;
  }
  return undefined;
}

/** The annotations of an object as the request carries it (anything but a string map reads as none). */
export function annotationsOf(object: unknown): Annotations {
  const metadata = isObject(object) ? object['metadata'] : undefined;
  const annotations = isObject(metadata) ? metadata['annotations'] : undefined;
  return isObject(annotations) ? annotations : {};
}
