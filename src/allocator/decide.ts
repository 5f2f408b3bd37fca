// The decide step of the allocator loop (loop.ts), pure: from what gather.ts read, the Events of every scope of the
// pass and, for a network that can be served, its plan (plan.ts). apply.ts carries it out.

import { apiVersionOf, resources } from '../kube/resources.ts';
import type { NetworkAttachmentDefinition } from '../kube/types.ts';
import { objectKey } from '../sources/store.ts';
import type { Cause } from '../controller/events.ts';
import { readAllocatorNad } from './nad.ts';
import { planNetwork } from './plan.ts';
import type { AllocatorPlan, NetworkInput } from './pass.ts';

const NETWORK_PREFIX = 'network:';
const NAD_PREFIX = 'nad:';

/**
 * What is wrong with a NAD that no network pass reports: a malformed switch, or a NAD that opts in but whose
 * network cannot be named (an OVN-Kubernetes one included). Reported on the NAD itself.
 */
export function decideNad(nadKey: string, nad: NetworkAttachmentDefinition | undefined): AllocatorPlan {
  const read = nad ? readAllocatorNad(nad) : undefined;
  const own = nad && read && (read.problems.length > 0 || read.refused !== undefined) && (!read.enabled || read.network === undefined) ? [nad] : [];
  const causes = nadCauses(
    own,
    new Map(read && nad ? [[nadKey, read.problems]] : []),
    new Map(),
    new Map(read?.refused !== undefined ? [[nadKey, read.refused]] : []),
  );
  return { reports: [{ scope: `${NAD_PREFIX}${nadKey}`, causes }] };
}

/** The Events of every scope of the pass and, for a network that can be served, its plan. */
export function decideNetwork(input: NetworkInput): AllocatorPlan {
  const { network, nads, state } = input;
  const scope = `${NETWORK_PREFIX}${network}`;
  const claimsScope = `claims:${network}`;
  // OVN-Kubernetes writes a refused network's statuses: no write of ours, not even a condition, and nothing to
  // tell the VMs (what was said about their claims is cleared). The NADs that set the switch are told why.
  if (state.kind === 'unmanaged')
    return {
      reports: [
        { scope, causes: [] },
        { scope: claimsScope, causes: [] },
      ],
      forget: true,
    };
  if (state.kind === 'refused')
    return {
      reports: [
        { scope, causes: nadCauses(nads, new Map(), new Map(), state.refusals) },
        { scope: claimsScope, causes: [] },
      ],
      forget: true,
    };
  if (state.kind === 'invalid') return { reports: [{ scope, causes: nadCauses(nads, state.problems, new Map()) }], forget: true, problems: state.problems };
  const plan = planNetwork({
    network,
    pool: state.pool,
    now: input.now,
    claims: input.claims,
    inUse: input.inUse,
    ...(input.inUseUnknown !== undefined ? { inUseUnknown: input.inUseUnknown } : {}),
  });
  return {
    reports: [{ scope, causes: nadCauses(nads, new Map(), state.warnings) }],
    network: plan,
    claimEvents: { scope: claimsScope, causes: plan.events.map((e) => ({ target: e.target, type: e.type, reason: e.reason, message: e.message })) },
  };
}

const nadTarget = (nad: NetworkAttachmentDefinition) => ({
  apiVersion: apiVersionOf(resources.networkAttachmentDefinitions),
  kind: resources.networkAttachmentDefinitions.kind,
  namespace: nad.metadata.namespace ?? '',
  name: nad.metadata.name,
  ...(nad.metadata.uid ? { uid: nad.metadata.uid } : {}),
});

function nadCauses(
  nads: readonly NetworkAttachmentDefinition[],
  problemsByKey: Map<string, string[]>,
  warningsByKey: Map<string, string[]>,
  refusalsByKey: Map<string, string> = new Map(),
): Cause[] {
  const causes: Cause[] = [];
  for (const nad of nads) {
    const key = objectKey(nad);
    const refusal = refusalsByKey.get(key);
    // The message names the NAD's generation: reported once per generation, not at every pass or resync.
    if (refusal !== undefined) causes.push({ target: nadTarget(nad), type: 'Warning', reason: 'AllocatorRefused', message: refusal });
    for (const message of problemsByKey.get(key) ?? []) causes.push({ target: nadTarget(nad), type: 'Warning', reason: 'InvalidAllocatorPool', message });
    for (const message of warningsByKey.get(key) ?? []) causes.push({ target: nadTarget(nad), type: 'Normal', reason: 'AllocatorPoolWarning', message });
  }
  return causes;
}
