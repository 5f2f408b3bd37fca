// The apply step of the allocator loop (loop.ts): reports a pass's Events, writes the claims' statuses each with its
// resourceVersion precondition (the commit point), and retries the writes whose outcome is unknown, as they were,
// before the next pass over their network trusts its claims (gather.ts).

import { keyString, parseKey } from '../kube/key.ts';
import { KubeApiError, isConflict, isNotFound } from '../kube/errors.ts';
import type { IPAMClaim } from '../kube/types.ts';
import type { ReconcileResult } from '../queue/index.ts';
import { trimIPAMClaim } from '../sources/trim.ts';
import { conditionsWith, type StatusWrite } from './plan.ts';
import type { AllocatorInput, AllocatorPlan, NetworkReconcilerDeps } from './pass.ts';

/** Status writes of one pass in flight at once. */
const WRITE_CONCURRENCY = 16;

type WriteOutcome = 'written' | 'raced' | 'gone' | 'unknown' | 'rejected';

/** Whether the API server certainly did not apply the request (an answer that rejects it). */
function certainlyNotApplied(err: unknown): boolean {
  return err instanceof KubeApiError && err.code !== undefined && err.code >= 400 && err.code < 500 && err.code !== 408;
}

async function write(
  deps: NetworkReconcilerDeps,
  network: string,
  claim: IPAMClaim,
  status: NonNullable<IPAMClaim['status']>,
  resourceVersion: string,
  signal: AbortSignal,
): Promise<WriteOutcome> {
  const { overlay, log } = deps;
  const key = keyString(claim.metadata);
  try {
    overlay.record(key, resourceVersion, await deps.writeStatus(claim, status, resourceVersion, signal), network);
    return 'written';
  } catch (err) {
    if (isNotFound(err)) return 'gone';
    if (isConflict(err)) {
      log.debug({ claim: key, err }, 'claim changed meanwhile; will look again');
      return 'raced';
    }
    if (certainlyNotApplied(err)) {
      log.error({ claim: key, network, err }, 'the API server refused the claim status');
      return 'rejected';
    }
    // It may have been applied: keep the addresses reserved until a retry gives a definite answer.
    overlay.recordPending(key, network, resourceVersion, { ...claim, metadata: { ...claim.metadata, resourceVersion }, status });
    log.warn({ claim: key, network, err }, 'claim status write has an unknown outcome; its addresses stay reserved until it is retried');
    return 'unknown';
  }
}

/** Retries writes whose outcome is unknown, as they were. Returns whether some are still unsettled. */
export async function settlePending(deps: NetworkReconcilerDeps, network: string, signal: AbortSignal): Promise<boolean> {
  const { overlay } = deps;
  let unsettled = false;
  for (const p of overlay.pendingOf(network)) {
    overlay.view(p.key, deps.claims.getByKey(p.key)); // drops it if the cache already settled it
    if (!overlay.pendingOf(network).some((q) => q.key === p.key)) continue;
    const { namespace, name } = parseKey(p.key);
    const attempted = overlay.view(p.key, undefined)!;
    const outcome = await write(deps, network, attempted, p.status, p.resourceVersion, signal);
    if (outcome === 'written') continue;
    if (outcome === 'gone' || outcome === 'rejected') {
      overlay.forget(p.key);
      continue;
    }
    if (outcome === 'raced') {
      // The claim changed since the attempt: read what it is now, which settles whether the attempt landed.
      try {
        const fresh = await deps.readClaim(namespace, name, signal);
        if (!fresh) overlay.forget(p.key);
        else overlay.seed(p.key, network, deps.claims.getByKey(p.key)?.metadata.resourceVersion, trimIPAMClaim(fresh));
        continue;
      } catch (err) {
        deps.log.warn({ claim: p.key, err }, 'cannot read the claim to settle an earlier write; will retry');
      }
    }
    unsettled = true;
  }
  return unsettled;
}

/** Reports the pass's Events; for a network, also writes its plan. A NAD's plan is its Events only. */
export async function applyPlan(deps: NetworkReconcilerDeps, input: AllocatorInput, plan: AllocatorPlan, signal: AbortSignal): Promise<ReconcileResult> {
  const { log } = deps;
  for (const r of plan.reports) await deps.recorder.report(r.scope, r.causes);
  if (input.kind !== 'network') return {};
  const { network } = input;
  if (plan.problems) log.warn({ network, problems: Object.fromEntries(plan.problems) }, 'network pool is not usable; no new addresses until it is fixed');
  if (plan.forget) deps.metrics?.forget(network);
  const planned = plan.network;
  if (!planned) return {};
  if (planned.report.problems.length > 0) log.debug({ network, problems: planned.report.problems }, 'claims hold addresses the pool would not hand out');
  const outcomes = await mapLimit(planned.writes, WRITE_CONCURRENCY, async (w: StatusWrite): Promise<WriteOutcome> => {
    const status: NonNullable<IPAMClaim['status']> = { ips: w.ips, conditions: conditionsWith(w.claim, w.condition) };
    const outcome = await write(deps, network, w.claim, status, w.claim.metadata.resourceVersion ?? '', signal);
    if (outcome === 'written') {
      deps.metrics?.written(network, w.condition.reason ?? '');
      if (w.allocated) log.debug({ network, claim: w.key, ips: w.ips }, 'allocated addresses');
      else log.debug({ network, claim: w.key, reason: w.condition.reason }, 'updated claim condition');
    }
    return outcome;
  });
  if (plan.claimEvents) await deps.recorder.report(plan.claimEvents.scope, plan.claimEvents.causes);
  deps.metrics?.observe(network, planned.allocator.stats());
  const raced = outcomes.some((o) => o === 'raced' || o === 'rejected');
  const unknown = outcomes.includes('unknown');
  if (planned.skipped.length > 0) log.debug({ network, skipped: planned.skipped }, 'claims left for later');
  // Pods that cannot be read are an error worth a warning; an owner the cache has not shown yet is a moment's wait.
  if (planned.withheld)
    log[input.podsUnread ? 'warn' : 'debug']({ network, claims: planned.skipped.length }, `no new address on the network while ${planned.withheld}`);
  if (input.inUse.length > 0) log.debug({ network, inUse: input.inUse }, 'addresses of running VMs that no claim records are held back');
  return { requeue: raced || unknown || input.unsettled || input.podsUnread };
}

/** `fn` over `items`, at most `limit` at once; the results in the order of `items`. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, () => worker()));
  return out;
}
