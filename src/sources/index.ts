export {
  Informer,
  InformerStoppedError,
  type InformerOptions,
  type InformerMetrics,
  type InformerState,
  type ListWatch,
  type WatchRequest,
  type RestartReason,
} from './informer.ts';
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
export * from './indexes.ts';
