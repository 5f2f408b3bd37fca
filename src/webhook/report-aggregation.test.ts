import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PodMutationReport } from './pod-mutation.ts';
import { aggregateReports } from './report-aggregation.ts';

const unknown = (i: number): PodMutationReport => ({ reason: 'UnknownNetworkElement', message: `element ${i} matches nothing` });

describe('aggregateReports', () => {
  it('keeps a few reports of a reason as they are', () => {
    const reports = [unknown(0), unknown(1), { reason: 'PersistenceBlocked', network: 'red', message: 'blocked' } as PodMutationReport, unknown(2)];
    assert.deepEqual(aggregateReports(reports), [unknown(0), unknown(1), unknown(2), reports[2]]);
  });

  it('folds many of one reason into one report that counts them and shows the first', () => {
    const reports = Array.from({ length: 998 }, (_, i) => unknown(i));
    const out = aggregateReports(reports);
    assert.equal(out.length, 1);
    assert.equal(out[0]!.reason, 'UnknownNetworkElement');
    assert.equal(
      out[0]!.message,
      '998 of the same kind (UnknownNetworkElement), the first 3: element 0 matches nothing; element 1 matches nothing; element 2 matches nothing; and 995 more',
    );
  });
});
