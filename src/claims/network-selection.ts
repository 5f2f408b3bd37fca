// The Multus pod annotations `k8s.v1.cni.cncf.io/networks` and `v1.multus-cni.io/default-network`, as Multus reads
// them: a JSON array of network-selection elements, or the older comma-separated list of `[namespace/]name[@iface]`.
// Parsing never throws: whatever a pod carries, the caller gets either the elements or the reason it could not read
// them, and decides what to do (the webhook leaves such a pod alone and reports it).

import type { NetworkSelectionElement, Pod } from '../kube/types.ts';
import { MULTUS_DEFAULT_NETWORK_ANNOTATION, MULTUS_NETWORKS_ANNOTATION, OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION } from './constants.ts';
import { isObject } from './nad-config.ts';
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from './names.ts';

export const IPAM_CLAIM_REFERENCE = 'ipam-claim-reference';

export type NetworkSelection = { ok: true; format: 'json' | 'list'; elements: NetworkSelectionElement[] } | { ok: false; error: string };

const INTERFACE = /^[^\s,/@]+$/;

/** Parses the value of a networks (or default-network) annotation. An empty value selects no network. */
export function parseNetworkSelection(text: unknown): NetworkSelection {
  if (typeof text !== 'string') return { ok: false, error: 'the annotation is not a string' };
  const trimmed = text.trim();
  if (trimmed === '') return { ok: true, format: 'list', elements: [] };
  // Multus takes the value as JSON as soon as it contains any of these characters.
  if (/[[{"]/.test(trimmed)) return parseJson(trimmed);
  return parseList(trimmed);
}

function parseJson(text: string): NetworkSelection {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (!Array.isArray(doc)) return { ok: false, error: 'JSON but not an array of network-selection elements' };
  const elements: NetworkSelectionElement[] = [];
  for (const [i, item] of doc.entries()) {
    if (!isObject(item)) return { ok: false, error: `element ${i} is not an object` };
    if (typeof item['name'] !== 'string' || item['name'] === '') return { ok: false, error: `element ${i} has no name` };
    for (const key of ['namespace', 'interface', IPAM_CLAIM_REFERENCE] as const) {
      if (item[key] !== undefined && typeof item[key] !== 'string') return { ok: false, error: `element ${i}: "${key}" is not a string` };
    }
    elements.push(item as NetworkSelectionElement);
  }
  return { ok: true, format: 'json', elements };
}

function parseList(text: string): NetworkSelection {
  const elements: NetworkSelectionElement[] = [];
  for (const raw of text.split(',')) {
    const item = raw.trim();
    const slash = item.split('/');
    if (slash.length > 2) return { ok: false, error: `"${item}": more than one "/"` };
    const [namespace, rest] = slash.length === 2 ? [slash[0]!.trim(), slash[1]!] : [undefined, slash[0]!];
    const at = rest.split('@');
    if (at.length > 2) return { ok: false, error: `"${item}": more than one "@"` };
    const name = at[0]!.trim();
    const iface = at.length === 2 ? at[1]!.trim() : undefined;
    if (!DNS1123_SUBDOMAIN.test(name)) return { ok: false, error: `"${item}": "${name}" is not a valid network name` };
    if (namespace !== undefined && !DNS1123_LABEL.test(namespace)) return { ok: false, error: `"${item}": "${namespace}" is not a valid namespace` };
    if (iface !== undefined && !INTERFACE.test(iface)) return { ok: false, error: `"${item}": "${iface}" is not a valid interface name` };
    const element: NetworkSelectionElement = { name };
    if (namespace !== undefined) element.namespace = namespace;
    if (iface !== undefined) element.interface = iface;
    elements.push(element);
  }
  return { ok: true, format: 'list', elements };
}

/** The JSON form Multus reads; element fields stay as they were, in their order, whatever the input form was. */
export function serializeNetworkSelection(elements: readonly NetworkSelectionElement[]): string {
  return JSON.stringify(elements);
}

/** The namespace an element's network lives in: its own, or the pod's. */
export function elementNamespace(element: NetworkSelectionElement, podNamespace: string): string {
  return typeof element.namespace === 'string' && element.namespace !== '' ? element.namespace : podNamespace;
}

/**
 * KubeVirt adds one element per network binding plugin that has a NAD (e.g. passt): no `interface`, and
 * `cni-args.logicNetworkName` naming the VMI network it serves. It is not a VM network of its own: the webhook
 * leaves it alone without looking for it among the VMI's networks.
 */
export function isBindingPluginElement(element: NetworkSelectionElement): boolean {
  const args = (element as Record<string, unknown>)['cni-args'];
  return (element.interface === undefined || element.interface === '') && isObject(args) && typeof args['logicNetworkName'] === 'string';
}

/** The claim an element names, if any. */
export function referenceOf(element: NetworkSelectionElement | undefined): string | undefined {
  const ref = element?.[IPAM_CLAIM_REFERENCE];
  return typeof ref === 'string' && ref !== '' ? ref : undefined;
}

/** The annotations a claim reference lives in, in the order messages list them. */
export const CLAIM_ANNOTATIONS = [MULTUS_NETWORKS_ANNOTATION, MULTUS_DEFAULT_NETWORK_ANNOTATION, OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION] as const;

/** The IPAMClaims one of CLAIM_ANNOTATIONS names, where the IPAM plugin would read them (none when it cannot be read). */
export function claimsNamedIn(annotations: Readonly<Record<string, unknown>> | undefined, key: (typeof CLAIM_ANNOTATIONS)[number]): string[] {
  const text = annotations?.[key];
  if (typeof text !== 'string' || text === '') return [];
  if (key === OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION) return [text];
  const selection = parseNetworkSelection(text);
  return selection.ok ? selection.elements.flatMap((e) => referenceOf(e) ?? []) : [];
}

/** Every IPAMClaim a pod's annotations name, where the IPAM plugin would read it. */
export function namedClaims(pod: Pod): string[] {
  return CLAIM_ANNOTATIONS.flatMap((key) => claimsNamedIn(pod.metadata?.annotations, key));
}
