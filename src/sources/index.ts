export { Informer, InformerStoppedError, type InformerOptions, type InformerMetrics, type InformerState, type ListWatch, type WatchRequest, type RestartReason } from './informer.ts';
export { Store, keyOf, objectKey, deepEqual, sameContent, type ChangeEvent, type ChangeType, type IndexFn } from './store.ts';
export { reconnectDelay, DEFAULT_RECONNECT_BACKOFF, type BackoffPolicy } from './backoff.ts';
export {
  trimMeta,
  trimVmiSpec,
  trimVirtualMachine,
  trimVirtualMachineInstance,
  trimNetworkAttachmentDefinition,
  trimIPAMClaim,
  trimKubeVirt,
  trimPod,
  UntrimmableObjectError,
  type Trim,
  type MetaPolicy,
} from './trim.ts';
export {
  kinds,
  createInformer,
  createSources,
  clientListWatch,
  type KindSpec,
  type Scope,
  type Sources,
  type SourcesOptions,
  type CommonInformerOptions,
} from './kinds.ts';
export {
  CLAIMS_BY_NETWORK,
  CLAIMS_BY_OWNER_NAME,
  CLAIMS_BY_OWNER_UID,
  CLAIMS_BY_VM,
  NADS_BY_NETWORK,
  VMIS_BY_NAD,
  VMS_BY_NAD,
  claimNetwork,
  claimsByOwnerName,
  claimsByOwnerUid,
  claimsByVm,
  nadKeysOf,
  nadNetwork,
  registerIndexes,
  vmisByNad,
  vmsByNad,
  type IndexedCaches,
} from './indexes.ts';
