// A launcher pod's AdmissionReview sent straight to the controller's webhook, as the API server sends it, for cases
// that must see each answer itself (the API server only shows the outcome).
import { randomBytes } from 'node:crypto';
import { request as httpsRequest, type Agent as HttpsAgent } from 'node:https';
import type { V1Pod } from '@kubernetes/client-node';

export interface AdmissionAnswer {
  /** HTTP status, or 0 when the connection or TLS handshake failed. */
  status: number;
  error?: string;
  allowed?: boolean;
  /** The decoded JSON patch, when the answer carries one. */
  patch?: { op: string; path: string; value?: unknown }[];
  message?: string;
}

/**
 * Sends a CREATE AdmissionReview for `pod` straight to a webhook server (https://127.0.0.1:port/mutate-v1-pod),
 * verifying its certificate against `ca` for the name 127.0.0.1, as the API server does with the caBundle.
 */
export function admitDirectly(port: number, ca: string | Buffer, pod: V1Pod, agent: HttpsAgent | false = false): Promise<AdmissionAnswer> {
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomBytes(8).toString('hex'),
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: pod.metadata?.namespace,
      name: pod.metadata?.name,
      operation: 'CREATE',
      userInfo: { username: 'system:serviceaccount:kubevirt:kubevirt-controller' },
      object: pod,
    },
  };
  const body = JSON.stringify(review);
  return new Promise((resolve) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate-v1-pod',
        method: 'POST',
        ca,
        agent,
        timeout: 5000,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            const r = (JSON.parse(text) as { response?: { allowed?: boolean; patch?: string; status?: { message?: string } } }).response;
            resolve({
              status: res.statusCode ?? 0,
              ...(r?.allowed !== undefined ? { allowed: r.allowed } : {}),
              ...(r?.patch ? { patch: JSON.parse(Buffer.from(r.patch, 'base64').toString('utf8')) as AdmissionAnswer['patch'] } : {}),
              ...(r?.status?.message ? { message: r.status.message } : {}),
            });
          } catch {
            resolve({ status: res.statusCode ?? 0, error: `not an AdmissionReview: ${text.slice(0, 200)}` });
          }
        });
        res.on('error', (err) => resolve({ status: 0, error: err.message }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer in 5 s')));
    req.on('error', (err) => resolve({ status: 0, error: err.message }));
    req.end(body);
  });
}

/** Applies the add/replace operations of a webhook's JSON patch to a copy of `pod` (enough for what it returns). */
export function applyPatch(pod: V1Pod, patch: { op: string; path: string; value?: unknown }[] | undefined): V1Pod {
  const out = structuredClone(pod) as unknown as Record<string, unknown>;
  for (const op of patch ?? []) {
    if (op.op !== 'add' && op.op !== 'replace') throw new Error(`unexpected patch operation ${op.op} ${op.path}`);
    const tokens = op.path
      .split('/')
      .slice(1)
      .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
    let node = out;
    for (const t of tokens.slice(0, -1)) node = node[t] as Record<string, unknown>;
    node[tokens.at(-1)!] = structuredClone(op.value);
  }
  return out as V1Pod;
}
