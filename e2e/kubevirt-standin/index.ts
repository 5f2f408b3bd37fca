// KubeVirt stand-in: test infrastructure, NOT KubeVirt. What it reproduces and what it does not: standin.ts.
export { KubeVirtStandIn, defaultStandInLogger, startKubeVirtStandIn, type KubeVirtStandInOptions } from './standin.ts';
export {
  KubeVirtStandInClient,
  podHasNetwork,
  podNetworkInterfaces,
  waitFor,
  type HotplugRequest,
  type MigrationResult,
  type OpOptions,
  type WaitOptions,
} from './client.ts';
export { buildVM, type VMNetworkRequest } from './manifests.ts';
export {
  FAKE_NODES,
  LEGACY_VMI_FINALIZER,
  MIGRATION_JOB_LABEL,
  VMI_FINALIZER,
  VM_CONTROLLER_FINALIZER,
  launcherNetworkElements,
  parseNetworksAnnotation,
  podInterfaceName,
  type MigrationState,
  type Vm,
  type Vmi,
  type VmiStatus,
} from './render.ts';
