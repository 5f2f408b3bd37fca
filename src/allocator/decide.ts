// The decide step of the allocator loop (loop.ts), pure: from what gather.ts read, the Events of every scope of the
// pass and, for a network that can be served, its plan (plan.ts). apply.ts carries it out.

import { keyString } from '../kube/key.ts';
import { apiVersionOf, resources } from '../kube/resources.ts';
import type { NetworkAttachmentDefinition } from '../kube/types.ts';
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
  return { reports: [{ scope: `${NAD_PREFIX}${nadKey}`, causes: nadCauses(own, () => ({ problems: read?.problems, refusal: read?.refused })) }] };
}

/** The Events of every scope of the pass and, for a network that can be served, its plan. */
export function decideNetwork(input: NetworkInput): AllocatorPlan {
  const { network, nads, state } = input;
  const scope = `${NETWORK_PREFIX}${network}`;
  const claimsScope = `claims:${network}`;
  // OVN-Kubernetes writes a refused network's statuses: no write of ours, not even a condition, and nothing to
  // tell the VMs (what was said about their claims is cleared). The NADs that set the switch are told why.
  if (state.kind === 'unmanaged' || state.kind === 'refused') {
    const causes = state.kind === 'refused' ? nadCauses(nads, (key) => ({ refusal: state.refusals.get(key) })) : [];
    return {
      reports: [
        { scope, causes },
        { scope: claimsScope, causes: [] },
      ],
      forget: true,
    };
  }
  if (state.kind === 'invalid') {
    return { reports: [{ scope, causes: nadCauses(nads, (key) => ({ problems: state.problems.get(key) })) }], forget: true, problems: state.problems };
  }
  const plan = planNetwork({ ...input, pool: state.pool });
  return {
    reports: [{ scope, causes: nadCauses(nads, (key) => ({ warnings: state.warnings.get(key) })) }],
    network: plan,
    claimEvents: { scope: claimsScope, causes: plan.events },
  };
}

/** What one NAD is told: why it is refused, what keeps its pool from serving, what is merely worth knowing. */
interface NadNotes {
  refusal?: string | undefined;
  problems?: readonly string[] | undefined;
  warnings?: readonly string[] | undefined;
}

function nadCauses(nads: readonly NetworkAttachmentDefinition[], notesOf: (key: string) => NadNotes): Cause[] {
  return nads.flatMap((nad) => {
    const { refusal, problems = [], warnings = [] } = notesOf(keyString(nad.metadata));
    const target = {
      apiVersion: apiVersionOf(resources.networkAttachmentDefinitions),
      kind: resources.networkAttachmentDefinitions.kind,
      namespace: nad.metadata.namespace ?? '',
      name: nad.metadata.name,
      ...(nad.metadata.uid ? { uid: nad.metadata.uid } : {}),
    };
    const cause = (type: Cause['type'], reason: string) => (message: string) => ({ target, type, reason, message });
    // A refusal names the NAD's generation: reported once per generation, not at every pass or resync.
    return [
      ...(refusal !== undefined ? [refusal] : []).map(cause('Warning', 'AllocatorRefused')),
      ...problems.map(cause('Warning', 'InvalidAllocatorPool')),
      ...warnings.map(cause('Normal', 'AllocatorPoolWarning')),
    ];
  });
}
