import { FEATURE_GATE } from '../claims/constants.ts';
import type { KubeVirtCR } from '../kube/types.ts';

/** What the operator said with `--feature-gates`: undefined when the flag does not mention the gate. */
export type GateOverride = boolean | undefined;

export interface GateState {
  enabled: boolean;
  source: 'flag' | 'kubevirt-cr' | 'default';
}

/**
 * Parses `--feature-gates=PersistentIPs=true,Other=false` in the Kubernetes component style. Unknown gates are
 * ignored, so that the same flag string can be shared with other components; malformed entries are an error
 * because a typo must not silently leave the gate in an unexpected state.
 */
export function parseFeatureGatesFlag(value: string | undefined): GateOverride {
  if (value === undefined || value.trim() === '') return undefined;
  let result: GateOverride;
  for (const part of value.split(',')) {
    const entry = part.trim();
    if (entry === '') continue;
    const match = /^([A-Za-z0-9]+)=(true|false)$/i.exec(entry);
    if (!match) throw new Error(`invalid --feature-gates entry "${entry}": expected Name=true or Name=false`);
    if (match[1] === FEATURE_GATE) result = match[2]!.toLowerCase() === 'true';
  }
  return result;
}

/**
 * Precedence: an explicit flag wins (for clusters where the controller may not read the KubeVirt CR, or for an
 * operator who wants to force it); otherwise the KubeVirt CR decides, live (any CR listing the gate: KubeVirt installs
 * one per cluster, but we do not rely on that); with neither, the gate is off, as it is in KubeVirt itself.
 */
export function resolveGate(override: GateOverride, crs: readonly KubeVirtCR[]): GateState {
  if (override !== undefined) return { enabled: override, source: 'flag' };
  const listed = (cr: KubeVirtCR) => cr.spec?.configuration?.developerConfiguration?.featureGates?.includes(FEATURE_GATE) ?? false;
  if (crs.length > 0) return { enabled: crs.some(listed), source: 'kubevirt-cr' };
  return { enabled: false, source: 'default' };
}

/** The gate in one sentence for a person: on or off, who decided, and what off means. */
export function describeGate(state: GateState): string {
  const by =
    state.source === 'flag'
      ? 'set by --feature-gates'
      : state.source === 'kubevirt-cr'
        ? state.enabled
          ? 'listed in the KubeVirt CR'
          : 'not listed in the KubeVirt CR (spec.configuration.developerConfiguration.featureGates)'
        : 'no KubeVirt CR found and no --feature-gates';
  return state.enabled ? `on (${by})` : `off (${by}): no IPAMClaims are created and launcher pods are not changed`;
}
