// What a NetworkAttachmentDefinition says about persistent IPs. NAD configs are written by hand by network admins
// and read by several CNIs, each with its own tolerance, so this parser accepts anything and reports what it could
// not use instead of throwing: one broken NAD must never stop the controller from serving the others.

import type { NetworkAttachmentDefinition } from '../kube/types.ts';
import { splitList } from '../ip/pool.ts';
import { ALLOCATOR_ANNOTATION, NAD_PERSISTENT_IPS_ANNOTATION } from './constants.ts';

export const OVN_K8S_CNI_TYPE = 'ovn-k8s-cni-overlay';

export interface NadConfigProblem {
  reason: 'InvalidNetworkConfig';
  message: string;
  /**
   * The config key the problem is about. Absent when the document as a whole is unusable (missing, empty, not JSON,
   * not an object, malformed `plugins`), which matters for every user of the NAD; a bad key only matters to users
   * that rely on it.
   */
  field?: string;
}

export interface NadConfig {
  /** The CNI network name (`name` of the config or conflist): what an IPAMClaim's `spec.network` must hold. */
  networkName?: string;
  /** `allowPersistentIPs: true` in the config, or the opt-in annotation set to "true". */
  allowPersistentIPs: boolean;
  role?: string;
  topology?: string;
  /** Entries of the comma-separated `subnets`, trimmed, empties dropped, otherwise as written (OVN's `a/16/24` too). */
  subnets: string[];
  excludeSubnets: string[];
  type?: string;
  problems: NadConfigProblem[];
}

type JsonObject = Record<string, unknown>;

/** A JSON object: not null, not an array. */
export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function emptyConfig(): NadConfig {
  return { allowPersistentIPs: false, subnets: [], excludeSubnets: [], problems: [] };
}

// Every reconcile and admission reads the NADs of its namespace; parsing their JSON each time was a measurable
// share of a cold start's CPU and garbage. A cached NAD is replaced, never mutated, when it changes, so the object
// itself keys the parse, and the entry goes with the object.
const parsedByNad = new WeakMap<object, Readonly<NadConfig>>();

/**
 * Parses `spec.config` and the opt-in annotation of a NAD. Never throws, whatever the object holds. The result is
 * shared by every caller that passes the same object, and frozen so that none can change it for the others.
 */
export function parseNadConfig(nad: NetworkAttachmentDefinition): Readonly<NadConfig> {
  const known = typeof nad === 'object' && nad !== null ? parsedByNad.get(nad) : undefined;
  if (known) return known;
  const parsed = parseCniConfig((nad as { spec?: { config?: unknown } } | undefined)?.spec?.config);
  const annotations: unknown = nad?.metadata?.annotations;
  if (isObject(annotations) && annotations[NAD_PERSISTENT_IPS_ANNOTATION] === 'true') {
    parsed.allowPersistentIPs = true;
  }
  Object.freeze(parsed.subnets);
  Object.freeze(parsed.excludeSubnets);
  Object.freeze(parsed.problems);
  parsed.problems.forEach(Object.freeze);
  Object.freeze(parsed);
  if (typeof nad === 'object' && nad !== null) parsedByNad.set(nad, parsed);
  return parsed;
}

/** Parses a CNI config or conflist given as the JSON text Multus stores in `spec.config`. Never throws. */
export function parseCniConfig(text: unknown): NadConfig {
  const result = emptyConfig();
  const fail = (message: string): NadConfig => {
    result.problems.push({ reason: 'InvalidNetworkConfig', message });
    return result;
  };

  if (text === undefined || text === null) return fail('the NetworkAttachmentDefinition has no spec.config');
  if (typeof text !== 'string') return fail('spec.config is not a string');
  if (text.trim() === '') return fail('spec.config is empty');

  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return fail(`spec.config is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isObject(doc)) return fail('spec.config is not a JSON object');

  // A conflist keeps its plugin keys inside `plugins[]`; a flat config is its own only "plugin". Either way the
  // top level is searched first, then each plugin in order, and the first place that defines a key wins.
  const sources: JsonObject[] = [doc];
  if (Object.hasOwn(doc, 'plugins')) {
    const plugins = doc['plugins'];
    if (!Array.isArray(plugins)) {
      fail('"plugins" is not an array');
    } else {
      plugins.forEach((plugin: unknown, i) => {
        if (isObject(plugin)) sources.push(plugin);
        else fail(`plugins[${i}] is not a JSON object`);
      });
    }
  }

  const lookup = (key: string): unknown => {
    for (const source of sources) {
      if (Object.hasOwn(source, key) && source[key] !== undefined) return source[key];
    }
    return undefined;
  };
  const badField = (field: string, expected: string): void => {
    result.problems.push({ reason: 'InvalidNetworkConfig', field, message: `"${field}" is not ${expected}` });
  };
  const stringField = (field: string, value: unknown): string | undefined => {
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'string') return value;
    badField(field, 'a string');
    return undefined;
  };
  const listField = (field: string): string[] => {
    const raw = stringField(field, lookup(field));
    return raw === undefined ? [] : splitList(raw);
  };

  // The network name is the config's identity: a plugin's own `name` inside a conflist means nothing to the IPAM side.
  const name = stringField('name', doc['name']);
  if (name !== undefined && name.trim() !== '') result.networkName = name;

  const allow = lookup('allowPersistentIPs');
  if (typeof allow === 'boolean') result.allowPersistentIPs = allow;
  else if (allow !== undefined && allow !== null) badField('allowPersistentIPs', 'a boolean');

  for (const field of ['role', 'topology', 'type'] as const) {
    const value = stringField(field, lookup(field));
    if (value !== undefined) result[field] = value;
  }
  result.subnets = listField('subnets');
  result.excludeSubnets = listField('excludeSubnets');
  return result;
}

/** Whether a parsed NAD belongs to OVN-Kubernetes, whose layer2 networks cannot allocate without subnets. */
export function isOvnKubernetes(config: NadConfig): boolean {
  return config.type === OVN_K8S_CNI_TYPE;
}

/** Whether the built-in allocator's switch is on; cheap (no config parsing), for filters. */
export function isAllocatorNad(nad: NetworkAttachmentDefinition | undefined): boolean {
  const value: unknown = nad?.metadata?.annotations?.[ALLOCATOR_ANNOTATION];
  return typeof value === 'string' && value.trim().toLowerCase() === 'true';
}

/** Whether the built-in allocator serves this NAD itself: the switch is on and the NAD is not OVN-Kubernetes'. */
export function allocatorServes(nad: NetworkAttachmentDefinition | undefined): boolean {
  return nad !== undefined && isAllocatorNad(nad) && !isOvnKubernetes(parseNadConfig(nad));
}
