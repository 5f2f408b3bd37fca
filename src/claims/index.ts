// The claims domain: pure functions of plain data. The controller, the webhook and the CLI import from here only,
// so the modules behind it can be reshaped without touching them. Test fixtures are deliberately not exported.

export * from './constants.ts';
export {
  claimNameFor,
  claimNamesOf,
  decide,
  needsLauncherPodRead,
  persistentNetworks,
  type DecideInput,
  type NetworkVerdict,
  type Plan,
  type Problem,
  withClaimNames,
} from './decide.ts';
export { claimName, collisionClaimName, isDns1123Label, isDns1123Subdomain, podInterfaceName, referenceClaimName, swapClaimName } from './names.ts';
export { parseNadConfig } from './nad-config.ts';
export { claimStanding, ownerUidsOf, type ClaimStandingReason } from './standing.ts';
export { effectiveVmiSpec } from './effective-spec.ts';
export { nadKeyOfNetworkName, parseNadReference } from './nad-reference.ts';
export {
  hasActivePods,
  interfacesOfNetwork,
  isRunningLauncherPod,
  isUnfinishedLauncherPod,
  launcherPodSelector,
  type NetworkInterfaces,
} from './launcher-pods.ts';
export * from './network-selection.ts';
export { controllerRef, isKubevirtRef, kubevirtOwner, kubevirtOwnerRefs } from './owners.ts';
