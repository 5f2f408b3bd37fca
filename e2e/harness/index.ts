// The e2e harness: a real local control plane (etcd, kube-apiserver, kube-controller-manager) for tests.
export { ensureBinaries, kubectlPath, type Binaries } from './binaries.ts';
export {
  freePort,
  installCrds,
  kubeconfigYaml,
  pinnedKubernetesVersion,
  startControlPlane,
  verifyGarbageCollector,
  waitForCrdsEstablished,
  type Cluster,
  type ComponentName,
  type ControlPlane,
  type StartOptions,
} from './controlplane.ts';
export { connectToCluster, EXISTING_KUBECONFIG_ENV, startOrConnect } from './existing.ts';
export { runKubectl, type KubectlOptions, type KubectlResult } from './kubectl.ts';
export { KubeHttp, poll, type KubeHttpOptions, type KubeResponse } from './kubehttp.ts';
export { CRDS_DIR, IPAMCLAIM_CRD, pinnedVersions, type PinnedVersions } from './paths.ts';
