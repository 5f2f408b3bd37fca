// What a NetworkAttachmentDefinition says to the built-in allocator: whether it opts in, which network (the CNI
// config `name`) it belongs to, and the pool. Pure and total: any NAD, however broken, gives an answer with the
// problems spelled out for the operator, never an exception.
//
// The switch and the pool
// -----------------------
// - `persistent-ips.kubevirt.io/allocator: "true"` opts the NAD's network in. The NAD must also allow persistent IPs
//   (`allowPersistentIPs: true` in the config, or `persistent-ips.kubevirt.io/allow-persistent-ips: "true"`), since
//   only then are claims made for its VMs; an allocator NAD without it is reported.
// - The pool: `subnets` and `excludeSubnets`, each read from its annotation when the annotation is set
//   (`persistent-ips.kubevirt.io/subnets`, `persistent-ips.kubevirt.io/exclude-subnets`: comma-separated, for CNIs
//   such as bridge + static IPAM that reject unknown config keys), else from the config key of the same name
//   (comma-separated string, as OVN-Kubernetes writes it).
//
// One network, one pool
// ---------------------
// A network is its config `name`: every NAD with that name, in any namespace, shares the pool (as NADs of one
// OVN-Kubernetes network share its subnets). They must all opt in and describe the same pool; otherwise nobody on
// the network gets a new address until they agree (addresses already held are kept), and every one of them is told
// why. Allocating from two pools, or for claims that came through a NAD that did not opt in, could hand one
// address out twice.
//
// OVN-Kubernetes networks are refused
// -----------------------------------
// OVN-Kubernetes (CNI type `ovn-k8s-cni-overlay`) records the addresses of its networks' claims in status.ips
// itself. Serving such a network too would give each claim two writers, each choosing from its own view of the
// pool: one address could go to two VMs. So a network with an OVN-Kubernetes NAD is never served, whatever its
// NADs say; the NADs that set the switch are told why (AllocatorRefused), and its launcher pods get no `ips`.

import { keyString } from '../kube/key.ts';
import { ALLOCATOR_ANNOTATION, EXCLUDE_SUBNETS_ANNOTATION, NAD_PERSISTENT_IPS_ANNOTATION, SUBNETS_ANNOTATION } from '../claims/constants.ts';
import { isAllocatorNad, isOvnKubernetes, OVN_K8S_CNI_TYPE, parseNadConfig } from '../claims/nad-config.ts';
import type { NetworkAttachmentDefinition } from '../kube/types.ts';
import { cmp } from '../ip/intervals.ts';
import { type Pool, parsePool } from '../ip/pool.ts';

export { ALLOCATOR_ANNOTATION } from '../claims/constants.ts';

export interface AllocatorNad {
  /** `namespace/name` */
  key: string;
  /** The switch is on. */
  enabled: boolean;
  /** The CNI network name; undefined when the config has none (or cannot be read). */
  network?: string;
  /** Set when enabled and the keys parse. */
  pool?: Pool;
  /** What keeps this NAD from serving allocations (only for enabled NADs, or a malformed switch). */
  problems: string[];
  /** Accepted but worth telling (e.g. an ignored OVN host prefix). */
  warnings: string[];
  /** The CNI is OVN-Kubernetes, which writes claim statuses itself. */
  ovnKubernetes: boolean;
  /** metadata.generation, named in what is reported so that each edit of the NAD is reported afresh. */
  generation?: number;
  /** Set when the switch is on for an OVN-Kubernetes NAD: why the allocator will not serve it (then no problems). */
  refused?: string;
}

/** "NetworkAttachmentDefinition ns/name (generation 3)": the object and the version of it a message is about. */
const describeNad = (n: Pick<AllocatorNad, 'key' | 'generation'>): string =>
  `NetworkAttachmentDefinition ${n.key}${n.generation !== undefined ? ` (generation ${n.generation})` : ''}`;

function annotation(nad: NetworkAttachmentDefinition, key: string): string | undefined {
  const value: unknown = nad?.metadata?.annotations?.[key];
  return typeof value === 'string' ? value : undefined;
}

/** Reads one NAD. Never throws. */
export function readAllocatorNad(nad: NetworkAttachmentDefinition): AllocatorNad {
  const config = parseNadConfig(nad);
  const switchValue = annotation(nad, ALLOCATOR_ANNOTATION);
  const enabled = isAllocatorNad(nad);
  const generation: unknown = nad?.metadata?.generation;
  const result: AllocatorNad = {
    key: keyString(nad.metadata),
    enabled,
    network: config.networkName,
    problems: [],
    warnings: [],
    ovnKubernetes: isOvnKubernetes(config),
    ...(typeof generation === 'number' ? { generation } : {}),
  };
  if (switchValue !== undefined && !enabled && switchValue.trim().toLowerCase() !== 'false' && switchValue.trim() !== '') {
    result.problems.push(`annotation ${ALLOCATOR_ANNOTATION} must be "true" or "false", got "${switchValue}"`);
    return result;
  }
  if (!enabled) return result;
  if (result.ovnKubernetes) {
    // The pool does not matter: nothing is allocated here whatever it says, so only the refusal is reported.
    result.refused =
      `${describeNad(result)} has CNI type "${OVN_K8S_CNI_TYPE}" and sets ${ALLOCATOR_ANNOTATION}: "true", but ` +
      `OVN-Kubernetes records the addresses of its claims in status.ips itself; two writers could hand one address ` +
      `out twice, so the built-in allocator does not serve network "${result.network ?? '(unnamed)'}" (no claim ` +
      `status written, no "ips" on launcher pods). Remove the annotation: OVN-Kubernetes keeps the VMs' addresses ` +
      `by itself.`;
    return result;
  }

  const unreadable = config.problems.filter((p) => p.field === undefined || p.field === 'subnets' || p.field === 'excludeSubnets');
  for (const p of unreadable) result.problems.push(p.message);
  if (result.network === undefined && unreadable.length === 0) {
    result.problems.push('the config has no network "name", which identifies the pool and every claim of the network');
  }
  if (!config.allowPersistentIPs) {
    result.problems.push(
      `the allocator is switched on but the NAD does not allow persistent IPs, so its VMs get no IPAMClaim: ` +
        `add "allowPersistentIPs": true to the config or the annotation ${NAD_PERSISTENT_IPS_ANNOTATION}: "true"`,
    );
  }
  // Each pool key is read from its annotation when set, else from the config.
  const subnetsAnnotation = annotation(nad, SUBNETS_ANNOTATION);
  const parsed = parsePool({
    subnets: subnetsAnnotation ?? config.subnets.join(','),
    excludeSubnets: annotation(nad, EXCLUDE_SUBNETS_ANNOTATION) ?? config.excludeSubnets.join(','),
    topology: config.topology,
  });
  if (parsed.ok) {
    result.pool = parsed.pool;
    result.warnings.push(...parsed.pool.warnings);
  } else {
    const where = subnetsAnnotation !== undefined ? `annotation ${SUBNETS_ANNOTATION}` : 'config key "subnets"';
    for (const p of parsed.problems) result.problems.push(p.code === 'NoSubnets' ? noSubnets(where) : p.message);
    result.warnings.push(...parsed.warnings);
  }
  return result;
}

function noSubnets(where: string): string {
  return `no pool: set ${SUBNETS_ANNOTATION} (or "subnets" in the config), e.g. "192.0.2.0/24,fd00:10::/64" (looked at the ${where})`;
}

/** The state of one network, from every NAD (any namespace) whose config `name` is the network. */
export type NetworkState =
  /** No NAD of the network opts in: the allocator leaves it alone. */
  | { kind: 'unmanaged'; network: string }
  /** At least one NAD opts in, but something is wrong: problems by NAD key, for Events. No new allocations. */
  | { kind: 'invalid'; network: string; problems: Map<string, string[]>; nads: AllocatorNad[] }
  /**
   * At least one NAD opts in, but OVN-Kubernetes writes the network's claim statuses: no write at all. Why, by key
   * of each NAD that sets the switch.
   */
  | { kind: 'refused'; network: string; refusals: Map<string, string>; nads: AllocatorNad[] }
  | { kind: 'ready'; network: string; pool: Pool; nads: AllocatorNad[]; warnings: Map<string, string[]> };

/** Combines the NADs of one network (callers pass those whose config `name` is `network`). */
export function resolveNetwork(network: string, nads: readonly NetworkAttachmentDefinition[]): NetworkState {
  const read = nads
    .map(readAllocatorNad)
    .filter((n) => n.network === network)
    .sort((a, b) => cmp(a.key, b.key));
  const enabled = read.filter((n) => n.enabled);
  if (enabled.length === 0) return { kind: 'unmanaged', network };

  // Before any other check: what else is wrong does not matter when the network is not ours to serve.
  const ovn = read.filter((n) => n.ovnKubernetes);
  if (ovn.length > 0) {
    const refusals = new Map<string, string>();
    const owners = ovn.map((n) => n.key).join(', ');
    for (const n of enabled) {
      refusals.set(
        n.key,
        n.refused ??
          `${describeNad(n)} sets ${ALLOCATOR_ANNOTATION}: "true", but network "${network}" is OVN-Kubernetes' too ` +
            `(${owners} ${ovn.length === 1 ? 'has' : 'have'} CNI type "${OVN_K8S_CNI_TYPE}"), which records the ` +
            `addresses of the network's claims in status.ips itself; two writers could hand one address out twice, ` +
            `so the built-in allocator does not serve the network. Remove the annotation, or give this NAD's network ` +
            `a name of its own.`,
      );
    }
    return { kind: 'refused', network, refusals, nads: read };
  }

  const problems = new Map<string, string[]>();
  const add = (key: string, message: string) => problems.set(key, [...(problems.get(key) ?? []), message]);
  for (const n of read) for (const p of n.problems) add(n.key, p);

  const off = read.filter((n) => !n.enabled);
  if (off.length > 0) {
    const message =
      `network "${network}" is served by the allocator (${enabled.map((n) => n.key).join(', ')}) but ` +
      `${off.map((n) => n.key).join(', ')} ${off.length === 1 ? 'does' : 'do'} not set ${ALLOCATOR_ANNOTATION}: "true"; ` +
      `every NAD of a network must agree, so no new address is handed out until they do`;
    for (const n of read) add(n.key, message);
  }
  const pools = Map.groupBy(
    enabled.filter((n) => n.pool),
    (n) => n.pool!.canonical,
  );
  if (pools.size > 1) {
    const described = [...pools].map(([canonical, same]) => `${same.map((n) => n.key).join(', ')}: ${canonical}`).join('; ');
    const message = `the NADs of network "${network}" declare different pools (${described}); no new address is handed out until they agree`;
    for (const n of enabled) add(n.key, message);
  }
  if (problems.size > 0) return { kind: 'invalid', network, problems, nads: read };
  const warnings = new Map<string, string[]>();
  for (const n of enabled) if (n.warnings.length > 0) warnings.set(n.key, n.warnings);
  return { kind: 'ready', network, pool: enabled[0]!.pool!, nads: read, warnings };
}
