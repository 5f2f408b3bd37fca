// The few fields of each Kubernetes object this project reads or writes. Objects in caches are trimmed to these
// shapes (see src/sources), so anything not listed here is not available to the controller.

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

/** A KubeVirt network: exactly one of `multus` or `pod` is set. */
export interface VmNetwork {
  name: string;
  multus?: { networkName: string; default?: boolean };
  pod?: Record<string, unknown>;
}

export interface VmInterface {
  name: string;
  /** `absent` asks KubeVirt to hot-unplug the interface. */
  state?: string;
  macAddress?: string;
  bridge?: Record<string, unknown>;
  masquerade?: Record<string, unknown>;
  sriov?: Record<string, unknown>;
  binding?: { name: string };
}

export interface VmiSpecLike {
  networks?: VmNetwork[];
  /** `autoattachPodInterface: false` keeps KubeVirt from adding the pod network to a spec with no networks. */
  domain?: { devices?: { interfaces?: VmInterface[]; autoattachPodInterface?: boolean } };
}

export interface VirtualMachine extends KubeObject {
  spec?: {
    running?: boolean;
    runStrategy?: string;
    template?: { metadata?: Partial<ObjectMeta>; spec?: VmiSpecLike };
  };
  status?: { printableStatus?: string; ready?: boolean };
}

export interface VirtualMachineInstance extends KubeObject {
  spec?: VmiSpecLike;
  status?: {
    phase?: string;
    /** pod UID → node name, for every launcher pod of this VMI that is alive. */
    activePods?: Record<string, string>;
    interfaces?: { name?: string; ipAddress?: string; ipAddresses?: string[]; interfaceName?: string }[];
    migrationState?: Record<string, unknown>;
  };
}

export interface NetworkAttachmentDefinition extends KubeObject {
  spec?: { config?: string };
}

export interface IPAMClaimCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface IPAMClaim extends KubeObject {
  spec: { network: string; interface: string };
  status?: {
    ips?: string[];
    ownerPod?: { name: string };
    conditions?: IPAMClaimCondition[];
  };
}

export interface KubeVirtCR extends KubeObject {
  spec?: { configuration?: { developerConfiguration?: { featureGates?: string[] } } };
}

export interface Pod extends KubeObject {
  spec?: { nodeName?: string; containers?: { name: string; image?: string }[] };
  status?: { phase?: string };
}

/** An element of the `k8s.v1.cni.cncf.io/networks` annotation (Network Plumbing WG multi-net spec v1.3). */
export interface NetworkSelectionElement {
  name: string;
  namespace?: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  'ipam-claim-reference'?: string;
  [key: string]: unknown;
}
