// One error type for everything the API server (or the network on the way to it) can say, classified the way a
// reconciler needs to act on it: ignore, retry with backoff, relist, re-read and retry, or give up.

/** The object a request concerned. `name` is absent for collection requests (list, watch, create by generateName). */
export interface ObjectRef {
  kind: string;
  namespace?: string;
  name?: string;
}

export type ApiErrorReason =
  | 'notFound' // 404
  | 'alreadyExists' // 409 on create
  | 'conflict' // 409 otherwise (stale resourceVersion, failed precondition), and a failed JSON-patch `test`
  | 'gone' // 410: resourceVersion or continue token expired; the caller must relist
  | 'invalid' // 422: the object itself is rejected; retrying the same request cannot help
  | 'badRequest' // 400, 405, 406, 415: the request is malformed; a bug, not a condition
  | 'forbidden' // 403: RBAC, or the namespace is terminating
  | 'unauthorized' // 401: credentials missing or expired
  | 'transient' // 408, 429, 5xx, network failures and timeouts
  | 'unknown';

/** The `Status` object the API server returns with a failure (also the object of a watch ERROR event). */
export interface ApiStatus {
  kind?: string;
  apiVersion?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
    retryAfterSeconds?: number;
  };
}

export class KubeApiError extends Error {
  override readonly name: string = 'KubeApiError';
  readonly reason: ApiErrorReason;
  /** The HTTP status code; undefined when no response arrived. */
  readonly code: number | undefined;
  readonly object: ObjectRef;
  readonly verb: string;
  readonly status: ApiStatus | undefined;
  /** How long the server asked us to wait (Retry-After or details.retryAfterSeconds). */
  readonly retryAfterSeconds: number | undefined;

  constructor(init: {
    reason: ApiErrorReason;
    object: ObjectRef;
    verb: string;
    code?: number;
    status?: ApiStatus;
    message?: string;
    retryAfterSeconds?: number;
    cause?: unknown;
  }) {
    const what = describeRef(init.object);
    const detail = init.message ?? init.status?.message ?? init.status?.reason ?? 'request failed';
    const code = init.code === undefined ? '' : ` ${init.code}`;
    super(`${init.verb} ${what}: ${init.reason}${code}: ${detail}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.reason = init.reason;
    this.code = init.code;
    this.object = init.object;
    this.verb = init.verb;
    this.status = init.status;
    this.retryAfterSeconds = init.retryAfterSeconds;
  }

  /** Retrying the same request cannot succeed; report and wait for the object to change. */
  get terminal(): boolean {
    return this.reason === 'invalid' || this.reason === 'badRequest';
  }
}

function describeRef(ref: ObjectRef): string {
  const path = ref.namespace ? `${ref.namespace}/${ref.name ?? '*'}` : (ref.name ?? '*');
  return `${ref.kind} ${path}`;
}

// Older apiservers put the patch library's message in the Status; some proxies still do.
const PATCH_TEST_FAILED = /testing value .* failed|test operation .* failed|test failed/i;

export interface ClassifyContext {
  /** The request was an RFC 6902 JSON patch. */
  jsonPatch?: boolean;
}

/**
 * A JSON patch that cannot be applied to the current object (a failed `test`, a path that no longer exists) is
 * answered by kube-apiserver 1.34 with 422 reason Invalid, the generic message "the server rejected our request due
 * to an error in our request" and empty details, while a patched object that fails validation gets 422 with
 * details.causes. The first means "the object changed under you": a conflict, to re-read and retry; only the
 * second is an invalid object.
 */
function isUnappliableJsonPatch(code: number, status: ApiStatus | undefined, ctx: ClassifyContext): boolean {
  if (code !== 422) return false;
  if (PATCH_TEST_FAILED.test(status?.message ?? '')) return true;
  return !!ctx.jsonPatch && !(status?.details?.causes && status.details.causes.length > 0) && !status?.details?.name;
}

/** What each class is called in a Status body's `reason` (which decides first), and by HTTP status code. */
const CLASSES: [ApiErrorReason, statusReasons: string[], codes: number[]][] = [
  ['notFound', ['NotFound'], [404]],
  ['alreadyExists', ['AlreadyExists'], []],
  ['conflict', ['Conflict'], []],
  ['gone', ['Gone', 'Expired'], [410]],
  ['invalid', [], [422]],
  ['unauthorized', ['Unauthorized'], [401]],
  ['forbidden', ['Forbidden'], [403]],
  ['badRequest', [], [400, 405, 406, 415]],
  ['transient', ['TooManyRequests', 'ServerTimeout', 'Timeout', 'ServiceUnavailable', 'InternalError'], [408, 429]],
];

/** Classifies an HTTP failure from its status code and, when present, the Status body's `reason`. */
export function classifyStatus(code: number, status?: ApiStatus, verb?: string, ctx: ClassifyContext = {}): ApiErrorReason {
  if (isUnappliableJsonPatch(code, status, ctx)) return 'conflict';
  const named = CLASSES.find(([, reasons]) => reasons.includes(status?.reason ?? ''));
  if (named) return named[0];
  if (code === 409) return verb === 'create' ? 'alreadyExists' : 'conflict';
  if (code >= 500 && code <= 599) return 'transient';
  return CLASSES.find(([, , codes]) => codes.includes(code))?.[0] ?? 'unknown';
}

/** Parses a failure body (a Status, or anything else) into a classified error. */
export function errorFromResponse(
  code: number,
  body: string,
  object: ObjectRef,
  verb: string,
  headers: Record<string, string> = {},
  ctx: ClassifyContext = {},
): KubeApiError {
  let status: ApiStatus | undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object' && (parsed as ApiStatus).kind === 'Status') status = parsed as ApiStatus;
  } catch {
    // Proxies and load balancers answer with HTML or plain text; the code alone then decides.
  }
  const header = headers['retry-after'] === undefined ? Number.NaN : Number(headers['retry-after']);
  const retryAfter = Number.isFinite(header) && header >= 0 ? header : status?.details?.retryAfterSeconds;
  const reason = classifyStatus(code, status, verb, ctx);
  let message = status?.message ?? (body.trim().slice(0, 300) || undefined);
  if (reason === 'conflict' && code === 422) message = `JSON patch does not apply to the current object (a test failed or a path is gone): ${message ?? ''}`;
  return new KubeApiError({
    reason,
    object,
    verb,
    code,
    status,
    message,
    retryAfterSeconds: retryAfter,
  });
}

/** A watch ERROR event carries a Status instead of an object; 410 there means the same as an HTTP 410. */
export function errorFromWatchStatus(status: ApiStatus, object: ObjectRef): KubeApiError {
  const code = typeof status.code === 'number' ? status.code : 500;
  return new KubeApiError({ reason: classifyStatus(code, status, 'watch'), object, verb: 'watch', code, status });
}

// Error codes (Node's system errors, undici's, node:http2's) that mean the request may well succeed if repeated.
const TRANSIENT_NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_ABORTED',
  // HTTP/2: the server reset the stream or is closing the connection, or the connection ran out of stream ids.
  // Not ERR_HTTP2_STREAM_CANCEL: it wraps whatever destroyed the connection, a TLS failure included, and its cause
  // decides.
  'ERR_HTTP2_STREAM_ERROR',
  'ERR_HTTP2_SESSION_ERROR',
  'ERR_HTTP2_GOAWAY_SESSION',
  'ERR_HTTP2_INVALID_SESSION',
  'ERR_HTTP2_OUT_OF_STREAMS',
]);

function errorCodes(err: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e && typeof e === 'object' && !seen.has(e)) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    const name = (e as { name?: unknown }).name;
    if (name === 'TimeoutError') codes.push('ETIMEDOUT');
    // AggregateError from happy-eyeballs connects carries the per-address failures.
    const inner = (e as { errors?: unknown }).errors;
    if (Array.isArray(inner)) for (const x of inner) codes.push(...errorCodes(x));
    e = (e as { cause?: unknown }).cause;
  }
  return codes;
}

/**
 * Wraps an exception raised before any HTTP status was received. Network failures and timeouts are transient;
 * anything else (TLS verification, a malformed URL) is `unknown`, because retrying will not fix a configuration.
 */
export function errorFromException(err: unknown, object: ObjectRef, verb: string): KubeApiError {
  if (err instanceof KubeApiError) return err;
  const codes = errorCodes(err);
  const transient = codes.some((c) => TRANSIENT_NETWORK_CODES.has(c)) || (err instanceof TypeError && err.message === 'fetch failed' && codes.length === 0);
  const message = err instanceof Error ? describeException(err) : String(err);
  return new KubeApiError({ reason: transient ? 'transient' : 'unknown', object, verb, message, cause: err });
}

function describeException(err: Error): string {
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

const is =
  (reason: ApiErrorReason) =>
  (err: unknown): err is KubeApiError =>
    err instanceof KubeApiError && err.reason === reason;

export const isNotFound = is('notFound');

/** A read whose 404 means "there is none": resolves undefined then, rejects on any other failure. */
export async function ifFound<T>(request: Promise<T>): Promise<T | undefined> {
  try {
    return await request;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
export const isAlreadyExists = is('alreadyExists');
export const isConflict = is('conflict');
export const isGone = is('gone');
export const isInvalid = is('invalid');
export const isForbidden = is('forbidden');
export const isUnauthorized = is('unauthorized');
export const isTransient = is('transient');

/** True for errors whose retry cannot succeed without a change (invalid object, malformed request). */
export function isTerminalApiError(err: unknown): boolean {
  return err instanceof KubeApiError && err.terminal;
}
