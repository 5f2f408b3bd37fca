// One pod can carry hundreds of network-selection elements; one log line and one admission warning per odd element
// would flood both (the API server also caps the warnings it passes on). Reports of the same reason beyond a few are
// folded into one that says how many there were and shows the first ones.

import type { PodMutationReport } from './pod-mutation.ts';

/** Reports of one reason kept as they are; more than this become one summary report. */
const shown = 3;

export function aggregateReports(reports: readonly PodMutationReport[]): PodMutationReport[] {
  return [...Map.groupBy(reports, (report) => report.reason)].flatMap(([reason, group]) => {
    if (group.length <= shown) return group;
    const first = group.slice(0, shown).map((r) => r.message);
    return [{ reason, message: `${group.length} of the same kind (${reason}), the first ${shown}: ${first.join('; ')}; and ${group.length - shown} more` }];
  });
}
