// Names shared with kubevirt/ipam-extensions on purpose: a cluster can switch between the two without orphaning
// claims, because both recognise the same finalizer, label and claim names.

export const CLAIM_FINALIZER = 'kubevirt.io/persistent-ipam';
export const VM_LABEL = 'kubevirt.io/vm';
export const KUBEVIRT_VM_FINALIZER = 'kubevirt.io/virtualMachineControllerFinalize';
export const FEATURE_GATE = 'PersistentIPs';
/** The claim condition through which the IPAM plugin (OVN-Kubernetes, the built-in allocator) says how allocation went. */
export const IPS_ALLOCATED_CONDITION = 'IPsAllocated';

/** Opt-in for CNIs whose config cannot carry `allowPersistentIPs` (value "true"). */
export const NAD_PERSISTENT_IPS_ANNOTATION = 'persistent-ips.kubevirt.io/allow-persistent-ips';

/** The built-in allocator's switch on a NAD, and the pool it allocates from (docs/allocator.md). */
export const ALLOCATOR_ANNOTATION = 'persistent-ips.kubevirt.io/allocator';
export const SUBNETS_ANNOTATION = 'persistent-ips.kubevirt.io/subnets';
export const EXCLUDE_SUBNETS_ANNOTATION = 'persistent-ips.kubevirt.io/exclude-subnets';
/** KubeVirt's VMI (and VM template) annotation asking for specific addresses: JSON, interface name → addresses. */
export const ADDRESSES_ANNOTATION = 'network.kubevirt.io/addresses';

export const MULTUS_NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
export const MULTUS_DEFAULT_NETWORK_ANNOTATION = 'v1.multus-cni.io/default-network';
/** The pod annotation through which OVN-Kubernetes (all releases; the only way before December 2025) finds a primary UDN's claim. */
export const OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION = 'k8s.ovn.org/primary-udn-ipamclaim';
export const LAUNCHER_LABEL = 'kubevirt.io';
export const LAUNCHER_LABEL_VALUE = 'virt-launcher';
/** KubeVirt's label on a launcher pod naming the uid of the VMI that created it. */
export const CREATED_BY_LABEL = 'kubevirt.io/created-by';
export const DOMAIN_ANNOTATION = 'kubevirt.io/domain';
