// Where each kind lives in the API. One table, so that watches, writes, RBAC and tests agree on the same paths.

export interface ResourceDescriptor {
  group: string; // '' for the core group
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const resources = {
  virtualMachines: { group: 'kubevirt.io', version: 'v1', plural: 'virtualmachines', kind: 'VirtualMachine', namespaced: true },
  virtualMachineInstances: { group: 'kubevirt.io', version: 'v1', plural: 'virtualmachineinstances', kind: 'VirtualMachineInstance', namespaced: true },
  kubeVirts: { group: 'kubevirt.io', version: 'v1', plural: 'kubevirts', kind: 'KubeVirt', namespaced: true },
  networkAttachmentDefinitions: {
    group: 'k8s.cni.cncf.io',
    version: 'v1',
    plural: 'network-attachment-definitions',
    kind: 'NetworkAttachmentDefinition',
    namespaced: true,
  },
  ipamClaims: { group: 'k8s.cni.cncf.io', version: 'v1alpha1', plural: 'ipamclaims', kind: 'IPAMClaim', namespaced: true },
  pods: { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true },
  events: { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true },
  leases: { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease', namespaced: true },
} as const satisfies Record<string, ResourceDescriptor>;

export function apiVersionOf(r: ResourceDescriptor): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}

/** The REST path of a collection (or of one object when `name` is given). */
export function resourcePath(r: ResourceDescriptor, namespace?: string, name?: string): string {
  const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const tail = name === undefined ? '' : `/${encodeURIComponent(name)}`;
  return `${base}${ns}/${r.plural}${tail}`;
}
