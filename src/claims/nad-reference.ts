// A Multus network reference, `name` (the referring object's namespace) or `namespace/name`: what a VMI's
// `multus.networkName` holds, and what `--default-network-nad` takes. The one parser of it; callers that need the
// parts as a map key use nadKeyOfNetworkName.

import { keyString, type ObjectKey } from '../kube/key.ts';

export type { ObjectKey };

/**
 * The NAD a reference names, or undefined when it is neither `name` nor `namespace/name` (empty parts, more than
 * one `/`, not a string). Without `defaultNamespace` a bare `name` is not enough: the namespace must be written.
 */
export function parseNadReference(reference: unknown, defaultNamespace?: string): ObjectKey | undefined {
  if (typeof reference !== 'string') return undefined;
  const parts = reference.split('/');
  if (parts.length === 1 && parts[0] && defaultNamespace) return { namespace: defaultNamespace, name: parts[0] };
  if (parts.length === 2 && parts[0] && parts[1]) return { namespace: parts[0], name: parts[1] };
  return undefined;
}

/** `namespace/name` of the NAD a reference names (the key of the caches and of DecideInput.nads). */
export function nadKeyOfNetworkName(reference: unknown, defaultNamespace: string): string | undefined {
  const ref = parseNadReference(reference, defaultNamespace);
  return ref && keyString(ref);
}
