// One pod can carry hundreds of network-selection elements; one log line and one admission warning per odd element
// would flood both (the API server also caps the warnings it passes on). Reports of the same reason beyond a few are
// folded into one that says how many there were and shows the first ones.

import type { PodMutationReport } from './pod-mutation.ts';

/** Reports of one reason kept as they are; more than this become one summary report. */
export const REPORTS_SHOWN_PER_REASON = 3;

export function aggregateReports(reports: readonly PodMutationReport[], shown = REPORTS_SHOWN_PER_REASON): PodMutationReport[] {
  const byReason = new Map<PodMutationReport['reason'], PodMutationReport[]>();
  for (const report of reports) {
    const group = byReason.get(report.reason);
    if (group) group.push(report);
    else byReason.set(report.reason, [report]);
  }
  const out: PodMutationReport[] = [];
  for (const [reason, group] of byReason) {
    if (group.length <= shown) {
      out.push(...group);
      continue;
    }
    const first = group.slice(0, shown).map((r) => r.message);
    out.push({ reason, message: `${group.length} of the same kind (${reason}), the first ${shown}: ${first.join('; ')}; and ${group.length - shown} more` });
  }
  return out;
}
