// Names that other components must compute the same way: the claim name (the webhook writes it into the launcher
// pod, the IPAM plugin looks it up) and KubeVirt's pod interface name (the IPAM plugin matches claims to interfaces).

import { hash } from 'node:crypto';

export const MAX_SUBDOMAIN_LENGTH = 253;
export const PRIMARY_POD_INTERFACE = 'eth0';

/** The characters of a DNS-1123 label, and of a subdomain (labels joined by dots), whatever their length. */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A DNS-1123 label (what a namespace name must be): lowercase alphanumerics and '-', at most 63 characters. */
export function isDns1123Label(name: string): boolean {
  return name.length <= 63 && DNS1123_LABEL.test(name);
}

/** Kubernetes' rule for object names such as an IPAMClaim's: DNS-1123 subdomain, at most 253 characters. */
export function isDns1123Subdomain(name: string): boolean {
  return name.length > 0 && name.length <= MAX_SUBDOMAIN_LENGTH && DNS1123_SUBDOMAIN.test(name);
}

function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

// One reconcile or admission asks for the same few names many times (to find claims, to plan, to judge which are
// in use), and a cold start does that for every VM: a sha256 and a handful of regular expressions each time were a
// visible share of the CPU and of the garbage. A small memo takes the repeats; it is emptied when full rather than
// kept in order, because nearly all its hits come within one reconcile.
const MEMO_LIMIT = 512;

function memoised(memo: Map<string, string>, key: string, compute: () => string): string {
  let value = memo.get(key);
  if (value === undefined) {
    value = compute();
    if (memo.size >= MEMO_LIMIT) memo.clear();
    memo.set(key, value);
  }
  return value;
}

const podInterfaceNames = new Map<string, string>();
const hashedClaimNames = new Map<string, string>();
const referenceSuffixes = new Map<string, string>();

/** KubeVirt's name for the pod interface of a secondary network: "pod" + 11 hex characters of sha256(name). */
export function podInterfaceName(networkName: string): string {
  return memoised(podInterfaceNames, networkName, () => `pod${sha256Hex(networkName).slice(0, 11)}`);
}

const HASHED_POD_INTERFACE = /^pod[0-9a-f]{11}$/;

/** Whether a pod interface name is podInterfaceName()'s form, which names one VM network (the older `net<N>` is a position). */
export function isHashedPodInterfaceName(name: string | undefined): name is string {
  return name !== undefined && HASHED_POD_INTERFACE.test(name);
}

const CLAIM_HASH_LENGTH = 10;

/**
 * The IPAMClaim name for a VM's logical network (the VM/VMI network `name`, not the NAD's).
 *
 * `<vm>.<network>` whenever that is a valid object name, so that claims made by kubevirt/ipam-extensions are found
 * under the name they already have. Otherwise `<vm>.<readable>-<hash>`, where `<readable>` is the network name
 * squeezed into `[a-z0-9-]` and cut to fit, and `<hash>` is 10 hex characters of sha256("<vm>/<network>"); when the
 * VM name leaves no room for `<readable>`, `<vm, cut to fit>.<hash>`. The name depends on nothing but (vm, network),
 * so adding or removing another network never renames an existing claim.
 *
 * Two networks of one VM cannot get the same name:
 * - two plain names differ because the network names differ;
 * - two hashed names end in their hashes, which differ unless sha256 collides in 40 bits (odds about 1e-12 per pair);
 * - a hashed name of network A equals the plain name of network B only if B is literally `<readable A>-<hash>` or
 *   `<hash>` (or, with a cut VM name, never: the plain name would keep the VM's full name, which contains the cut
 *   part plus at least one more character before a dot, while the hash has no dot). Nobody names a network after 10
 *   hex digits of the sha256 of another network's name; and if someone does on purpose, the decision reports the
 *   clash (ClaimNameConflict) rather than letting two networks share one claim.
 * The reference implementation lowercases and re-joins the valid pieces, so `net_a` and `net.a` both become
 * `vm.net.a`; here `net.a` keeps the plain form and `net_a` gets a hashed one.
 *
 * `vmName` must be a valid DNS-1123 subdomain, which the API server guarantees for every object name.
 */
export function claimName(vmName: string, networkName: string): string {
  const plain = `${vmName}.${networkName}`;
  if (isDns1123Subdomain(plain)) return plain;
  return hashedClaimName(vmName, networkName);
}

/**
 * The name of a network's claim when `<vm>.<network>` is already the claim of ANOTHER VM: a dotted-name collision
 * (VM `a` with network `b.c` and VM `a.b` with network `c` both give `a.b.c`). It is the hashed form of claimName(),
 * `<vm>.<readable>-<hash>`, whose hash covers "<vm>/<network>", so the two VMs of a collision never share it. Which
 * of the two names a network uses is decided by claimNameFor() (naming.ts) from the claims that exist; for a name
 * that is not valid in its plain form, this is claimName() itself.
 */
export function collisionClaimName(vmName: string, networkName: string): string {
  return hashedClaimName(vmName, networkName);
}

/**
 * The name of a network's claim while the VM's earlier claim of that network, made for another NAD network, is still
 * used by a running pod: a NAD swapped on a running VM (KubeVirt's LiveUpdateNADRef migrates the VM to a pod on the
 * new NAD). `<vm>.<readable>-<hash>` with the hash over "<vm>/<network>/<NAD network>", so it differs from the other
 * two names and from the name of any other NAD network. Which name applies is decided by claimNameFor() (naming.ts).
 */
export function swapClaimName(vmName: string, networkName: string, nadNetwork: string): string {
  return hashedClaimName(vmName, networkName, nadNetwork);
}

function hashedClaimName(vmName: string, networkName: string, nadNetwork?: string): string {
  // The key is the hash's own input; a VM name holds no '/', so no two (VM, network) pairs share one, and a network
  // name holds none either (KubeVirt's validation), so a NAD network adds a third part without ambiguity.
  const key = nadNetwork === undefined ? `${vmName}/${networkName}` : `${vmName}/${networkName}/${nadNetwork}`;
  return memoised(hashedClaimNames, key, () => computeHashedClaimName(vmName, networkName, key));
}

function computeHashedClaimName(vmName: string, networkName: string, key: string): string {
  const hash = sha256Hex(key).slice(0, CLAIM_HASH_LENGTH);
  const readable = toLabelChars(networkName);
  const room = MAX_SUBDOMAIN_LENGTH - vmName.length - '.'.length - '-'.length - CLAIM_HASH_LENGTH;
  if (readable !== '' && room > 0) {
    return `${vmName}.${trimTrailingSeparators(readable.slice(0, room))}-${hash}`;
  }
  const vmRoom = MAX_SUBDOMAIN_LENGTH - '.'.length - CLAIM_HASH_LENGTH;
  return `${trimTrailingSeparators(vmName.slice(0, vmRoom))}.${hash}`;
}

/**
 * The name kubevirt/ipam-extensions gives the claim of a network whose plain name is not valid: lowercased, with the
 * valid pieces re-joined by dots. Only used to recognise such claims as belonging to a network still in use (so a
 * switch from the reference implementation never deletes the claim a running VM depends on), never to create one.
 */
export function referenceClaimName(vmName: string, networkName: string): string {
  return `${vmName}.${memoised(referenceSuffixes, networkName, () => referenceSuffix(networkName))}`;
}

function referenceSuffix(networkName: string): string {
  return networkName
    .toLowerCase()
    .split(/[^a-z0-9-]+/)
    .map((piece) => piece.replace(/^-+|-+$/g, ''))
    .filter((piece) => piece !== '')
    .join('.');
}

/** Lowercases ASCII, turns every other character into '-', and collapses and trims the dashes. */
function toLabelChars(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

function trimTrailingSeparators(name: string): string {
  return name.replace(/[-.]+$/, '');
}
