// The kinds this project watches, their trims, and the binding of informers to the real API client (indexes.ts
// registers the indexes).

import type { Logger } from 'pino';
import type { KubeClient, Selection } from '../kube/client.ts';
import { type ResourceDescriptor, resources } from '../kube/resources.ts';
import type { IPAMClaim, KubeObject, KubeVirtCR, NetworkAttachmentDefinition, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import type { Clock } from '../kube/clock.ts';
import { Informer, type InformerOptions, type ListWatch } from './informer.ts';
import { registerIndexes } from './indexes.ts';
import { type Trim, trimIPAMClaim, trimKubeVirt, trimNetworkAttachmentDefinition, trimVirtualMachine, trimVirtualMachineInstance } from './trim.ts';

export interface KindSpec<T extends KubeObject> {
  descriptor: ResourceDescriptor;
  trim: Trim<T>;
}

const kind = <T extends KubeObject>(descriptor: ResourceDescriptor, trim: Trim<T>): KindSpec<T> => ({ descriptor, trim });

export const kinds = {
  virtualMachines: kind(resources.virtualMachines, trimVirtualMachine),
  virtualMachineInstances: kind(resources.virtualMachineInstances, trimVirtualMachineInstance),
  networkAttachmentDefinitions: kind(resources.networkAttachmentDefinitions, trimNetworkAttachmentDefinition),
  ipamClaims: kind(resources.ipamClaims, trimIPAMClaim),
  kubeVirts: kind(resources.kubeVirts, trimKubeVirt),
};

// ---------------------------------------------------------------------------------------------------------------
// Binding to the API

export function clientListWatch(client: KubeClient, descriptor: ResourceDescriptor, scope: Selection = {}): ListWatch {
  return {
    list: (req) => client.list<unknown>(descriptor, { ...scope, ...req }),
    watch: (req) => client.watch(descriptor, { ...scope, ...req }),
  };
}

export type CommonInformerOptions = Pick<InformerOptions<KubeObject>, 'logger' | 'clock' | 'watchTimeoutSeconds'>;

export function createInformer<T extends KubeObject>(
  client: KubeClient,
  spec: KindSpec<T>,
  scope: Selection = {},
  options: CommonInformerOptions = {},
): Informer<T> {
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
  logger?: Logger;
  clock?: Clock;
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
  const { namespace, ...common } = options;
  const ns: Selection = { namespace };
  const vms = createInformer(client, kinds.virtualMachines, ns, common);
  const vmis = createInformer(client, kinds.virtualMachineInstances, ns, common);
  const nads = createInformer(client, kinds.networkAttachmentDefinitions, ns, common);
  const claims = createInformer(client, kinds.ipamClaims, ns, common);
  // The KubeVirt CR is looked for in every namespace (it lives in `kubevirt` by convention).
  const kubeVirts = createInformer(client, kinds.kubeVirts, {}, common);
  registerIndexes({ vms, vmis, nads, claims }, 'shared');
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
