// What the caches keep of each object: the fields of src/kube/types.ts that the controller reads, nothing else.
// Two reasons. Memory: a VMI as served is tens of kilobytes (managedFields, status, annotations); trimmed it is a
// few hundred bytes. Quiet: an update whose trimmed form did not change is not an event (see store.ts), so status
// churn the controller never reads costs zero reconciles.
//
// Labels are kept only where the controller selects by them (claims: kubevirt.io/vm); annotations only where
// something reads them (the NAD opt-in and the allocator's switch and pool; the addresses a VM asks for).

import {
  NAD_PERSISTENT_IPS_ANNOTATION,
  ADDRESSES_ANNOTATION,
  ALLOCATOR_ANNOTATION,
  EXCLUDE_SUBNETS_ANNOTATION,
  SUBNETS_ANNOTATION,
} from '../claims/constants.ts';
import type {
  IPAMClaim,
  IPAMClaimCondition,
  KubeObject,
  KubeVirtCR,
  NetworkAttachmentDefinition,
  ObjectMeta,
  OwnerReference,
  VirtualMachine,
  VirtualMachineInstance,
  VmiSpecLike,
  VmInterface,
  VmNetwork,
} from '../kube/types.ts';
import { intern, share, shareRecent } from './intern.ts';

/** NAD annotations read by the controller (the opt-in) and by the built-in allocator (its switch and pool). */
const NAD_ANNOTATIONS = [NAD_PERSISTENT_IPS_ANNOTATION, ALLOCATOR_ANNOTATION, SUBNETS_ANNOTATION, EXCLUDE_SUBNETS_ANNOTATION];

export type Trim<T extends KubeObject> = (raw: unknown) => T;

/** Thrown for an object that lacks what every cached object needs (metadata.name). */
export class UntrimmableObjectError extends Error {
  override readonly name: string = 'UntrimmableObjectError';
}

type Raw = Record<string, unknown>;

const rec = (x: unknown): Raw | undefined => (x !== null && typeof x === 'object' && !Array.isArray(x) ? (x as Raw) : undefined);
const str = (x: unknown): string | undefined => (typeof x === 'string' ? x : undefined);
const bool = (x: unknown): boolean | undefined => (typeof x === 'boolean' ? x : undefined);
const num = (x: unknown): number | undefined => (typeof x === 'number' ? x : undefined);
const list = (x: unknown): unknown[] | undefined => (Array.isArray(x) ? x : undefined);

/** Sets `key` only when `value` is defined, so trimmed objects have no `undefined` members to compare or store. */
function put<T extends object, K extends keyof T>(target: T, key: K, value: T[K] | undefined): void {
  if (value !== undefined) target[key] = value;
}

/** A status with nothing kept is left out, as an absent one is. */
const nonEmpty = <T extends object>(out: T): T | undefined => (Object.keys(out).length > 0 ? out : undefined);

function stringList(x: unknown, map: (s: string) => string = (s) => s): string[] | undefined {
  const l = list(x)
    ?.filter((v): v is string => typeof v === 'string')
    .map(map);
  return l && l.length > 0 ? l : undefined;
}

/** Keys are interned (a handful of label and annotation names); values as they came, being mostly unique. */
function pickStrings(x: unknown, keep: (key: string) => boolean): Record<string, string> | undefined {
  const r = rec(x);
  if (!r) return undefined;
  let out: Record<string, string> | undefined;
  for (const [k, v] of Object.entries(r)) {
    if (typeof v === 'string' && keep(k)) (out ??= {})[intern(k)] = v;
  }
  return out;
}

export interface MetaPolicy {
  /** Keep every label (else none). */
  labels?: boolean;
  /** The annotations to keep (else none). */
  annotations?: readonly string[];
  /**
   * Keep creationTimestamp and generation: only where something reads them (the allocator serves claims oldest
   * first and reports the generation of claims and NADs it saw); elsewhere they are 60 bytes per object that no decision uses.
   */
  timestamps?: boolean;
  /** Keep creationTimestamp alone. */
  created?: boolean;
}

export function trimMeta(raw: unknown, policy: MetaPolicy = {}): ObjectMeta {
  const m = rec(raw);
  const name = str(m?.name);
  if (!m || !name) throw new UntrimmableObjectError('object has no metadata.name');
  const out: ObjectMeta = { name };
  put(out, 'namespace', intern(str(m.namespace)));
  put(out, 'uid', str(m.uid));
  put(out, 'resourceVersion', str(m.resourceVersion));
  if (policy.timestamps) put(out, 'generation', num(m.generation));
  if (policy.timestamps || policy.created) put(out, 'creationTimestamp', str(m.creationTimestamp));
  put(out, 'deletionTimestamp', str(m.deletionTimestamp));
  const finalizers = stringList(m.finalizers, intern);
  if (finalizers) out.finalizers = share(finalizers);
  if (policy.labels) {
    const labels = pickStrings(m.labels, () => true);
    if (labels) out.labels = shareRecent(labels);
  }
  const keep = policy.annotations;
  if (keep?.length)
    put(
      out,
      'annotations',
      pickStrings(m.annotations, (k) => keep.includes(k)),
    );
  const owners = compactList(m.ownerReferences, trimOwnerReference);
  if (owners) out.ownerReferences = shareRecent(owners);
  return out;
}

/**
 * The defined results of `trim` over a list, in an array of exactly their number: a filtered array keeps room for
 * more, several times what the element needs, and the cache holds one such list per owner reference.
 */
function compactList<T>(x: unknown, trim: (raw: unknown) => T | undefined): T[] | undefined {
  const mapped = list(x)?.map(trim);
  if (!mapped || mapped.length === 0) return undefined;
  if (!mapped.includes(undefined)) return mapped as T[];
  const kept = mapped.filter((v): v is T => v !== undefined);
  return kept.length > 0 ? kept.map((v) => v) : undefined;
}

function trimOwnerReference(raw: unknown): OwnerReference | undefined {
  const o = rec(raw);
  const apiVersion = intern(str(o?.apiVersion));
  const kind = intern(str(o?.kind));
  const name = str(o?.name);
  const uid = str(o?.uid);
  if (!apiVersion || !kind || !name || !uid) return undefined;
  const controller = bool(o?.controller);
  const blockOwnerDeletion = bool(o?.blockOwnerDeletion);
  // One literal for the usual shape keeps every field inside the object (no separate property store).
  if (controller !== undefined && blockOwnerDeletion !== undefined) return { apiVersion, kind, name, uid, controller, blockOwnerDeletion };
  const out: OwnerReference = { apiVersion, kind, name, uid };
  put(out, 'controller', controller);
  put(out, 'blockOwnerDeletion', blockOwnerDeletion);
  return out;
}

/**
 * A cached object in one literal when it has the usual fields, so they all live inside the object; built field by
 * field, V8 keeps every field past the first in a separate property store, one more allocation per cached object.
 */
function objectOf<T extends KubeObject>(raw: Raw | undefined, metadata: ObjectMeta, spec: unknown, status: unknown): T {
  const apiVersion = intern(str(raw?.apiVersion));
  const kind = intern(str(raw?.kind));
  if (apiVersion !== undefined && kind !== undefined && spec !== undefined) {
    return (status !== undefined ? { apiVersion, kind, metadata, spec, status } : { apiVersion, kind, metadata, spec }) as unknown as T;
  }
  const out: Record<string, unknown> = { metadata };
  put(out, 'apiVersion', apiVersion);
  put(out, 'kind', kind);
  put(out, 'spec', spec);
  put(out, 'status', status);
  return out as unknown as T;
}

/**
 * Binding blocks (bridge, masquerade, pod, …) matter by presence only; their settings stay out of the cache, and
 * every cached one is this same frozen object.
 */
const PRESENT: Record<string, unknown> = Object.freeze({});
const presence = (x: unknown): Record<string, unknown> | undefined => (rec(x) ? PRESENT : undefined);

function trimNetwork(raw: unknown): VmNetwork | undefined {
  const n = rec(raw);
  const name = intern(str(n?.name));
  if (!n || !name) return undefined;
  const out: VmNetwork = { name };
  const multus = rec(n.multus);
  const networkName = intern(str(multus?.networkName));
  if (multus && networkName !== undefined) {
    out.multus = { networkName };
    put(out.multus, 'default', bool(multus.default));
  }
  put(out, 'pod', presence(n.pod));
  return out;
}

function trimInterface(raw: unknown): VmInterface | undefined {
  const i = rec(raw);
  const name = intern(str(i?.name));
  if (!i || !name) return undefined;
  const out: VmInterface = { name };
  put(out, 'state', intern(str(i.state)));
  put(out, 'macAddress', str(i.macAddress));
  put(out, 'bridge', presence(i.bridge));
  put(out, 'masquerade', presence(i.masquerade));
  put(out, 'sriov', presence(i.sriov));
  const binding = intern(str(rec(i.binding)?.name));
  if (binding !== undefined) out.binding = { name: binding };
  return out;
}

export function trimVmiSpec(raw: unknown): VmiSpecLike | undefined {
  const s = rec(raw);
  if (!s) return undefined;
  const out: VmiSpecLike = {};
  const networks = list(s.networks)
    ?.map(trimNetwork)
    .filter((n): n is VmNetwork => n !== undefined);
  if (networks) out.networks = networks;
  const devices = rec(rec(s.domain)?.devices);
  const interfaces = list(devices?.interfaces)
    ?.map(trimInterface)
    .filter((i): i is VmInterface => i !== undefined);
  // Only `false` changes anything (effectiveVmiSpec): the usual absent/true costs no memory.
  const noAutoattach = devices?.autoattachPodInterface === false;
  if (interfaces || noAutoattach)
    out.domain = { devices: { ...(interfaces ? { interfaces } : {}), ...(noAutoattach ? { autoattachPodInterface: false } : {}) } };
  return share(out);
}

export const trimVirtualMachine: Trim<VirtualMachine> = (input) => {
  const raw = rec(input);
  const metadata = trimMeta(raw?.metadata);
  const spec = rec(raw?.spec);
  let vmSpec: VirtualMachine['spec'];
  if (spec) {
    const s: NonNullable<VirtualMachine['spec']> = {};
    put(s, 'running', bool(spec.running));
    put(s, 'runStrategy', intern(str(spec.runStrategy)));
    const template = rec(spec.template);
    const templateSpec = trimVmiSpec(template?.spec);
    const requested = str(rec(rec(template?.metadata)?.annotations)?.[ADDRESSES_ANNOTATION]);
    if (templateSpec || requested !== undefined) {
      s.template = {
        ...(requested !== undefined ? { metadata: { annotations: { [ADDRESSES_ANNOTATION]: requested } } } : {}),
        ...(templateSpec ? { spec: templateSpec } : {}),
      };
    }
    vmSpec = s;
  }
  const status = rec(raw?.status);
  const st: NonNullable<VirtualMachine['status']> = {};
  put(st, 'printableStatus', intern(str(status?.printableStatus)));
  put(st, 'ready', bool(status?.ready));
  return objectOf<VirtualMachine>(raw, metadata, vmSpec, nonEmpty(st));
};

export const trimVirtualMachineInstance: Trim<VirtualMachineInstance> = (input) => {
  const raw = rec(input);
  // creationTimestamp: a claim made after its VMI is the one case where the VMI's running pod is read (running-pods.ts).
  const metadata = trimMeta(raw?.metadata, { annotations: [ADDRESSES_ANNOTATION], created: true });
  const status = rec(raw?.status);
  const st: NonNullable<VirtualMachineInstance['status']> = {};
  put(st, 'phase', intern(str(status?.phase)));
  put(
    st,
    'activePods',
    pickStrings(status?.activePods, () => true),
  );
  return objectOf<VirtualMachineInstance>(raw, metadata, trimVmiSpec(raw?.spec), nonEmpty(st));
};

export const trimNetworkAttachmentDefinition: Trim<NetworkAttachmentDefinition> = (input) => {
  const raw = rec(input);
  // The generation: the allocator names it in what it reports about a NAD, once per generation (few NADs, small cost).
  const metadata = trimMeta(raw?.metadata, { annotations: NAD_ANNOTATIONS, timestamps: true });
  const spec = rec(raw?.spec);
  const config = str(spec?.config);
  return objectOf<NetworkAttachmentDefinition>(raw, metadata, spec && (config === undefined ? {} : { config }), undefined);
};

function trimCondition(raw: unknown): IPAMClaimCondition | undefined {
  const c = rec(raw);
  const type = intern(str(c?.type));
  const status = intern(str(c?.status));
  if (!c || !type || status === undefined) return undefined;
  const out: IPAMClaimCondition = { type, status };
  put(out, 'reason', intern(str(c.reason)));
  put(out, 'message', str(c.message));
  put(out, 'lastTransitionTime', str(c.lastTransitionTime));
  put(out, 'observedGeneration', num(c.observedGeneration));
  return out;
}

export const trimIPAMClaim: Trim<IPAMClaim> = (input) => {
  const raw = rec(input);
  const spec = rec(raw?.spec);
  const meta = trimMeta(raw?.metadata, { labels: true, timestamps: true });
  const claimSpec = share({ network: intern(str(spec?.network) ?? ''), interface: intern(str(spec?.interface) ?? '') });
  const status = rec(raw?.status);
  const st: NonNullable<IPAMClaim['status']> = {};
  put(st, 'ips', stringList(status?.ips));
  const ownerPod = str(rec(status?.ownerPod)?.name);
  if (ownerPod !== undefined) st.ownerPod = { name: ownerPod };
  put(st, 'conditions', compactList(status?.conditions, trimCondition));
  return objectOf<IPAMClaim>(raw, meta, claimSpec, nonEmpty(st));
};

export const trimKubeVirt: Trim<KubeVirtCR> = (input) => {
  const raw = rec(input);
  const dev = rec(rec(rec(raw?.spec)?.configuration)?.developerConfiguration);
  const gates = list(dev?.featureGates)?.filter((g): g is string => typeof g === 'string');
  return objectOf<KubeVirtCR>(raw, trimMeta(raw?.metadata), gates ? { configuration: { developerConfiguration: { featureGates: gates } } } : {}, undefined);
};
