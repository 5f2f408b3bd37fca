// AdmissionReview v1 in, AdmissionReview v1 out, for launcher pods: find the pod's VMI and NADs (caches first, the
// API when the caches have not seen them), run the pure mutation, and answer. Every request first passes
// claim-guard.ts, which refuses (403) any other pod, and any Binding, that would name a claim.
//
// ERROR BEHAVIOUR (see docs/webhook-behaviour.md; docs/webhook.md explains failurePolicy Fail):
// - The VMI cannot be read (API error or timeout, when the cache has not seen it): DENY, with a message that names
//   the VMI and says it is transient. Allowing would start the VM with an address from the general pool instead of
//   its claim's, the one outcome this product exists to prevent, and silently; a denial makes virt-controller
//   record FailedCreate and retry the pod with backoff, which recovers by itself once the API answers. It is the
//   same trade-off as failurePolicy Fail, made explicitly and answered before the API server's own timeout (5 s):
//   a timeout would be judged by failurePolicy and, if an operator switched it to Ignore, admit the pod without
//   the reference.
// - The API says the VMI does not exist (authoritative 404), or it exists with another UID than the pod's owner
//   reference: ALLOW unchanged, with a warning. The pod belongs to a VMI that is gone; no claim will be made for it
//   and garbage collection removes the pod. Denying would only keep a dead object retrying.
// - A NAD the VMI references cannot be read (API error): DENY, same reasoning as the VMI. A NAD that does not exist:
//   the network is not persistent (the CNI fails that pod anyway), reported.
// - The pod's annotations cannot be parsed: ALLOW unchanged with a warning and a log line. Multus will reject the
//   same annotation; rewriting something we cannot read could only make it worse.
// - The pod has no controller owner reference to a VMI (a copy made by `kubectl debug --copy-to`, a hand-made pod
//   with the launcher label and kubevirt.io/domain): ALLOW unchanged with a warning, and DENY it if it already names
//   a claim. Nothing but that owner reference, uid and all, ties a pod to its VMI.
// - UPDATE (carry-over.ts): every reference of the old object is put back on its element whatever the gate, the NADs
//   or the caches say, so a running pod never loses one (virt-controller rebuilds the annotation without them); an
//   UPDATE that changes one is DENIED. Only elements new at this UPDATE, or gaining a reference, are decided, with
//   CREATE's checks, wait and API read.
// - A pod whose networks cannot be persistent judged from the NADs alone (all NADs known and ordinary, no
//   persistent primary network) is admitted without reading its VMI, so VMs on ordinary networks never wait for
//   the VMI lookups above.
// - Built-in allocator networks (docs/allocator.md, "Pod admission"): a pod whose claim has no address yet, or was
//   refused one, is DENIED with the reason (KubeVirt retries); never admitted with an address other than its
//   claim's. A claim that cannot be read: DENY, as for the VMI.
//
// The shape: this module is the I/O shell. It classifies the request and runs claim-guard.ts (admission-request.ts),
// then asks the pure launcher-pod rules (admission-decide.ts) for a verdict, reading what they ask for first
// (admission-gather.ts), and answers (admission-verdicts.ts, whose header is the table of every refusal).

import { isObject } from '../claims/nad-config.ts';
import { controllerRef } from '../claims/index.ts';
import { ifFound } from '../kube/errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { apiVersionOf, resources, type ResourceDescriptor } from '../kube/resources.ts';
import type { VirtualMachineInstance } from '../kube/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { AdmissionRequest, AdmissionResponse, AdmissionReview, DenialTarget, Fetch, PodAdmissionDeps } from './admission-types.ts';
import { carryOverReferences } from './carry-over.ts';
import { mayNeedReferences } from './pod-mutation.ts';
import { guardClaimReferences } from './claim-guard.ts';
import { classifyRequest } from './admission-request.ts';
import { claimsToProve, decideAdmission, type AdmissionFacts } from './admission-decide.ts';
import { fetchVmi, nadsForPod, readNetworks, readVmi, TransientLookupError } from './admission-gather.ts';
import { allow, deny, refusal, respond, type Verdict } from './admission-verdicts.ts';

export { vmiOf } from './admission-decide.ts';
export type { AdmissionReview, Fetch, ObjectCache, PodAdmissionDeps } from './admission-types.ts';

export function denialTargetOf(vmi: VirtualMachineInstance, namespace: string): DenialTarget | undefined {
  const vmRef = controllerRef(vmi, 'VirtualMachine');
  if (vmRef?.uid)
    return { apiVersion: vmRef.apiVersion || apiVersionOf(resources.virtualMachines), kind: 'VirtualMachine', namespace, name: vmRef.name, uid: vmRef.uid };
  const { name, uid } = vmi.metadata;
  return uid ? { apiVersion: apiVersionOf(resources.virtualMachineInstances), kind: 'VirtualMachineInstance', namespace, name, uid } : undefined;
}

/** A request that is not an AdmissionReview v1: the server answers HTTP 400. */
export class BadAdmissionReviewError extends Error {
  override readonly name = 'BadAdmissionReviewError';
}

/** Builds GET functions for the deps from src/kube's client (404 → undefined). */
export function apiFetchers(client: Pick<KubeClient, 'get'>): Required<Pick<PodAdmissionDeps, 'fetchVmi' | 'fetchNad' | 'fetchClaim'>> {
  const fetcher =
    <T>(r: ResourceDescriptor): Fetch<T> =>
    (namespace, name, signal) =>
      ifFound(client.get<T>(r, namespace, name, { signal }));
  return {
    fetchVmi: fetcher(resources.virtualMachineInstances),
    fetchNad: fetcher(resources.networkAttachmentDefinitions),
    fetchClaim: fetcher(resources.ipamClaims),
  };
}

/** Validates the envelope; throws BadAdmissionReviewError when it is not an AdmissionReview v1 with a request. */
export function readAdmissionReview(body: unknown): AdmissionRequest {
  if (!isObject(body)) throw new BadAdmissionReviewError('the body is not a JSON object');
  if (body['apiVersion'] !== 'admission.k8s.io/v1' || body['kind'] !== 'AdmissionReview') {
    throw new BadAdmissionReviewError(`expected admission.k8s.io/v1 AdmissionReview, got ${String(body['apiVersion'])} ${String(body['kind'])}`);
  }
  const request = body['request'];
  if (!isObject(request) || typeof request['uid'] !== 'string' || request['uid'] === '') {
    throw new BadAdmissionReviewError('the AdmissionReview has no request uid');
  }
  return request as unknown as AdmissionRequest;
}

export function reviewResponse(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

export type PodAdmissionHandler = (body: unknown, signal?: AbortSignal) => Promise<AdmissionReview>;

export function createPodAdmissionHandler(deps: PodAdmissionDeps): PodAdmissionHandler {
  const budgetMs = deps.budgetMs ?? 3000;
  const shell: Shell = {
    deps,
    log: deps.logger.child({ component: 'webhook' }),
    claimWaitMs: Math.max(0, Math.min(deps.claimWaitMs ?? 1000, budgetMs - 1000)),
  };
  return async (body, outer) => {
    const request = readAdmissionReview(body);
    const deadline = AbortSignal.timeout(budgetMs);
    const signal = outer ? AbortSignal.any([outer, deadline]) : deadline;
    let answer: ReturnType<typeof respond>;
    try {
      answer = respond(request.uid, await admit(shell, request, signal));
    } catch (error) {
      if (!(error instanceof TransientLookupError)) throw error;
      shell.log.warn({ err: error, object: error.object, namespace: request.namespace, uid: request.uid }, 'denying launcher pod: lookup failed');
      answer = respond(request.uid, deny(refusal('LookupFailed', error.message)));
    }
    deps.metrics?.admissions.inc({ result: answer.outcome });
    return reviewResponse(answer.response);
  };
}

interface Shell {
  deps: PodAdmissionDeps;
  log: Logger;
  claimWaitMs: number;
}

/** claim-guard.ts first, on every request; then the launcher-pod rules. */
async function admit(shell: Shell, request: AdmissionRequest, signal: AbortSignal): Promise<Verdict> {
  const req = classifyRequest(request, shell.deps.watchNamespace);
  if (!req) return allow('skipped');
  const plog = shell.log.child({
    namespace: req.namespace,
    pod: req.podName,
    operation: req.operation,
    uid: request.uid,
    ...(request.subResource ? { subResource: request.subResource } : {}),
    ...(request.dryRun ? { dryRun: true } : {}),
  });
  const guarded = guardClaimReferences(req.guard);
  if (guarded)
    return emit(
      plog,
      deny(refusal('ClaimGuard', guarded.message), [{ level: 'warn', fields: { rule: guarded.rule, claims: guarded.claims }, message: guarded.message }]),
    );
  if (!req.launcher) return allow('skipped');

  // UPDATE: every reference of the running pod is carried over first, from the two objects alone (carry-over.ts):
  // nothing below (the gate, the caches, the NADs) may take one away. Only fresh elements are decided.
  const carry = req.operation === 'UPDATE' ? carryOverReferences(req.oldPod, req.pod, req.namespace) : undefined;
  if (carry && carry.carried.length > 0) plog.info({ carried: carry.carried }, 'restored IPAM claim references the update dropped');
  const subject = carry?.pod ?? req.pod;
  const { deps } = shell;
  const facts: AdmissionFacts = {
    namespace: req.namespace,
    podName: req.podName,
    operation: req.operation,
    ...(carry ? { carry } : {}),
    subject,
    named: claimsToProve(subject, carry),
    synced: deps.synced ? deps.synced() : true,
    gateEnabled: deps.gateEnabled(),
    ...(deps.clusterDefaultNetwork ? { clusterDefaultNetwork: deps.clusterDefaultNetwork } : {}),
  };
  const verdict = emit(plog, await decideWithReads(shell, facts, plog, signal));
  const vmi = facts.vmi?.value;
  const target = verdict.events && vmi && !request.dryRun ? denialTargetOf(vmi, req.namespace) : undefined;
  if (target && verdict.events) deps.reportDenials?.(target, verdict.events);
  return verdict;
}

/** decideAdmission, reading each fact it asks for until it decides. */
async function decideWithReads(shell: Shell, facts: AdmissionFacts, plog: Logger, signal: AbortSignal): Promise<Verdict> {
  const { deps } = shell;
  let waitUntil: number | undefined;
  for (;;) {
    const decision = decideAdmission(facts);
    if (!('need' in decision)) return decision;
    switch (decision.need) {
      case 'nads':
        facts.mayNeedReferences = mayNeedReferences(facts.subject, facts.namespace, await nadsForPod(deps, facts.subject, facts.namespace));
        break;
      case 'vmi':
        facts.vmi = await readVmi(deps, facts.namespace, decision.owner, signal);
        break;
      case 'vmiFromApi':
        plog.child({ vmi: decision.owner.name }).debug('the cached VMI looks older than the pod; reading it from the API');
        facts.vmi = { value: await fetchVmi(deps, facts.namespace, decision.owner.name, signal), fromApi: true };
        delete facts.networks;
        break;
      case 'networks':
        waitUntil ??= Date.now() + shell.claimWaitMs;
        facts.networks = await readNetworks(deps, facts.operation, facts.namespace, decision.vmi, waitUntil, signal);
        break;
    }
  }
}

/** Writes the log lines of a verdict; returns it. */
function emit(plog: Logger, verdict: Verdict): Verdict {
  for (const { level, message, fields, vmi } of verdict.logs) {
    const logger = vmi === undefined ? plog : plog.child({ vmi });
    if (fields) logger[level](fields, message);
    else logger[level](message);
  }
  return verdict;
}
