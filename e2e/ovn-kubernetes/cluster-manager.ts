// OVN-Kubernetes' cluster manager, alone, as the IPAM of OVN-K networks in the end-to-end suites: `ovnkube
// --init-cluster-manager` (built unmodified from the v1.3.0 source by build.sh) against the harness's control plane,
// with interconnect, multi-network and persistent IPs on. In interconnect mode the cluster manager is the component
// that hands out the addresses of layer2 (and localnet-with-subnets) secondary networks: it writes the pod's
// `k8s.ovn.org/pod-networks` entry and, for an element naming an IPAMClaim, the claim's status (ips, ownerPod,
// condition IPsAllocated). Nothing else of OVN-K runs: no OVS, no OVN databases, no ovnkube-node or -controller.
//
// What it needs here (measured, see ../shared/ovn-kubernetes/README.md):
// - the namespace `ovn-kubernetes` (its leader-election Lease lives there);
// - Node objects for the nodes pods are bound to (it ignores pods of unknown nodes; it annotates the Node itself);
// - at start-up it looks for `ovs-vsctl ovs-ofctl ovs-appctl ovn-nbctl ovn-sbctl ovsdb-client ovsdb-tool ip sysctl`
//   on its PATH without ever running them as cluster manager: scripts that exit 1 stand for them, in a directory put
//   first on ITS PATH only, so that nothing else of the test run can pick them up;
// - NADs whose config carries `"netAttachDefName": "<ns>/<name>"` (it rejects one without).
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { poll, type Cluster } from '../harness/index.ts';
import { spawnLogged, stopProcess, tailFile, type ManagedProcess } from '../harness/process.ts';

export const OVNK_NAMESPACE = 'ovn-kubernetes';
/** The pod annotation the cluster manager writes: NAD key (`ns/name`) → the interface's addresses and MAC. */
export const OVN_POD_NETWORKS_ANNOTATION = 'k8s.ovn.org/pod-networks';
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
  process: ManagedProcess;
  /** Its output (klog at level 5): the allocations ("Allocated IP addresses ..."), releases ("Released IPs"). */
  logFile: string;
  /** Lines of the log so far. */
  lines(): string[];
  stop(): Promise<void>;
}

export interface ClusterManagerOptions {
  /** The leader-election identity (the pod name in a cluster): the same one after a restart takes the Lease at once. */
  identity?: string;
  readyTimeoutMs?: number;
}

/** Creates the namespace it needs (when missing), starts the cluster manager and waits for its ready line. */
export async function startClusterManager(cluster: Cluster, ovnkube: string, dir: string, opts: ClusterManagerOptions = {}): Promise<ClusterManager> {
  mkdirSync(dir, { recursive: true });
  await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: OVNK_NAMESPACE } }) });
  const stubs = join(dir, 'stub-bin');
  mkdirSync(stubs, { recursive: true });
  for (const cmd of OVNK_STUBBED_COMMANDS) {
    const path = join(stubs, cmd);
    writeFileSync(path, `#!/bin/sh\n# stand-in for ${cmd}: ovnkube's cluster manager checks it is on PATH and never runs it\necho "${cmd}: not available in the persistent-ips e2e (stub)" >&2\nexit 1\n`);
    chmodSync(path, 0o755);
  }
  const logFile = join(dir, 'ovnkube.log');
  writeFileSync(logFile, '');
  const args = [
    '--init-cluster-manager',
    opts.identity ?? 'e2e-cluster-manager',
    '--k8s-kubeconfig',
    cluster.kubeconfigPath,
    '--enable-interconnect',
    '--enable-multi-network',
    '--enable-persistent-ips',
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
  const cm: ClusterManager = { process: p, logFile, lines, stop: () => stopProcess(p, 10_000) };
  try {
    await poll(`ovnkube's cluster manager to start ("${READY_LINE}")`, opts.readyTimeoutMs ?? 60_000, async () => (lines().some((l) => l.includes(READY_LINE)) ? true : undefined), {
      intervalMs: 200,
      abort: () => (p.hasExited() ? `ovnkube exited; last lines of ${logFile}:\n${tailFile(logFile, 30)}` : undefined),
    });
  } catch (err) {
    await cm.stop();
    throw err;
  }
  return cm;
}
