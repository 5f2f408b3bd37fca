// OVN-Kubernetes' cluster manager, alone, as the IPAM of OVN-K networks in the end-to-end suites: `ovnkube
// --init-cluster-manager` (built unmodified from the v1.3.0 source by build.sh) against the harness's control plane,
// with interconnect, multi-network, persistent IPs and network segmentation on. In interconnect mode the cluster
// manager is the component that hands out the addresses of layer2 (and localnet-with-subnets) networks, secondary
// and primary user-defined ones: it writes the pod's `k8s.ovn.org/pod-networks` entry and, for an element (or a
// primary network's reference) naming an IPAMClaim, the claim's status (ips, ownerPod, condition IPsAllocated).
// Nothing else of OVN-K runs: no OVS, no OVN databases, no ovnkube-node or -controller.
//
// What it needs here (measured, see ../shared/ovn-kubernetes/README.md):
// - the namespace `ovn-kubernetes` (its leader-election Lease lives there);
// - Node objects for the nodes pods are bound to (it ignores pods of unknown nodes; it annotates the Node itself);
// - at start-up it looks for `ovs-vsctl ovs-ofctl ovs-appctl ovn-nbctl ovn-sbctl ovsdb-client ovsdb-tool ip sysctl`
//   on its PATH without ever running them as cluster manager: scripts that exit 1 stand for them, in a directory put
//   first on ITS PATH only, so that nothing else of the test run can pick them up;
// - NADs whose config carries `"netAttachDefName": "<ns>/<name>"` (it rejects one without);
// - for primary user-defined networks (network segmentation): the UserDefinedNetwork and ClusterUserDefinedNetwork
//   CRDs, which its informers list before it starts (stand-ins below: no such object is ever made here, the NADs
//   are), and the namespace label `k8s.ovn.org/primary-user-defined-network` on a namespace whose primary network it
//   is to allocate for (networkmanager/nad_controller.go, GetActiveNetworkForNamespace: without the label the
//   namespace's pods are on the default network, whose addresses are not the cluster manager's in interconnect).
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { poll, type Cluster } from '../harness/index.ts';
import { spawnLogged, stopProcess, tailFile } from '../harness/process.ts';

export const OVNK_NAMESPACE = 'ovn-kubernetes';
/** The pod annotation the cluster manager writes: NAD key (`ns/name`) → the interface's addresses and MAC. */
export const OVN_POD_NETWORKS_ANNOTATION = 'k8s.ovn.org/pod-networks';
/** The namespace label that makes a namespace's primary NAD its pods' network (types.RequiredUDNNamespaceLabel). */
export const OVN_PRIMARY_UDN_NAMESPACE_LABEL = 'k8s.ovn.org/primary-user-defined-network';

/**
 * Stand-ins for OVN-K's UserDefinedNetwork CRDs (group, names, scope and status subresource as its kubebuilder
 * markers in pkg/crd/userdefinednetwork/v1 say; no schema): with network segmentation on, the cluster manager's
 * informers list both kinds and it does not start until they can. The suites make NADs directly, never these.
 */
const UDN_CRDS = [
  { kind: 'UserDefinedNetwork', plural: 'userdefinednetworks', scope: 'Namespaced', shortNames: ['udn'] },
  { kind: 'ClusterUserDefinedNetwork', plural: 'clusteruserdefinednetworks', scope: 'Cluster', shortNames: ['cudn'] },
].map(({ kind, plural, scope, shortNames }) => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.k8s.ovn.org` },
  spec: {
    group: 'k8s.ovn.org',
    names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), shortNames },
    scope,
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
}));
/** The commands ovnkube's start-up looks up on PATH (config.go); the cluster manager never runs them. */
export const OVNK_STUBBED_COMMANDS = ['ovs-vsctl', 'ovs-ofctl', 'ovs-appctl', 'ovn-nbctl', 'ovn-sbctl', 'ovsdb-client', 'ovsdb-tool', 'ip', 'sysctl'] as const;
/**
 * The cluster manager's log line near the end of its start (ClusterManager.Start: the status manager starts after the
 * NAD controller, the node controller and the default network's controller). The per-network line "completed watch
 * Pods" comes only once a NAD of a network it allocates for exists, which the cases create later.
 */
const READY_LINE = 'Starting StatusManager';

/** One entry of `k8s.ovn.org/pod-networks`, as OVN-K writes it (pkg/util/pod_annotation.go). */
export interface OvnPodNetwork {
  ip_addresses?: string[];
  mac_address?: string;
  role?: string;
}

/** The pod's `k8s.ovn.org/pod-networks` entries by NAD key; empty when there is none or it does not parse. */
export function ovnPodNetworks(annotations: Record<string, string> | undefined): Record<string, OvnPodNetwork> {
  const text = annotations?.[OVN_POD_NETWORKS_ANNOTATION];
  if (!text) return {};
  try {
    const parsed = JSON.parse(text) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, OvnPodNetwork>) : {};
  } catch {
    return {};
  }
}

export interface ClusterManager {
  /** Lines of its log so far (klog at level 5): the allocations ("Allocated IP addresses ..."), releases ("Released IPs"). */
  lines(): string[];
  stop(): Promise<void>;
}

/** Creates the namespace it needs (when missing), starts the cluster manager and waits for its ready line. */
export async function startClusterManager(cluster: Cluster, ovnkube: string, dir: string): Promise<ClusterManager> {
  mkdirSync(dir, { recursive: true });
  await cluster.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: OVNK_NAMESPACE } }, ...UDN_CRDS],
    }),
  });
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...UDN_CRDS.map((c) => `crd/${c.metadata.name}`)]);
  const stubs = join(dir, 'stub-bin');
  mkdirSync(stubs, { recursive: true });
  for (const cmd of OVNK_STUBBED_COMMANDS) {
    const path = join(stubs, cmd);
    writeFileSync(
      path,
      `#!/bin/sh\n# stand-in for ${cmd}: ovnkube's cluster manager checks it is on PATH and never runs it\necho "${cmd}: not available in the persistent-ips e2e (stub)" >&2\nexit 1\n`,
    );
    chmodSync(path, 0o755);
  }
  const logFile = join(dir, 'ovnkube.log');
  writeFileSync(logFile, '');
  const args = [
    // the leader-election identity (the pod name in a cluster)
    '--init-cluster-manager',
    'e2e-cluster-manager',
    '--k8s-kubeconfig',
    cluster.kubeconfigPath,
    '--enable-interconnect',
    '--enable-multi-network',
    '--enable-persistent-ips',
    // primary user-defined networks (role primary) are allocated only with network segmentation; preconfigured UDN
    // addresses make it honour the IP and MAC requests of a primary network's default-network element
    '--enable-network-segmentation',
    '--enable-preconfigured-udn-addresses',
    '--cluster-subnets',
    '10.244.0.0/16/24',
    '--k8s-service-cidr',
    '10.96.0.0/16',
    '--ovn-config-namespace',
    OVNK_NAMESPACE,
    // level 5: the allocations and releases are logged, which is what a person reads when a case failed
    '--loglevel',
    '5',
  ];
  const env = { ...process.env, PATH: `${stubs}:${process.env['PATH'] ?? '/usr/bin:/bin'}` };
  const p = spawnLogged('ovnkube-cluster-manager', ovnkube, args, logFile, env);
  const lines = () => readFileSync(logFile, 'utf8').split('\n');
  const cm: ClusterManager = { lines, stop: () => stopProcess(p, 10_000) };
  try {
    await poll(`ovnkube's cluster manager to start ("${READY_LINE}")`, 60_000, async () => (lines().some((l) => l.includes(READY_LINE)) ? true : undefined), {
      intervalMs: 200,
      abort: () => (p.hasExited() ? `ovnkube exited; last lines of ${logFile}:\n${tailFile(logFile, 30)}` : undefined),
    });
  } catch (err) {
    await cm.stop();
    throw err;
  }
  return cm;
}
