// One reconcile of one key (`namespace/vmName`): read a snapshot from the caches, let the pure decision say what
// must change, write exactly that, and report what blocks persistence. Every rule lives in src/claims/ (named in the
// header of decide.ts); this file only moves data in and out.

import { keyString, parseKey } from '../kube/key.ts';
import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import {
  CLAIM_FINALIZER,
  claimName,
  collisionClaimName,
  decide,
  effectiveVmiSpec,
  hasActivePods,
  isUnfinishedLauncherPod,
  launcherPodSelector,
  namedClaims,
  needsLauncherPodRead,
  referenceClaimName,
  type DecideInput,
  type Plan,
} from '../claims/index.ts';
import type { KubeClient } from '../kube/client.ts';
import { ifFound, isAlreadyExists, isConflict, isInvalid, isNotFound, isTerminalApiError } from '../kube/errors.ts';
import { removeFinalizerPatch, type JsonPatchOp } from '../kube/patch.ts';
import { apiVersionOf, resources } from '../kube/resources.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VmiSpecLike } from '../kube/types.ts';
import type { ReconcileContext, ReconcileResult } from '../queue/index.ts';
import { TerminalError } from '../queue/index.ts';
import { CLAIMS_BY_OWNER_NAME, CLAIMS_BY_OWNER_UID, CLAIMS_BY_VM, nadKeysOf, type Sources } from '../sources/index.ts';
import { trimNetworkAttachmentDefinition, trimVirtualMachineInstance } from '../sources/trim.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { EventRecorder } from './events.ts';
import type { LoopReconciler, Request } from './loop.ts';
import type { WriteOverlay } from './write-overlay.ts';
import { type Api, pointRunningPods } from './running-pods.ts';

export interface ReconcilerDeps {
  sources: Pick<Sources, 'vms' | 'vmis' | 'nads' | 'claims'>;
  client: KubeClient;
  gateEnabled: () => boolean;
  recorder: EventRecorder;
  overlay: WriteOverlay;
  log: Logger;
  metrics?: Metrics;
  /** Running totals for the controller's periodic summary line. */
  tally?: ReconcileTally;
}

/** What the reconciler wrote, summed for the info-level summary (each write itself is logged at debug). */
export interface ReconcileTally {
  created: number;
  finalizersRemoved: number;
  deleted: number;
}

/** The decision's input for one key, read from the caches (and our own writes the caches have not shown yet). */
export function gatherInput({ namespace, name }: Request, deps: Pick<ReconcilerDeps, 'sources' | 'overlay' | 'gateEnabled'>): DecideInput {
  const { sources, overlay } = deps;
  const key = keyString({ namespace, name });
  const vm = sources.vms.getByKey(key);
  const vmi = sources.vmis.getByKey(key);
  const specs: (VmiSpecLike | undefined)[] = [vm?.spec?.template?.spec, vmi?.spec];

  const nads = new Map<string, NetworkAttachmentDefinition>();
  for (const nad of sources.nads.list(namespace)) nads.set(keyString(nad.metadata), nad);
  for (const spec of specs) {
    for (const nadKey of nadKeysOf(namespace, spec)) {
      const nad = sources.nads.getByKey(nadKey);
      if (nad) nads.set(nadKey, nad);
    }
  }

  // Claims that may concern this key: labelled for it, owned by any incarnation of its VM/VMI, or carrying a name
  // one of its networks would use (a hand-made claim or another owner's has neither label nor our owner).
  const claimKeys = new Set<string>();
  const addAll = (claims: readonly IPAMClaim[]) => {
    for (const c of claims) claimKeys.add(keyString(c.metadata));
  };
  addAll(sources.claims.byIndex(CLAIMS_BY_VM, key));
  addAll(sources.claims.byIndex(CLAIMS_BY_OWNER_NAME, key));
  for (const uid of [vm?.metadata.uid, vmi?.metadata.uid]) if (uid) addAll(sources.claims.byIndex(CLAIMS_BY_OWNER_UID, uid));
  // The VM template and its VMI mostly list the same networks: each network's names once.
  const networks = new Set<string>();
  for (const spec of specs) for (const net of effectiveVmiSpec(spec)?.networks ?? []) networks.add(net.name);
  for (const network of networks) {
    for (const named of [claimName, collisionClaimName, referenceClaimName]) claimKeys.add(keyString({ namespace, name: named(name, network) }));
  }
  const claims: IPAMClaim[] = [];
  for (const claimKey of claimKeys) {
    const claim = overlay.view(claimKey, sources.claims.getByKey(claimKey));
    if (claim) claims.push(claim);
  }

  return { key: { namespace, name }, vm, vmi, nads, claims, gateEnabled: deps.gateEnabled() };
}

/** What gather asks the API for, beyond the caches: the NADs they miss, and whether a VMI's launcher pods are gone. */
async function fromApi(input: DecideInput, api: Api): Promise<DecideInput> {
  return readLauncherPods(await fillMissingNads(input, api), api);
}

/**
 * A referenced NAD the cache does not hold may just not have reached it yet (created a moment before the VM):
 * ask the API before reporting it missing, so users never see a false NetworkAttachmentDefinitionNotFound.
 */
async function fillMissingNads(input: DecideInput, { client, log, signal }: Api): Promise<DecideInput> {
  const { namespace } = input.key;
  const referenced = new Set([...nadKeysOf(namespace, input.vm?.spec?.template?.spec), ...nadKeysOf(namespace, input.vmi?.spec)]);
  const missing = [...referenced].filter((k) => !input.nads.has(k));
  if (missing.length === 0) return input;
  const nads = new Map(input.nads);
  for (const nadKey of missing) {
    const { namespace: ns, name } = parseKey(nadKey);
    try {
      nads.set(nadKey, trimNetworkAttachmentDefinition(await client.get<unknown>(resources.networkAttachmentDefinitions, ns, name, { signal })));
    } catch (err) {
      // Not found is the answer we feared; anything else (e.g. no right to read another namespace) leaves the
      // cache's view standing, and the NAD's own events bring the key back.
      if (!isNotFound(err)) log.debug({ err, nad: nadKey }, 'could not read a NAD missing from the cache');
    }
  }
  return { ...input, nads };
}

/** The fresh read needsLauncherPodRead asks for: does the VMI have any launcher pod left, in any phase. */
async function readLauncherPods(input: DecideInput, { client, signal }: Api): Promise<DecideInput> {
  if (!needsLauncherPodRead(input)) return input;
  const pods = await client.list<unknown>(resources.pods, {
    namespace: input.key.namespace,
    labelSelector: launcherPodSelector(input.vmi!.metadata.uid!),
    limit: 1,
    signal,
  });
  return { ...input, launcherPodsGone: pods.items.length === 0 };
}

/**
 * The claims named by the VMI's launcher pods that have not finished (decide's SWAP): a pod being deleted still runs
 * its guest on those claims' addresses through its grace period, and no event of ours says when it has finished. No
 * VMI: no pod can name any.
 */
async function readRunningPods(input: DecideInput, { client, signal }: Api): Promise<DecideInput> {
  const uid = input.vmi?.metadata.uid;
  if (!uid) return { ...input, namedByRunningPods: new Set(), runningPodTerminating: false };
  const pods = await client.list<Pod>(resources.pods, { namespace: input.key.namespace, labelSelector: launcherPodSelector(uid), signal });
  const naming = pods.items.filter((pod) => isUnfinishedLauncherPod(pod, uid) && namedClaims(pod).length > 0);
  return { ...input, namedByRunningPods: new Set(naming.flatMap(namedClaims)), runningPodTerminating: naming.some((pod) => !!pod.metadata.deletionTimestamp) };
}

/**
 * The one more read a first plan may ask for. SWAP: only a plan can tell that the running pods must be read. And a
 * plan that deletes a claim or releases its finalizer (with no VMI, a SWAP read always ends in a delete), decided
 * while the cache shows no VMI of the key, is checked against the API first: the VMI may exist and run on the claim
 * while the cache has not shown it yet (a VM started and then deleted or edited at once, a VMI watch being
 * re-established). Freeing an address is worth one read; the steady state, which frees nothing, reads nothing. A VMI
 * found so is read as gather reads one, with its running pods (whether or not the plan will ask for them).
 */
async function gatherMore(input: DecideInput, plan: Plan, api: Api): Promise<DecideInput | undefined> {
  if (input.vmi) return plan.needsPodRead ? readRunningPods(input, api) : undefined;
  if (!plan.needsPodRead && plan.deletes.length === 0 && plan.removeFinalizers.length === 0) return undefined;
  const found = await ifFound(api.client.get<unknown>(resources.virtualMachineInstances, input.key.namespace, input.key.name, { signal: api.signal }));
  if (found === undefined) return readRunningPods(input, api);
  api.log.debug('the API has a VMI the cache does not show yet; deciding again with it');
  return readRunningPods(await fromApi({ ...input, vmi: trimVirtualMachineInstance(found) }, api), api);
}

/** Writes a plan. Returns true when something raced with us and the key should run again. */
async function apply(plan: Plan, namespace: string, deps: ReconcilerDeps, log: Logger, signal: AbortSignal): Promise<boolean> {
  const writes = new PlanWrites(namespace, deps, log, signal);
  await writes.createAll(plan.creates);
  for (const adoption of plan.adopts) await writes.adopt(adoption);
  for (const write of plan.removeFinalizers) await writes.release(write);
  for (const write of plan.deletes) await writes.delete(write);
  return writes.raced;
}

type ClaimWrite = Plan['removeFinalizers'][number];

/** Each ReconcileTally count, and the metric that counts the same writes. */
const METRIC_OF = { created: 'claimsCreated', finalizersRemoved: 'finalizersRemoved', deleted: 'claimsDeleted' } as const;

/**
 * The writes of one plan to the claims of one namespace. Each write the API server accepts is recorded the same way:
 * in the write overlay (so that the next reconcile does not act on a cache that has not shown it yet), and counted.
 */
class PlanWrites {
  /** Something raced with us: the key should run again. */
  raced = false;
  readonly #namespace: string;
  readonly #deps: ReconcilerDeps;
  readonly #log: Logger;
  readonly #signal: AbortSignal;

  constructor(namespace: string, deps: ReconcilerDeps, log: Logger, signal: AbortSignal) {
    this.#namespace = namespace;
    this.#deps = deps;
    this.#log = log;
    this.#signal = signal;
  }

  /**
   * A VM's claims are independent objects: created side by side, so a new VM waits for one round trip, not one per
   * network. Every create is attempted; the first failure that is not a race is raised once all have settled.
   */
  async createAll(claims: readonly IPAMClaim[]): Promise<void> {
    const failures: unknown[] = [];
    await Promise.all(claims.map((claim) => this.#create(claim, failures)));
    if (failures.length > 0) throw failures[0];
  }

  async #create(claim: IPAMClaim, failures: unknown[]): Promise<void> {
    const { client, overlay } = this.#deps;
    const claimKey = keyString({ namespace: this.#namespace, name: claim.metadata.name });
    overlay.beginCreate(claimKey);
    let created: IPAMClaim | null = null;
    try {
      created = await client.create<IPAMClaim>(resources.ipamClaims, claim, { signal: this.#signal });
      overlay.endCreate(claimKey, created);
      this.#count('created');
      this.#log.debug({ claim: claim.metadata.name, network: claim.spec.network }, 'created IPAMClaim');
    } catch (err) {
      if (created === null && overlay.endCreate(claimKey, null)) {
        // A claim of this name appeared while our create was in flight, and its watch event was taken for our
        // echo: it is not ours, so whatever the error, the decision must be made again with it in the cache.
        this.#log.debug({ claim: claim.metadata.name, err }, 'create failed while a claim of that name appeared; will look again');
        this.raced = true;
        return;
      }
      try {
        this.#failed(err, 'create', claim.metadata.name);
      } catch (raised) {
        failures.push(raised);
      }
    }
  }

  async adopt(adoption: Plan['adopts'][number]): Promise<void> {
    const { owner } = adoption;
    // decide's ORPHAN: `add` creates the list, or joins the owners someone else gave the claim. uid and
    // resourceVersion tests keep it from landing on another claim of that name, or on one someone changed meanwhile.
    const ops: JsonPatchOp[] = [
      { op: 'test', path: '/metadata/uid', value: adoption.uid },
      { op: 'test', path: '/metadata/resourceVersion', value: adoption.resourceVersion },
      adoption.append ? { op: 'add', path: '/metadata/ownerReferences/-', value: owner } : { op: 'add', path: '/metadata/ownerReferences', value: [owner] },
    ];
    try {
      await this.#patch(adoption.name, adoption.resourceVersion, ops);
      this.#log.info({ claim: adoption.name, owner: `${owner.kind} ${owner.name}` }, 'IPAMClaim without an owner (orphan deletion) owned again');
      await this.#deps.recorder.notice(
        { apiVersion: owner.apiVersion, kind: owner.kind, namespace: this.#namespace, name: owner.name, uid: owner.uid },
        {
          reason: 'ClaimAdopted',
          message: `IPAMClaim ${adoption.name} had lost its owner (the VM was deleted with --cascade=orphan); it is owned by this ${owner.kind} again`,
        },
      );
    } catch (err) {
      this.#failed(err, 'adoption', adoption.name, true);
    }
  }

  async release(write: ClaimWrite): Promise<void> {
    const claimKey = keyString({ namespace: this.#namespace, name: write.name });
    const current = this.#deps.overlay.view(claimKey, this.#deps.sources.claims.getByKey(claimKey));
    const ops = removeFinalizerPatch(current?.metadata.finalizers, CLAIM_FINALIZER);
    if (!ops) return;
    // The uid test keeps a patch from landing on a new claim of the same name; the resourceVersion test, from landing
    // on a claim that changed since the decision (garbage collection stripping a VM deleted with --cascade=orphan
    // makes it ORPHAN's to re-own, not ours to release); the finalizer-list test (in ops), from clobbering a
    // concurrent finalizer change.
    const guarded: JsonPatchOp[] = [
      { op: 'test', path: '/metadata/uid', value: write.uid },
      { op: 'test', path: '/metadata/resourceVersion', value: write.resourceVersion },
      ...ops,
    ];
    try {
      await this.#patch(write.name, write.resourceVersion, guarded, 'finalizersRemoved');
      this.#log.debug({ claim: write.name }, 'removed finalizer from IPAMClaim');
    } catch (err) {
      this.#failed(err, 'finalizer removal', write.name, true);
    }
  }

  async delete(write: ClaimWrite): Promise<void> {
    try {
      const result = await this.#deps.client.delete(resources.ipamClaims, this.#namespace, write.name, {
        preconditions: { uid: write.uid, resourceVersion: write.resourceVersion },
        signal: this.#signal,
      });
      const stillThere = (result as IPAMClaim | undefined)?.kind === resources.ipamClaims.kind ? (result as IPAMClaim) : null;
      this.#record(write.name, write.resourceVersion, stillThere, 'deleted');
      this.#log.debug({ claim: write.name }, 'deleted IPAMClaim of a network the VM no longer has');
      // Unused (Plan.deletes): released now, from the answer, whatever the watch shows and whenever it does.
      const ops = stillThere ? removeFinalizerPatch(stillThere.metadata.finalizers, CLAIM_FINALIZER) : undefined;
      if (stillThere && ops) {
        await this.#patch(write.name, write.resourceVersion, [{ op: 'test', path: '/metadata/uid', value: write.uid }, ...ops], 'finalizersRemoved');
        this.#log.debug({ claim: write.name }, 'removed finalizer from the IPAMClaim just deleted');
      }
    } catch (err) {
      this.#failed(err, 'delete', write.name, true);
    }
  }

  async #patch(name: string, before: string, ops: JsonPatchOp[], counted?: keyof ReconcileTally): Promise<void> {
    const updated = await this.#deps.client.jsonPatch<IPAMClaim>(resources.ipamClaims, this.#namespace, name, ops, { signal: this.#signal });
    this.#record(name, before, updated, counted);
  }

  /** A write of claim `name` made against resourceVersion `before` that the API server answered with `answer`. */
  #record(name: string, before: string, answer: IPAMClaim | null, counted?: keyof ReconcileTally): void {
    this.#deps.overlay.record(keyString({ namespace: this.#namespace, name: name }), before, answer);
    if (counted) this.#count(counted);
  }

  #count(what: keyof ReconcileTally): void {
    this.#deps.metrics?.[METRIC_OF[what]].inc();
    if (this.#deps.tally) this.#deps.tally[what]++;
  }

  #failed(err: unknown, what: string, claim: string, guardedPatch = false): void {
    if (isNotFound(err)) return; // already gone: what we wanted
    // Some API server versions answer a failed JSON-patch `test` with a bare 422, indistinguishable from an invalid
    // patch; ours are built from the cached object, so a 422 there means the object changed: look again.
    if (isConflict(err) || isAlreadyExists(err) || (guardedPatch && isInvalid(err))) {
      this.#log.debug({ claim, err }, `${what} raced with another change; will look again`);
      this.raced = true;
      return;
    }
    if (isTerminalApiError(err)) throw new TerminalError(`${what} of IPAMClaim ${this.#namespace}/${claim} was rejected`, { cause: err });
    throw err;
  }
}

/** What one reconcile works on: the decision's input, and the reconcile's logger. */
export interface Gathered {
  input: DecideInput;
  log: Logger;
}

export function createReconciler(deps: ReconcilerDeps): LoopReconciler<Gathered, Plan> {
  /** Running launcher pods already pointed at the claims made after they started (running-pods.ts). */
  const checkedPods = new Map<string, boolean>();
  const gather = async (request: Request, ctx: ReconcileContext): Promise<Gathered> => {
    const log = deps.log.child({ namespace: request.namespace, name: request.name, reconcileID: randomUUID() });
    return { input: await fromApi(gatherInput(request, deps), { client: deps.client, log, signal: ctx.signal }), log };
  };
  const gatherMoreOf = async ({ input, log }: Gathered, plan: Plan, ctx: ReconcileContext): Promise<Gathered | undefined> => {
    const more = await gatherMore(input, plan, { client: deps.client, log, signal: ctx.signal });
    return more && { input: more, log };
  };
  const applyPlan = async ({ namespace }: Request, { input, log }: Gathered, plan: Plan, ctx: ReconcileContext): Promise<ReconcileResult> => {
    const raced = await apply(plan, namespace, deps, log, ctx.signal);
    const running = await pointRunningPods(input, plan, checkedPods, { client: deps.client, log, signal: ctx.signal });
    const problems = [...plan.problems, ...running.problems];
    if (plan.owner) {
      const kind = plan.owner.kind === 'VirtualMachine' ? resources.virtualMachines : resources.virtualMachineInstances;
      await deps.recorder.report({ apiVersion: apiVersionOf(kind), kind: plan.owner.kind, namespace, name: plan.owner.name, uid: plan.owner.uid }, problems);
    } else if (plan.problems.length > 0) {
      log.warn({ problems: plan.problems }, 'persistence blocked, and no VM or VMI to report it on');
    }
    if (plan.retry) log.debug({ problems: plan.problems.map((p) => p.reason) }, 'waiting; will retry with backoff');
    // A claim made just now for a running VMI: the next pass sees it (the overlay holds our create) and points the
    // running pod at it (pointRunningPods). Our create's own event is not one that brings the key back, and waiting
    // for another event or the resync would leave a migration meanwhile to give its target a new address. Through the
    // key's backoff (5 ms the first time), so that a create that keeps failing quietly cannot spin.
    const madeForRunningVmi = plan.creates.length > 0 && hasRunningPods(input.vmi);
    return { requeue: raced || plan.retry || running.retry || madeForRunningVmi };
  };
  return { gather, decide: ({ input }) => decide(input), gatherMore: gatherMoreOf, apply: applyPlan };
}

function hasRunningPods(vmi: DecideInput['vmi']): boolean {
  return !!vmi && !vmi.metadata.deletionTimestamp && hasActivePods(vmi);
}
