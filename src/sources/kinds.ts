// The kinds this project watches, their trims and the indexes the controller looks things up by, and the binding of
// informers to the real API client.

import type { Logger } from 'pino';
import { VM_LABEL } from '../claims/constants.ts';
import { parseNadReference } from '../claims/nad-reference.ts';
import type { KubeClient } from '../kube/client.ts';
import { type ResourceDescriptor, resources } from '../kube/resources.ts';
import type {
  IPAMClaim,
  KubeObject,
  KubeVirtCR,
  NetworkAttachmentDefinition,
  Pod,
  VirtualMachine,
  VirtualMachineInstance,
  VmiSpecLike,
} from '../kube/types.ts';
import type { Clock } from '../kube/clock.ts';
import { Informer, type InformerMetrics, type InformerOptions, type ListWatch } from './informer.ts';
import { keyOf } from './store.ts';
import {
  type Trim,
  trimIPAMClaim,
  trimKubeVirt,
  trimNetworkAttachmentDefinition,
  trimPod,
  trimVirtualMachine,
  trimVirtualMachineInstance,
} from './trim.ts';

export interface KindSpec<T extends KubeObject> {
  descriptor: ResourceDescriptor;
  trim: Trim<T>;
}

export const kinds = {
  virtualMachines: { descriptor: resources.virtualMachines, trim: trimVirtualMachine } as KindSpec<VirtualMachine>,
  virtualMachineInstances: { descriptor: resources.virtualMachineInstances, trim: trimVirtualMachineInstance } as KindSpec<VirtualMachineInstance>,
  networkAttachmentDefinitions: { descriptor: resources.networkAttachmentDefinitions, trim: trimNetworkAttachmentDefinition } as KindSpec<NetworkAttachmentDefinition>,
  ipamClaims: { descriptor: resources.ipamClaims, trim: trimIPAMClaim } as KindSpec<IPAMClaim>,
  kubeVirts: { descriptor: resources.kubeVirts, trim: trimKubeVirt } as KindSpec<KubeVirtCR>,
  pods: { descriptor: resources.pods, trim: trimPod } as KindSpec<Pod>,
};

// ---------------------------------------------------------------------------------------------------------------
// Indexes. Values are namespaced (`namespace/name`) wherever a name alone would be ambiguous across namespaces.

/** Claims by the VM named in their `kubevirt.io/vm` label: value `namespace/vmName`. */
export const CLAIMS_BY_VM = 'claimsByVm';
/** Claims by the uid of each owner reference: value `uid`. */
export const CLAIMS_BY_OWNER_UID = 'claimsByOwnerUid';
/** VMs by the NADs their template references: value `namespace/nadName`. */
export const VMS_BY_NAD = 'vmsByNad';
/** VMIs by the NADs their spec references: value `namespace/nadName`. */
export const VMIS_BY_NAD = 'vmisByNad';

export const claimsByVm = (c: IPAMClaim): string[] => {
  const vm = c.metadata.labels?.[VM_LABEL];
  return vm ? [keyOf(c.metadata.namespace, vm)] : [];
};

export const claimsByOwnerUid = (c: IPAMClaim): string[] => (c.metadata.ownerReferences ?? []).map((o) => o.uid);

/**
 * `networkName` is `name` (the object's namespace) or `namespace/name`. Whatever cannot be a reference is skipped
 * here; reporting it is the controller's business.
 */
export function nadKeysOf(namespace: string | undefined, spec: VmiSpecLike | undefined): string[] {
  const out = new Set<string>();
  for (const net of spec?.networks ?? []) {
    const ref = parseNadReference(net.multus?.networkName, namespace);
    if (ref) out.add(keyOf(ref.namespace, ref.name));
  }
  return [...out];
}

export const vmsByNad = (vm: VirtualMachine): string[] => nadKeysOf(vm.metadata.namespace, vm.spec?.template?.spec);
export const vmisByNad = (vmi: VirtualMachineInstance): string[] => nadKeysOf(vmi.metadata.namespace, vmi.spec);

// ---------------------------------------------------------------------------------------------------------------
// Binding to the API

export interface Scope {
  /** Watch one namespace; undefined = all namespaces. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export function clientListWatch(client: KubeClient, descriptor: ResourceDescriptor, scope: Scope = {}): ListWatch {
  return {
    list: (req) =>
      client.list<unknown>(descriptor, {
        namespace: scope.namespace,
        labelSelector: scope.labelSelector,
        fieldSelector: scope.fieldSelector,
        limit: req.limit,
        continue: req.continue,
        signal: req.signal,
      }),
    watch: (req) =>
      client.watch(descriptor, {
        namespace: scope.namespace,
        labelSelector: scope.labelSelector,
        fieldSelector: scope.fieldSelector,
        resourceVersion: req.resourceVersion,
        timeoutSeconds: req.timeoutSeconds,
        allowWatchBookmarks: req.allowWatchBookmarks,
        signal: req.signal,
      }),
  };
}

export type CommonInformerOptions = Pick<
  InformerOptions<KubeObject>,
  'logger' | 'clock' | 'random' | 'pageSize' | 'backoff' | 'silentWatchTimeoutMs' | 'watchTimeoutSeconds' | 'metrics'
>;

export function createInformer<T extends KubeObject>(client: KubeClient, spec: KindSpec<T>, scope: Scope = {}, options: CommonInformerOptions = {}): Informer<T> {
  return new Informer<T>({
    ...options,
    kind: spec.descriptor.kind,
    namespace: scope.namespace,
    listWatch: clientListWatch(client, spec.descriptor, scope),
    trim: spec.trim,
  });
}

export interface SourcesOptions {
  /** Restrict VMs, VMIs, NADs and claims to one namespace; undefined = all namespaces. */
  namespace?: string;
  /** Where the KubeVirt CR is looked for; undefined = all namespaces (it lives in `kubevirt` by convention). */
  kubeVirtNamespace?: string;
  logger?: Logger;
  clock?: Clock;
  random?: () => number;
  metrics?: InformerMetrics;
  silentWatchTimeoutMs?: number;
}

export interface Sources {
  vms: Informer<VirtualMachine>;
  vmis: Informer<VirtualMachineInstance>;
  nads: Informer<NetworkAttachmentDefinition>;
  claims: Informer<IPAMClaim>;
  kubeVirts: Informer<KubeVirtCR>;
  all: readonly Informer<KubeObject>[];
  start(): void;
  /** Resolves when every informer has its first list. */
  synced(): Promise<void>;
  stop(): Promise<void>;
}

/** The informers the controller needs, with the indexes it looks things up by. Call start() after subscribing. */
export function createSources(client: KubeClient, options: SourcesOptions = {}): Sources {
  const common: CommonInformerOptions = {
    logger: options.logger,
    clock: options.clock,
    random: options.random,
    metrics: options.metrics,
    silentWatchTimeoutMs: options.silentWatchTimeoutMs,
  };
  const ns: Scope = { namespace: options.namespace };
  const vms = createInformer(client, kinds.virtualMachines, ns, common);
  const vmis = createInformer(client, kinds.virtualMachineInstances, ns, common);
  const nads = createInformer(client, kinds.networkAttachmentDefinitions, ns, common);
  const claims = createInformer(client, kinds.ipamClaims, ns, common);
  const kubeVirts = createInformer(client, kinds.kubeVirts, { namespace: options.kubeVirtNamespace }, common);
  vms.addIndex(VMS_BY_NAD, vmsByNad);
  vmis.addIndex(VMIS_BY_NAD, vmisByNad);
  claims.addIndex(CLAIMS_BY_VM, claimsByVm);
  claims.addIndex(CLAIMS_BY_OWNER_UID, claimsByOwnerUid);
  const all = [vms, vmis, nads, claims, kubeVirts] as unknown as readonly Informer<KubeObject>[];
  return {
    vms,
    vmis,
    nads,
    claims,
    kubeVirts,
    all,
    start: () => {
      for (const i of all) i.start();
    },
    synced: async () => {
      await Promise.all(all.map((i) => i.synced));
    },
    stop: async () => {
      await Promise.all(all.map((i) => i.stop()));
    },
  };
}
