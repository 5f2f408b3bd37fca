// Thin API layer of the KubeVirt stand-in (test infrastructure, see standin.ts): typed reads and guarded writes of
// VirtualMachines, VirtualMachineInstances and launcher pods through @kubernetes/client-node. Every read goes to
// the API server (no cache), so that a decision is never taken on a stale copy; every write that depends on what
// was read carries a precondition (a JSON-patch `test` of metadata.resourceVersion, or a delete precondition on
// the UID), so that a race turns into a Conflict and a retry, never into a lost update.
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import { resources, type ResourceDescriptor } from '../../src/kube/resources.ts';
import type { VirtualMachine, VirtualMachineInstance } from '../../src/kube/types.ts';

/** One operation of an RFC 6902 JSON patch. */
export type JsonPatchOp =
  | { op: 'test' | 'add' | 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string };

/** What the stand-in keeps of an API error. */
export interface ApiErrorInfo {
  code: number;
  reason: string;
  message: string;
}

/** The HTTP status, Status reason and message of an error thrown by client-node (code 0 for other errors). */
export function apiError(err: unknown): ApiErrorInfo {
  const e = err as { code?: unknown; body?: unknown; message?: unknown };
  const code = typeof e?.code === 'number' ? e.code : 0;
  let reason = '';
  let message = typeof e?.message === 'string' ? e.message : String(err);
  const body = parseBody(err);
  if (body && typeof body === 'object') {
    const b = body as { reason?: unknown; message?: unknown };
    if (typeof b.reason === 'string') reason = b.reason;
    if (typeof b.message === 'string') message = b.message;
  }
  return { code, reason, message };
}

export const isNotFound = (err: unknown): boolean => apiError(err).code === 404;
export const isAlreadyExists = (err: unknown): boolean => apiError(err).code === 409 && apiError(err).reason === 'AlreadyExists';

/**
 * A lost race: a Conflict (409), or a JSON patch the server could not apply (422 with the generic "error in our
 * request" message and no field details: what a failed resourceVersion `test` gives), or a UID precondition
 * that no longer holds. The caller re-reads and decides again. (A 422 with field details is a real validation
 * error and is not a conflict.)
 */
export function isConflict(err: unknown): boolean {
  const { code, reason, message } = apiError(err);
  if (code === 409 && reason !== 'AlreadyExists') return true;
  if (code !== 422) return false;
  const details = (parseBody(err) as { details?: { causes?: unknown[] } } | undefined)?.details;
  return !details?.causes?.length && /test|error in our request/i.test(message);
}

function parseBody(err: unknown): unknown {
  const body = (err as { body?: unknown })?.body;
  if (typeof body !== 'string') return body;
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** The patch operations that make a write conditional on the object being exactly the version that was read. */
export function rvTest(obj: { metadata: { resourceVersion?: string } }): JsonPatchOp[] {
  const rv = obj.metadata.resourceVersion;
  if (!rv) throw new Error('object without metadata.resourceVersion: cannot guard the write');
  return [{ op: 'test', path: '/metadata/resourceVersion', value: rv }];
}

export type PropagationPolicy = 'Foreground' | 'Background' | 'Orphan';

/** Reads and writes one custom kind (VMs or VMIs), with or without a status subresource. */
class CustomKindClient<T extends { metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string } }> {
  readonly #api: CustomObjectsApi;
  readonly #desc: ResourceDescriptor;
  /** Whether the CRD serves `<plural>/status`; decided by discovery at start (see KubeApi.discover). */
  statusSubresource = true;

  constructor(api: CustomObjectsApi, desc: ResourceDescriptor) {
    this.#api = api;
    this.#desc = desc;
  }

  #base(namespace: string) {
    return { group: this.#desc.group, version: this.#desc.version, plural: this.#desc.plural, namespace };
  }

  async get(namespace: string, name: string): Promise<T | undefined> {
    try {
      return (await this.#api.getNamespacedCustomObject({ ...this.#base(namespace), name })) as T;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(namespace?: string): Promise<T[]> {
    const g = { group: this.#desc.group, version: this.#desc.version };
    const res = (namespace
      ? await this.#api.listNamespacedCustomObject({ ...g, plural: this.#desc.plural, namespace })
      : await this.#api.listCustomObjectForAllNamespaces({ ...g, resourcePlural: this.#desc.plural })) as { items?: T[] };
    return res.items ?? [];
  }

  async create(namespace: string, body: T): Promise<T> {
    return (await this.#api.createNamespacedCustomObject({ ...this.#base(namespace), body })) as T;
  }

  async patch(namespace: string, name: string, ops: JsonPatchOp[]): Promise<T> {
    return (await this.#api.patchNamespacedCustomObject({ ...this.#base(namespace), name, body: ops }, jsonPatch)) as T;
  }

  /** Patches status: through the status subresource when the CRD has one, else through the object itself. */
  async patchStatus(namespace: string, name: string, ops: JsonPatchOp[]): Promise<T> {
    if (!this.statusSubresource) return this.patch(namespace, name, ops);
    return (await this.#api.patchNamespacedCustomObjectStatus({ ...this.#base(namespace), name, body: ops }, jsonPatch)) as T;
  }

  /** Deletes the object if it is still the one with `uid` (when given). Returns false when it was already gone. */
  async delete(namespace: string, name: string, opts: { uid?: string; propagationPolicy?: PropagationPolicy } = {}): Promise<boolean> {
    try {
      await this.#api.deleteNamespacedCustomObject({
        ...this.#base(namespace),
        name,
        ...(opts.propagationPolicy ? { propagationPolicy: opts.propagationPolicy } : {}),
        body: {
          ...(opts.uid ? { preconditions: { uid: opts.uid } } : {}),
          ...(opts.propagationPolicy ? { propagationPolicy: opts.propagationPolicy } : {}),
        },
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      if (opts.uid && apiError(err).code === 409) return false; // another object of that name now: not ours
      throw err;
    }
  }
}

/** The stand-in's access to the API server. */
export class KubeApi {
  readonly kc: KubeConfig;
  readonly vms: CustomKindClient<VirtualMachine>;
  readonly vmis: CustomKindClient<VirtualMachineInstance>;
  readonly #core: CoreV1Api;
  readonly #custom: CustomObjectsApi;
  #discovered: Promise<void> | undefined;

  constructor(kc: KubeConfig) {
    this.kc = kc;
    this.#custom = kc.makeApiClient(CustomObjectsApi);
    this.#core = kc.makeApiClient(CoreV1Api);
    this.vms = new CustomKindClient<VirtualMachine>(this.#custom, resources.virtualMachines);
    this.vmis = new CustomKindClient<VirtualMachineInstance>(this.#custom, resources.virtualMachineInstances);
  }

  static fromFile(kubeconfigPath: string): KubeApi {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigPath);
    return new KubeApi(kc);
  }

  /**
   * Looks up which of the KubeVirt kinds serve a status subresource. KubeVirt's own VirtualMachine CRD has one and
   * its VirtualMachineInstance CRD does not (virt-controller and virt-handler write VMI status with ordinary
   * updates); the test CRDs of this project may differ, so the stand-in adapts instead of assuming.
   * Throws when the kubevirt.io/v1 API is not served (CRDs not installed). Done once; later calls share it.
   */
  discover(): Promise<void> {
    this.#discovered ??= this.#discover().catch((err: unknown) => {
      this.#discovered = undefined;
      throw err;
    });
    return this.#discovered;
  }

  async #discover(): Promise<void> {
    const list = await this.#custom.getAPIResources({ group: 'kubevirt.io', version: 'v1' });
    const names = new Set((list.resources ?? []).map((r) => r.name));
    for (const [client, plural] of [
      [this.vms, resources.virtualMachines.plural],
      [this.vmis, resources.virtualMachineInstances.plural],
    ] as const) {
      if (!names.has(plural)) throw new Error(`kubevirt.io/v1 ${plural} is not served: are the CRDs installed?`);
      client.statusSubresource = names.has(`${plural}/status`);
    }
  }

  async listPods(namespace: string, labelSelector: string): Promise<V1Pod[]> {
    const res = await this.#core.listNamespacedPod({ namespace, labelSelector });
    return res.items ?? [];
  }

  async getPod(namespace: string, name: string): Promise<V1Pod | undefined> {
    try {
      return await this.#core.readNamespacedPod({ namespace, name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async createPod(namespace: string, pod: V1Pod): Promise<V1Pod> {
    return this.#core.createNamespacedPod({ namespace, body: pod });
  }

  /** Deletes the pod if it is still the one with `uid`. Returns false when it was already gone. */
  async deletePod(namespace: string, name: string, uid: string): Promise<boolean> {
    try {
      await this.#core.deleteNamespacedPod({ namespace, name, body: { preconditions: { uid } } });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      if (apiError(err).code === 409) return false;
      throw err;
    }
  }
}
