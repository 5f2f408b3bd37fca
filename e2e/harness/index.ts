// The e2e harness: a real local control plane (etcd, kube-apiserver, kube-controller-manager) for tests.
export { kubectlPath } from './binaries.ts';
export { freePort, kubeconfigYaml, startControlPlane, type Cluster, type ControlPlane } from './controlplane.ts';
export { runKubectl, type KubectlResult } from './kubectl.ts';
export { KubeHttp, poll, type KubeResponse } from './kubehttp.ts';
export { pinnedVersions } from './paths.ts';
