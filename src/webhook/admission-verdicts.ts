// What the webhook answers, in one place. Every refusal it gives is a row of this table (REFUSALS below): a new
// refusal has this one home. A retriable refusal is a 503, which KubeVirt retries with backoff (the answer can change
// once the API answers, the controller has created the claim, or the caches have synced); a final one is a 403, since
// the same object would be refused again.
//
// | refusal          | code | retriable | when                                                                          |
// |------------------|------|-----------|-------------------------------------------------------------------------------|
// | ClaimGuard       | 403  | no        | claim-guard.ts refuses the request: a Binding, or a pod that is not a         |
// |                  |      |           | launcher pod, would name a claim, or a reference cannot be read as Go reads it |
// | ReferenceChanged | 403  | no        | an UPDATE of a launcher pod changes or drops a reference (carry-over.ts)      |
// | NotSynced        | 503  | yes       | the caches have not had their first full list                                 |
// | UnprovenClaim    | 403  | no        | a launcher pod names a claim, and nothing shows the claim is its VM's         |
// | NotAdmittedYet   | 503  | yes       | a claim the pod needs is not its VM's (yet), or has no address for it         |
// | LookupFailed     | 503  | yes       | the VMI, a NAD or a claim cannot be read (API error or timeout)               |

import type { JsonPatchOp } from '../kube/patch.ts';
import type { AdmissionResponse } from './admission-types.ts';

/** The `result` label of the admissions metric. */
export type Outcome = 'patched' | 'unchanged' | 'skipped' | 'denied' | 'allowed_without_vmi' | 'unreadable';

const REFUSALS = {
  ClaimGuard: { retriable: false, message: (guarded: string) => guarded },
  ReferenceChanged: {
    retriable: false,
    message: (pod: string, refusals: readonly string[]) => `persistent-ips: update of launcher pod ${pod} refused: ${refusals.join('; ')}`,
  },
  NotSynced: {
    retriable: true,
    message: (pod: string) => `persistent-ips is starting and has not read the cluster yet; launcher pod ${pod} will be admitted on KubeVirt's retry`,
  },
  UnprovenClaim: {
    retriable: false,
    message: (pod: string, named: readonly string[], why: string) =>
      `persistent-ips: launcher pod ${pod} names IPAMClaim ${named.join(', ')}, but ${why}; nothing shows the claim is its VM's, so the pod is refused`,
  },
  NotAdmittedYet: {
    retriable: true,
    message: (denials: readonly { message: string }[]) =>
      `persistent-ips: launcher pod not admitted yet: ${denials.map((d) => d.message).join('; ')}. ` +
      "The pod is rejected rather than started with an address that is not its own claim's; KubeVirt retries the pod creation.",
  },
  LookupFailed: {
    retriable: true,
    message: (cause: string) =>
      `persistent-ips: cannot admit launcher pod yet: ${cause}. ` +
      'The pod is rejected rather than started without its persistent IP address; KubeVirt retries the pod creation.',
  },
} as const;

type Refusals = typeof REFUSALS;
export type RefusalReason = keyof Refusals;

export interface Refusal {
  reason: RefusalReason;
  message: string;
}

export function refusal<R extends RefusalReason>(reason: R, ...args: Parameters<Refusals[R]['message']>): Refusal {
  return { reason, message: (REFUSALS[reason].message as (...a: typeof args) => string)(...args) };
}

/** A log line a decision asks for, written by the caller's logger (with the VMI's name when `vmi` is set). */
export interface LogLine {
  level: 'debug' | 'info' | 'warn';
  message: string;
  fields?: Record<string, unknown>;
  vmi?: string;
}

/** What the Events on the pod's VM say: the causes of a denial, or none (a pod was admitted: clears them). */
export type DenialCauses = { reason: string; message: string }[];

export type Verdict = (
  | { allowed: true; outcome: Exclude<Outcome, 'denied'>; patch: readonly JsonPatchOp[]; warnings: readonly string[] }
  | { allowed: false; refusal: Refusal }
) & { logs: LogLine[]; events?: DenialCauses };

/** Admit; any patch (carried references, the mutation) makes the outcome `patched`. */
export function allow(
  outcome: Exclude<Outcome, 'denied'>,
  patch: readonly JsonPatchOp[] = [],
  warnings: readonly string[] = [],
  logs: LogLine[] = [],
): Verdict {
  return { allowed: true, outcome: patch.length > 0 ? 'patched' : outcome, patch, warnings, logs };
}

export function deny(refused: Refusal, logs: LogLine[] = []): Verdict {
  return { allowed: false, refusal: refused, logs };
}

const encodePatch = (ops: readonly JsonPatchOp[]): string => Buffer.from(JSON.stringify(ops), 'utf8').toString('base64');

export function respond(uid: string, verdict: Verdict): { response: AdmissionResponse; outcome: Outcome } {
  if (!verdict.allowed) {
    const { message } = verdict.refusal;
    const status = REFUSALS[verdict.refusal.reason].retriable
      ? { code: 503, reason: 'ServiceUnavailable', message }
      : { code: 403, reason: 'Forbidden', message };
    return { response: { uid, allowed: false, status }, outcome: 'denied' };
  }
  const warnings = verdict.warnings.length ? { warnings: [...verdict.warnings] } : {};
  if (verdict.patch.length === 0) return { response: { uid, allowed: true, ...warnings }, outcome: verdict.outcome };
  return { response: { uid, allowed: true, patchType: 'JSONPatch', patch: encodePatch(verdict.patch), ...warnings }, outcome: verdict.outcome };
}
