// KubeVirt's VMI annotation asking for specific addresses (ADDRESSES_ANNOTATION, src/claims/constants.ts), on a VMI
// or the VM template: JSON object, KubeVirt interface name → list of addresses (bare or CIDR). Read by the allocator
// (requests.ts) and by the webhook (pod-networks.ts); the addresses are read with the leaf src/ip.

import { ADDRESSES_ANNOTATION } from './constants.ts';
import { type IPFamily, familyName, parseAddress } from '../ip/address.ts';

export interface AddressesAnnotation {
  /** Interface name → requested addresses, for interfaces whose entry is valid. */
  requests: Map<string, string[]>;
  /**
   * What is wrong. A problem naming an `interface` means that interface's request was dropped: the caller must
   * not fall back to a dynamic address for it (the user asked for something specific), but report and wait.
   */
  problems: { interface?: string; message: string }[];
}

/** Parses the annotation value. Never throws; absent or empty means no requests. */
export function parseAddressesAnnotation(value: unknown): AddressesAnnotation {
  const requests = new Map<string, string[]>();
  const problems: AddressesAnnotation['problems'] = [];
  if (value === undefined || value === null || value === '') return { requests, problems };
  if (typeof value !== 'string') {
    problems.push({ message: `${ADDRESSES_ANNOTATION} must be a JSON string, got ${typeof value}` });
    return { requests, problems };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    problems.push({
      message: `${ADDRESSES_ANNOTATION} is not valid JSON (${err instanceof Error ? err.message : String(err)})`,
    });
    return { requests, problems };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    problems.push({
      message: `${ADDRESSES_ANNOTATION} must be a JSON object mapping interface names to address lists,` + ` e.g. {"net1": ["192.0.2.10"]}`,
    });
    return { requests, problems };
  }
  for (const [iface, list] of Object.entries(parsed)) {
    if (iface === '') {
      problems.push({ message: `${ADDRESSES_ANNOTATION}: an interface name is empty` });
      continue;
    }
    if (!Array.isArray(list)) {
      const message = `${ADDRESSES_ANNOTATION}: "${iface}" must map to a list of addresses`;
      problems.push({ interface: iface, message });
      continue;
    }
    const bad: string[] = [];
    const families = new Set<IPFamily>();
    for (const item of list) {
      const r = parseAddress(item, { allowPrefix: true });
      if (!r.ok) bad.push(r.message);
      else if (families.has(r.value.family)) bad.push(`more than one ${familyName(r.value.family)} address`);
      else families.add(r.value.family);
    }
    if (bad.length > 0) {
      problems.push({ interface: iface, message: `${ADDRESSES_ANNOTATION}: "${iface}": ${bad.join('; ')}` });
      continue;
    }
    requests.set(iface, list as string[]);
  }
  return { requests, problems };
}
