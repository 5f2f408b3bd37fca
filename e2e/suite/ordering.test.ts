// Unit tests of the suite's ordering checks (no cluster needed): the "VM deleted (background)" row replayed over
// recorded watch histories, in each legal order of events, and with the end of the history not delivered yet, which
// is how the row once failed with "vm1.red: deleted (rv undefined) by garbage collection, after the VM was gone
// (rv 351)".
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim, Recorded } from './kube.ts';
import { backgroundDeletionViolations, deletionStartRv, finalizerReleaseRv, waitForDeletedEvents, type EventRecord } from './ordering.ts';

const FINALIZER = 'kubevirt.io/persistent-ipam';
const NAME = 'vm1.red';
/** The revisions of the failed run: the VMI went at 340, the VM at 351. */
const GONE = { vmi: 340, vm: 351 };

const claimAt = (o: { finalizer: boolean; deleting?: boolean }): IPAMClaim => ({
  metadata: {
    name: NAME,
    namespace: 'ns',
    ...(o.finalizer ? { finalizers: [FINALIZER] } : {}),
    ...(o.deleting ? { deletionTimestamp: '2025-01-01T00:00:00Z' } : {}),
  },
  spec: { network: 'red', interface: 'pod0' },
});

/** A record as WatchLog keeps it: the claim as listed (with our finalizer), then `events`; more can be appended. */
function record(events: Recorded<IPAMClaim>[]): EventRecord<IPAMClaim> & { events: Recorded<IPAMClaim>[]; check(): void } {
  return {
    initial: new Map([[NAME, claimAt({ finalizer: true })]]),
    events,
    of(name) {
      return this.events.filter((e) => e.obj.metadata.name === name);
    },
    check() {},
  };
}

/** (a) Our finalizer goes first (the VMI is gone); the VM goes; garbage collection deletes the claim at once. */
const releasedFirst = (): Recorded<IPAMClaim>[] => [
  { type: 'MODIFIED', obj: claimAt({ finalizer: false }), rv: 345 },
  { type: 'DELETED', obj: claimAt({ finalizer: false }), rv: 352 },
];
/** (b) The VM goes first: garbage collection marks the claim, and our release (the VMI being gone) deletes it. */
const vmGoneFirst = (): Recorded<IPAMClaim>[] => [
  { type: 'MODIFIED', obj: claimAt({ finalizer: true, deleting: true }), rv: 352 },
  { type: 'DELETED', obj: claimAt({ finalizer: false, deleting: true }), rv: 353 },
];

describe('VM deleted (background): the ordering check over every legal order', () => {
  it('both orders pass once the record is complete', () => {
    assert.deepEqual(backgroundDeletionViolations(record(releasedFirst()), NAME, GONE), [], 'finalizer released before the VM went');
    assert.deepEqual(backgroundDeletionViolations(record(vmGoneFirst()), NAME, GONE), [], 'VM gone before the finalizer was released');
  });

  it('the failure seen in CI: order (a) read before the watch delivered DELETED; the old assertion fails, the check says "incomplete"', () => {
    const early = record(releasedFirst().slice(0, 1));
    // What the row compared: the claim's "deletion started" revision with the VM's. In order (a) the only sign of the
    // claim's deletion is its DELETED event, so without it there is nothing to compare.
    const deleting = deletionStartRv(early, NAME);
    assert.equal(deleting, undefined);
    assert.ok(!(Number(deleting) > GONE.vm), 'the old assertion fails: "deleted (rv undefined) ... after the VM was gone (rv 351)"');
    assert.equal(finalizerReleaseRv(early, NAME), 345, 'the release was recorded, so the old row got as far as that assertion');
    assert.deepEqual(backgroundDeletionViolations(early, NAME, GONE), [`${NAME}: the claim's DELETED event is not recorded (the record is incomplete)`]);
  });

  it('order (b) read early is incomplete too (there the release itself is the DELETED event)', () => {
    const early = record(vmGoneFirst().slice(0, 1));
    assert.equal(finalizerReleaseRv(early, NAME), undefined);
    assert.deepEqual(backgroundDeletionViolations(early, NAME, GONE), [`${NAME}: the claim's DELETED event is not recorded (the record is incomplete)`]);
  });

  it('real violations are caught: a release while the VMI existed, a deletion while the VM existed', () => {
    const tooEarly = record([
      { type: 'MODIFIED', obj: claimAt({ finalizer: false }), rv: 330 },
      { type: 'DELETED', obj: claimAt({ finalizer: false }), rv: 352 },
    ]);
    assert.deepEqual(backgroundDeletionViolations(tooEarly, NAME, GONE), [`${NAME}: finalizer released (rv 330) before the VMI was gone (rv 340)`]);
    const notByGc = record([
      { type: 'MODIFIED', obj: claimAt({ finalizer: false }), rv: 345 },
      { type: 'DELETED', obj: claimAt({ finalizer: false }), rv: 348 },
    ]);
    assert.deepEqual(backgroundDeletionViolations(notByGc, NAME, GONE), [
      `${NAME}: deletion began (rv 348) before the VM was gone (rv 351), so not by garbage collection`,
    ]);
    assert.deepEqual(backgroundDeletionViolations(record(releasedFirst()), NAME, { vmi: 340, vm: undefined }), [`${NAME}: the VM's deletion is not recorded`]);
  });
});

describe('waitForDeletedEvents: the record catches up with what a GET showed', () => {
  for (const [order, events] of [
    ['(a) released first', releasedFirst()],
    ['(b) VM gone first', vmGoneFirst()],
  ] as const) {
    it(`${order}: DELETED delivered after the GET saw the claim gone; the check then passes`, async () => {
      const log = record(events.slice(0, 1));
      setTimeout(() => log.events.push(events[1]!), 60); // the watch, a moment behind the GET
      const t0 = Date.now();
      await waitForDeletedEvents(log, [NAME], 5_000, 5);
      assert.ok(Date.now() - t0 >= 50, 'it waited for the event');
      assert.deepEqual(backgroundDeletionViolations(log, NAME, GONE), []);
    });
  }

  it('a DELETED event that never comes: an error naming the claim, within the deadline', async () => {
    await assert.rejects(
      waitForDeletedEvents(record(releasedFirst().slice(0, 1)), [NAME, 'vm1.blue'], 100, 5),
      /did not deliver the DELETED event of vm1\.red, vm1\.blue within 100 ms/,
    );
  });

  it('a broken watch fails at once rather than waiting out the deadline', async () => {
    const log = {
      ...record([]),
      check: () => {
        throw new Error('watch of /x failed: 410 Gone');
      },
    };
    await assert.rejects(waitForDeletedEvents(log, [NAME], 60_000), /410 Gone/);
  });
});
