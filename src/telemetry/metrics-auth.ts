// Who may read /metrics, decided by the cluster as controller-runtime's secure metrics filter does: the bearer token
// is checked with a TokenReview, and the user it names must be allowed `get` on the non-resource URL /metrics by a
// SubjectAccessReview (the metrics-reader ClusterRole grants exactly that). Answers are cached briefly so that a
// Prometheus scraping every few seconds costs the API server two requests a minute, not two per scrape.

import type { KubeClient } from '../kube/client.ts';
import type { ResourceDescriptor } from '../kube/resources.ts';

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export interface ReviewClient {
  /** The user a bearer token belongs to, or undefined when the API server does not accept the token. */
  authenticate(token: string, signal: AbortSignal): Promise<UserInfo | undefined>;
  /** Whether `user` may `verb` the non-resource URL `path`. */
  authorize(user: UserInfo, verb: string, path: string, signal: AbortSignal): Promise<{ allowed: boolean; reason?: string }>;
}

export type AuthDecision = { status: 200; user: string } | { status: 401 | 403 | 500; message: string };

type Review<S> = { apiVersion: string; kind: string; metadata?: never; spec: object; status?: S };

/** Creates a review (cluster-scoped, v1) of `kind` in `group` and returns the status the API server filled in. */
async function review<S>(client: KubeClient, group: string, kind: string, spec: object, signal: AbortSignal): Promise<S | undefined> {
  const resource: ResourceDescriptor = { group, version: 'v1', plural: `${kind.toLowerCase()}s`, kind, namespaced: false };
  const created = await client.create<Review<S>>(resource, { apiVersion: `${group}/v1`, kind, spec }, { signal });
  return created.status;
}

/** TokenReview and SubjectAccessReview through the controller's own client (RBAC: create on both). */
export function kubeReviewClient(client: KubeClient): ReviewClient {
  return {
    async authenticate(token, signal) {
      type Status = { authenticated?: boolean; user?: UserInfo; error?: string };
      const status = await review<Status>(client, 'authentication.k8s.io', 'TokenReview', { token }, signal);
      return status?.authenticated && status.user?.username ? status.user : undefined;
    },
    async authorize(user, verb, path, signal) {
      const spec = {
        user: user.username,
        ...(user.uid ? { uid: user.uid } : {}),
        ...(user.groups ? { groups: user.groups } : {}),
        ...(user.extra ? { extra: user.extra } : {}),
        nonResourceAttributes: { path, verb },
      };
      const status = await review<{ allowed?: boolean; reason?: string }>(client, 'authorization.k8s.io', 'SubjectAccessReview', spec, signal);
      return { allowed: status?.allowed === true, ...(status?.reason ? { reason: status.reason } : {}) };
    },
  };
}

export interface MetricsAuthOptions {
  reviews: ReviewClient;
  /** How long an accepted token / an allowed user is remembered (default 60 s, as controller-runtime). */
  allowedTtlMs?: number;
  /** How long a rejected token / a denied user is remembered (default 10 s). */
  deniedTtlMs?: number;
  /** Most answers kept per cache (default 1024); the oldest go first. */
  maxEntries?: number;
  now?: () => number;
}

class ExpiringCache<V> {
  readonly #entries = new Map<string, { value: V; until: number }>();
  readonly #max: number;
  readonly #now: () => number;
  constructor(max: number, now: () => number) {
    this.#max = max;
    this.#now = now;
  }
  get(key: string): V | undefined {
    const hit = this.#entries.get(key);
    if (hit && hit.until > this.#now()) return hit.value;
    this.#entries.delete(key); // expired (or absent)
    return undefined;
  }
  set(key: string, value: V, ttlMs: number): void {
    this.#entries.delete(key);
    if (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { value, until: this.#now() + ttlMs });
  }
}

/** `Authorization` header → a decision for `verb` on `path`. */
export type MetricsAuthorizer = (authorization: string | undefined, verb: string, path: string) => Promise<AuthDecision>;

export function createMetricsAuthorizer(options: MetricsAuthOptions): MetricsAuthorizer {
  const now = options.now ?? Date.now;
  const allowedTtl = options.allowedTtlMs ?? 60_000;
  const deniedTtl = options.deniedTtlMs ?? 10_000;
  const max = options.maxEntries ?? 1024;
  const users = new ExpiringCache<UserInfo | null>(max, now);
  const decisions = new ExpiringCache<{ allowed: boolean; reason?: string }>(max, now);

  return async (authorization, verb, path) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) return { status: 401, message: 'Unauthorized: a bearer token is required' };
    const token = match[1]!;
    const signal = AbortSignal.timeout(10_000); // for the reviews of this one request
    try {
      let user = users.get(token);
      if (user === undefined) {
        user = (await options.reviews.authenticate(token, signal)) ?? null;
        users.set(token, user, user ? allowedTtl : deniedTtl);
      }
      if (!user) return { status: 401, message: 'Unauthorized: the token was not accepted' };
      const key = JSON.stringify([user.username, user.uid ?? '', [...(user.groups ?? [])].sort(), verb, path]);
      let decision = decisions.get(key);
      if (!decision) {
        decision = await options.reviews.authorize(user, verb, path, signal);
        decisions.set(key, decision, decision.allowed ? allowedTtl : deniedTtl);
      }
      if (!decision.allowed)
        return { status: 403, message: `Forbidden: user "${user.username}" may not ${verb} ${path}${decision.reason ? ` (${decision.reason})` : ''}` };
      return { status: 200, user: user.username };
    } catch (err) {
      // The API server could not be asked: fail closed, and let the caller log it.
      return { status: 500, message: `could not review the request: ${err instanceof Error ? err.message : String(err)}` };
    }
  };
}
