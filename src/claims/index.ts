// The claims domain: pure functions of plain data. The controller, the webhook and the CLI import from here only,
// so the modules behind it can be reshaped without touching them. Test fixtures are deliberately not exported.

export * from './constants.ts';
export {
  claimNameFor,
  claimNamesOf,
  decide,
  hasWrites,
  needsLauncherPodRead,
  persistentNetworks,
  type ClaimAdoption,
  type ClaimLookup,
  type ClaimOwner,
  type ClaimWrite,
  type DecideInput,
  type Finding,
  type NetworkVerdict,
  type OwnerKind,
  type Plan,
  type Problem,
  type ProblemReason,
  type WantedClaim,
  type WantedStatus,
} from './decide.ts';
export {
  claimName,
  collisionClaimName,
  isDns1123Label,
  isDns1123Subdomain,
  MAX_SUBDOMAIN_LENGTH,
  podInterfaceName,
  PRIMARY_POD_INTERFACE,
  referenceClaimName,
  swapClaimName,
} from './names.ts';
export {
  isOvnKubernetes,
  OVN_K8S_CNI_TYPE,
  parseCniConfig,
  parseNadConfig,
  type NadConfig,
  type NadConfigProblem,
} from './nad-config.ts';
export { claimStanding, ownerUidsOf, type ClaimOwnerUids, type ClaimStanding, type ClaimStandingReason } from './standing.ts';
export { DEFAULT_POD_NETWORK, effectiveVmiSpec } from './effective-spec.ts';
export { nadKeyOfNetworkName, parseNadReference, type ObjectKey } from './nad-reference.ts';
export { interfacesOfNetwork, isRunningLauncherPod, launcherPodSelector, type NetworkInterfaces } from './launcher-pods.ts';
export * from './network-selection.ts';
