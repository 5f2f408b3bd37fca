// Ordering checks over recorded watch events ("the finalizer went only after the VMI was gone"), as functions of the
// record alone, so that each legal order of events can be replayed in a unit test (ordering.test.ts) instead of
// waiting for a run that happens to produce it.
//
// A record is complete only once the watch has delivered it. The suite's waits ("the claim is gone") poll with GET,
// which the API server answers from etcd; the watch delivers the same change a moment later, through the watch
// cache. So a case that has just seen a claim 404 may not have its DELETED event yet: a check run then would judge
// a history with its end missing. waitForDeletedEvents closes that gap before any check.
import { setTimeout as sleep } from 'node:timers/promises';
import type { IPAMClaim, KubeObject, Recorded } from './kube.ts';

/** Spec §3, written out as in fixtures.ts. */
const CLAIM_FINALIZER = 'kubevirt.io/persistent-ipam';

/** What a WatchLog offers to these checks: the state before the first event, and the events of one object in order. */
export interface EventRecord<T extends KubeObject = KubeObject> {
  readonly initial: ReadonlyMap<string, T>;
  of(name: string): Recorded<T>[];
}

const holdsOurFinalizer = (o: KubeObject): boolean => o.metadata.finalizers?.includes(CLAIM_FINALIZER) ?? false;

/**
 * The resourceVersion at which `name` lost our finalizer (first recorded event without it after one with it), or
 * of its DELETED event if it went directly.
 */
export function finalizerReleaseRv(log: EventRecord<IPAMClaim>, name: string): number | undefined {
  const initial = log.initial.get(name);
  let had = initial ? holdsOurFinalizer(initial) : false;
  for (const e of log.of(name)) {
    if (e.type === 'DELETED') return had ? e.rv : undefined;
    if (holdsOurFinalizer(e.obj)) had = true;
    else if (had) return e.rv;
  }
  return undefined;
}

/** The resourceVersion of the DELETED event of `name` in `log`. */
export function deletedRv(log: EventRecord, name: string): number | undefined {
  return log.of(name).find((e) => e.type === 'DELETED')?.rv;
}

/** The first recorded version of `name` that matches `pred`. */
export function firstRv<T extends KubeObject>(log: EventRecord<T>, name: string, pred: (e: { type: string; obj: T }) => boolean): number | undefined {
  return log.of(name).find(pred)?.rv;
}

/**
 * The first resourceVersion at which `name` was being deleted (deletionTimestamp set) or gone. A claim without
 * finalizers is removed at once: then its DELETED event is the only sign of its deletion.
 */
export function deletionStartRv(log: EventRecord<IPAMClaim>, name: string): number | undefined {
  return firstRv(log, name, (e) => e.type === 'DELETED' || !!e.obj.metadata.deletionTimestamp);
}

/**
 * Spec §5 "VM deleted (background)" for claim `name`, given the revisions at which the VMI and the VM were deleted:
 * our finalizer goes only after the VMI is gone, and garbage collection deletes the claim only after its owner, the
 * VM, is gone (a background cascade leaves the dependents of an owner that still exists alone). Returns what is
 * wrong; empty when the history is right.
 *
 * Both legal orders pass. (a) The finalizer goes first and garbage collection deletes the claim at once: MODIFIED
 * without finalizer, then DELETED, with no "being deleted" version in between. (b) The VM goes first: garbage
 * collection marks the claim (deletionTimestamp), and our release deletes it (DELETED). A history whose end the
 * watch has not delivered yet is reported as incomplete, never judged.
 */
export function backgroundDeletionViolations(
  claims: EventRecord<IPAMClaim>,
  name: string,
  gone: { vmi: number | undefined; vm: number | undefined },
): string[] {
  const out: string[] = [];
  if (gone.vmi === undefined) out.push(`${name}: the VMI's deletion is not recorded`);
  if (gone.vm === undefined) out.push(`${name}: the VM's deletion is not recorded`);
  if (deletedRv(claims, name) === undefined) out.push(`${name}: the claim's DELETED event is not recorded (the record is incomplete)`);
  if (out.length > 0) return out;
  const released = finalizerReleaseRv(claims, name);
  const deleting = deletionStartRv(claims, name)!;
  if (released === undefined) out.push(`${name}: no release of our finalizer recorded`);
  else if (released <= gone.vmi!) out.push(`${name}: finalizer released (rv ${released}) before the VMI was gone (rv ${gone.vmi})`);
  if (deleting <= gone.vm!) out.push(`${name}: deletion began (rv ${deleting}) before the VM was gone (rv ${gone.vm}), so not by garbage collection`);
  return out;
}

/**
 * Waits until `log` holds the DELETED event of every one of `names`: call it after a GET showed them gone, before
 * judging the record. Throws after `timeoutMs` naming those still missing, or at once if the watch broke.
 */
export async function waitForDeletedEvents(log: EventRecord & { check(): void }, names: readonly string[], timeoutMs: number, intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    log.check();
    const missing = names.filter((n) => deletedRv(log, n) === undefined);
    if (missing.length === 0) return;
    if (Date.now() >= deadline) throw new Error(`the watch did not deliver the DELETED event of ${missing.join(', ')} within ${timeoutMs} ms`);
    await sleep(intervalMs); // polling an in-memory record: the watch appends to it from its own callbacks
  }
}
