// The webhook's TLS material when the controller provisions it itself (the default): a private CA and a serving
// certificate for the webhook Service, kept in one Secret shared by all replicas, with the CA published in the
// MutatingWebhookConfiguration's caBundle.
//
// This file holds the pure part (what the Secret holds, whether and what to rotate, the caBundle and its patch) and
// the certificate generation. The I/O loop that applies it is in cert-provisioning.ts.
//
// Rotation without a failed admission. The API server trusts the caBundle, and each replica serves whatever serving
// certificate it last loaded, so the order of changes matters:
//   1. A new CA is created when the current one passes `rotateAt` of its life. It goes into the Secret and into the
//      caBundle NEXT TO the old CA (old serving certificate unchanged: still trusted).
//   2. Only once the webhook configuration has carried the new CA for `trustPropagationMs` (the API servers' caches
//      of webhook configurations have caught up) is a serving certificate signed by the new CA issued.
//   3. An old CA stays in the caBundle until it expires. A serving certificate never outlives its CA (its notAfter is
//      capped by the CA's), so every serving certificate any replica may still present, including one a slow replica
//      has not replaced yet, is trusted until it expires.
// A serving certificate alone is renewed at `rotateAt` of its life, signed by the same (trusted) CA: no caBundle
// change. Anything missing, unreadable, expired or not matching the Service's names is replaced at once, since
// nothing that works would be lost.

import { createPrivateKey, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import { askJsonChild } from '../child/json-child.ts';
import type { JsonPatchOp } from '../kube/patch.ts';
import type { KubeObject } from '../kube/types.ts';
import type { CertKeyPair } from '../telemetry/tls-profile.ts';

export interface Secret extends KubeObject {
  type?: string;
  /** base64 values */
  data?: Record<string, string>;
}

export interface WebhookClientConfig {
  caBundle?: string;
  service?: { name: string; namespace: string; path?: string; port?: number };
  url?: string;
}

export interface MutatingWebhookConfiguration extends KubeObject {
  webhooks?: { name: string; clientConfig?: WebhookClientConfig; [key: string]: unknown }[];
}

/** Keys of the certificate Secret. tls.crt/tls.key are what a kubernetes.io/tls Secret (and cert-manager) use. */
export const SECRET_KEYS = {
  caCert: 'ca.crt',
  caKey: 'ca.key',
  bundle: 'ca-bundle.crt',
  tlsCert: 'tls.crt',
  tlsKey: 'tls.key',
} as const;

export const DEFAULT_SECRET_NAME = 'persistent-ips-webhook-cert';

const DAY = 24 * 60 * 60 * 1000;

export interface CertPolicy {
  /** DNS names the serving certificate must cover (the first is its common name). */
  dnsNames: string[];
  /** IP addresses it must cover (e.g. 127.0.0.1 when the API server calls the webhook by URL in tests). */
  ipAddresses: string[];
  caValidityMs: number;
  servingValidityMs: number;
  /** Fraction of a certificate's life after which it is replaced (default 2/3). */
  rotateAt: number;
  /** How long the caBundle must have carried a new CA before serving certificates signed by it are used. */
  trustPropagationMs: number;
  /** Most CAs kept in the caBundle (newest first); older ones are dropped even if still valid. */
  maxBundleSize: number;
}

export const DEFAULT_CERT_POLICY: Omit<CertPolicy, 'dnsNames' | 'ipAddresses'> = {
  caValidityMs: 5 * 365 * DAY,
  servingValidityMs: 365 * DAY,
  rotateAt: 2 / 3,
  trustPropagationMs: 10_000,
  maxBundleSize: 4,
};

/** `<service>.<namespace>.svc` and `.svc.cluster.local`, then any extra names. */
export function serviceDnsNames(service: string, namespace: string, extra: readonly string[] = []): string[] {
  return [...new Set([`${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`, ...extra])];
}

// ---------------------------------------------------------------------------------------------------------------
// Reading

export interface CertState {
  ca?: CertKeyPair;
  serving?: CertKeyPair;
  /** PEM certificates the caBundle must hold. */
  bundle: string[];
}

/** What the Secret holds; missing keys are simply absent (the plan replaces what is missing). */
export function secretToState(secret: Secret | undefined): CertState {
  const text = (key: string): string | undefined => {
    const value = secret?.data?.[key];
    return typeof value === 'string' && value !== '' ? Buffer.from(value, 'base64').toString('utf8') : undefined;
  };
  const pair = (certKey: string, keyKey: string): CertKeyPair | undefined => {
    const [certPem, keyPem] = [text(certKey), text(keyKey)];
    return certPem && keyPem ? { certPem, keyPem } : undefined;
  };
  const ca = pair(SECRET_KEYS.caCert, SECRET_KEYS.caKey);
  const serving = pair(SECRET_KEYS.tlsCert, SECRET_KEYS.tlsKey);
  return { bundle: splitPem(text(SECRET_KEYS.bundle) ?? ''), ...(ca ? { ca } : {}), ...(serving ? { serving } : {}) };
}

export function stateToSecretData(state: CertState): Record<string, string> {
  const texts: [string, string | undefined][] = [
    [SECRET_KEYS.caCert, state.ca?.certPem],
    [SECRET_KEYS.caKey, state.ca?.keyPem],
    [SECRET_KEYS.tlsCert, state.serving?.certPem],
    [SECRET_KEYS.tlsKey, state.serving?.keyPem],
    [SECRET_KEYS.bundle, joinPem(state.bundle)],
  ];
  return Object.fromEntries(texts.flatMap(([key, text]) => (text === undefined ? [] : [[key, Buffer.from(text, 'utf8').toString('base64')]])));
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----/g;

/** The PEM certificate blocks of a text, normalised; anything else in the text is ignored. */
export function splitPem(text: string): string[] {
  return (text.match(PEM_CERT) ?? []).map((block) => `${block.trim()}\n`);
}

export function joinPem(pems: readonly string[]): string {
  return pems.map((pem) => (pem.endsWith('\n') ? pem : `${pem}\n`)).join('');
}

function parseCert(pem: string | undefined): X509Certificate | undefined {
  if (!pem) return undefined;
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

function keyMatches(cert: X509Certificate, keyPem: string): boolean {
  try {
    const key = createPrivateKey(keyPem);
    return key.asymmetricKeyType === 'ec' && cert.checkPrivateKey(key);
  } catch {
    return false;
  }
}

/** The instant at which a certificate is due for replacement. */
export function rotationTime(cert: { validFromDate: Date; validToDate: Date }, rotateAt: number): number {
  const from = cert.validFromDate.getTime();
  const to = cert.validToDate.getTime();
  return from + (to - from) * rotateAt;
}

/** Whether a certificate must be replaced now: past `rotateAt` of its life, or expired. */
export function shouldRotate(now: number, cert: { validFromDate: Date; validToDate: Date }, rotateAt: number): boolean {
  return now >= rotationTime(cert, rotateAt) || now >= cert.validToDate.getTime();
}

function isSignedBy(cert: X509Certificate, ca: X509Certificate): boolean {
  try {
    return cert.checkIssued(ca) && cert.verify(ca.publicKey);
  } catch {
    return false;
  }
}

function coversNames(cert: X509Certificate, policy: Pick<CertPolicy, 'dnsNames' | 'ipAddresses'>): boolean {
  return (
    policy.dnsNames.every((name) => cert.checkHost(name, { subject: 'never', wildcards: false }) === name) &&
    policy.ipAddresses.every((ip) => cert.checkIP(ip) !== undefined)
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Deciding

export interface CertPlan {
  /** Create a new CA (the current one goes into the bundle if still valid). */
  newCa: boolean;
  /** Issue a new serving certificate, signed by the CA in force after this plan. */
  newServing: boolean;
  /** Why, for the log. */
  reasons: string[];
  /** When to look again even if nothing happens meanwhile (a rotation falls due, trust has propagated). */
  nextCheckAt: number;
}

/**
 * The rotation decision. `caTrustedSince` is when the webhook configuration was first seen (or written) carrying
 * the current CA in every caBundle; undefined when it does not (yet).
 */
export function planCertificates(now: number, state: CertState, policy: CertPolicy, caTrustedSince: number | undefined): CertPlan {
  const reasons: string[] = [];
  const checks: number[] = [];
  const caCert = parseCert(state.ca?.certPem);
  let caOk = false;
  if (!state.ca || !caCert) reasons.push('no readable CA');
  else if (!caCert.ca) reasons.push('the stored CA certificate is not a CA');
  else if (!keyMatches(caCert, state.ca.keyPem)) reasons.push('the stored CA key does not match its certificate');
  else if (now >= caCert.validToDate.getTime()) reasons.push('the CA has expired');
  else if (now < caCert.validFromDate.getTime()) reasons.push('the CA is not valid yet');
  else caOk = true;
  const caDue = caOk && shouldRotate(now, caCert!, policy.rotateAt);
  if (caDue) reasons.push('the CA is due for rotation');
  const newCa = !caOk || caDue;
  if (caOk && !caDue) checks.push(rotationTime(caCert!, policy.rotateAt));

  // The serving certificate as it stands.
  const servingCert = parseCert(state.serving?.certPem);
  const trusted = [...(caOk ? [caCert!] : []), ...state.bundle.map(parseCert).filter((c): c is X509Certificate => !!c)];
  let servingOk = false;
  if (!state.serving || !servingCert) reasons.push('no readable serving certificate');
  else if (!keyMatches(servingCert, state.serving.keyPem)) reasons.push('the serving key does not match its certificate');
  else if (now >= servingCert.validToDate.getTime()) reasons.push('the serving certificate has expired');
  else if (now < servingCert.validFromDate.getTime()) reasons.push('the serving certificate is not valid yet');
  else if (!coversNames(servingCert, policy)) reasons.push('the serving certificate does not cover the service names');
  else if (!trusted.some((ca) => now < ca.validToDate.getTime() && isSignedBy(servingCert, ca))) {
    reasons.push('the serving certificate is not signed by a trusted CA');
  } else servingOk = true;

  let newServing: boolean;
  if (!servingOk) {
    // Nothing that works would be lost: issue at once, with whatever CA is in force.
    newServing = true;
  } else if (newCa) {
    // Step 1: the new CA must be trusted before anything it signs is served.
    newServing = false;
  } else {
    const byCurrent = isSignedBy(servingCert!, caCert!);
    const due = shouldRotate(now, servingCert!, policy.rotateAt);
    if (byCurrent && !due) {
      newServing = false;
      checks.push(rotationTime(servingCert!, policy.rotateAt));
    } else {
      if (!byCurrent) reasons.push('the serving certificate is signed by a previous CA');
      if (due) reasons.push('the serving certificate is due for rotation');
      // Step 2: switch to the current CA only once the API servers trust it; a routine renewal by the same CA
      // needs no wait.
      const trustedAt = caTrustedSince === undefined ? undefined : caTrustedSince + policy.trustPropagationMs;
      newServing = byCurrent || (trustedAt !== undefined && now >= trustedAt);
      if (!newServing) {
        reasons.push('waiting for the new CA to be trusted by the API servers');
        checks.push(trustedAt ?? now + policy.trustPropagationMs);
      }
    }
  }
  return { newCa, newServing, reasons: newCa || newServing ? reasons : [], nextCheckAt: checks.length ? Math.min(...checks) : now + policy.trustPropagationMs };
}

/**
 * The caBundle: the current CA first, then earlier CAs that are still valid (newest first, at most
 * `maxBundleSize` in all), without duplicates or non-CA certificates.
 */
export function mergeCaBundle(currentCaPem: string, previous: readonly string[], now: number, maxBundleSize: number): string[] {
  const current = parseCert(currentCaPem);
  if (!current) throw new Error('mergeCaBundle: the current CA is not a readable certificate');
  const older = new Map<string, X509Certificate>();
  for (const cert of previous.map(parseCert)) {
    if (cert?.ca && now < cert.validToDate.getTime() && cert.fingerprint256 !== current.fingerprint256) older.set(cert.fingerprint256, cert);
  }
  const newestFirst = [...older.values()].sort((a, b) => b.validFromDate.getTime() - a.validFromDate.getTime());
  return [currentCaPem, ...newestFirst.slice(0, Math.max(0, maxBundleSize - 1)).map((c) => c.toString())].map(normalise);
}

const normalise = (pem: string): string => splitPem(pem)[0] ?? pem;

/** The SHA-256 fingerprint of a PEM certificate; undefined when there is none or it cannot be read. */
export function fingerprintOf(pem: string | undefined): string | undefined {
  return parseCert(pem)?.fingerprint256;
}

/** The fingerprints of the certificates a (base64) caBundle holds. */
function bundlePrints(caBundle: string | undefined): Set<string> {
  return new Set(splitPem(Buffer.from(caBundle ?? '', 'base64').toString('utf8')).flatMap((pem) => fingerprintOf(pem) ?? []));
}

/** Whether every webhook of the configuration trusts the CA (its caBundle contains it). */
export function webhooksTrust(config: MutatingWebhookConfiguration, caPem: string): boolean {
  const ca = parseCert(caPem);
  if (!ca) return false;
  const webhooks = config.webhooks ?? [];
  return webhooks.length > 0 && webhooks.every((w) => bundlePrints(w.clientConfig?.caBundle).has(ca.fingerprint256));
}

/**
 * The JSON patch that sets every webhook's clientConfig.caBundle to the bundle, touching nothing else. Each write is
 * preceded by a `test` of the webhook's name at that index, so a concurrent reordering of the list fails the patch
 * instead of writing into another webhook. Empty when every caBundle already holds exactly these certificates.
 */
export function caBundlePatch(config: MutatingWebhookConfiguration, bundle: readonly string[]): JsonPatchOp[] {
  const value = Buffer.from(joinPem(bundle), 'utf8').toString('base64');
  const wantedPrints = [...bundlePrints(value)].sort().join(',');
  const ops: JsonPatchOp[] = [];
  (config.webhooks ?? []).forEach((webhook, i) => {
    const current = webhook.clientConfig?.caBundle;
    if ([...bundlePrints(current)].sort().join(',') === wantedPrints) return;
    ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: webhook.name });
    if (!webhook.clientConfig) ops.push({ op: 'add', path: `/webhooks/${i}/clientConfig`, value: { caBundle: value } });
    else ops.push({ op: current === undefined ? 'add' : 'replace', path: `/webhooks/${i}/clientConfig/caBundle`, value });
  });
  return ops;
}

// ---------------------------------------------------------------------------------------------------------------
// Generating. @peculiar/x509 (with reflect-metadata and tsyringe) would stay resident in the controller for its whole
// life once loaded, for a few milliseconds of work at start-up and at each rotation. So certificates are minted by a
// short-lived child process (mint-worker.ts, through child/json-child.ts) that gets the request on stdin and answers
// PEM text on stdout: the controller never loads the library. Reading certificates uses node:crypto.

/** What a serving certificate is minted from. */
export type ServingPolicy = Pick<CertPolicy, 'dnsNames' | 'ipAddresses' | 'servingValidityMs'>;

export type MintRequest =
  | { kind: 'ca'; now: number; validityMs: number; commonName: string }
  | { kind: 'serving'; ca: CertKeyPair; now: number; policy: ServingPolicy };
export type MintAnswer = { ok: true; pair: CertKeyPair } | { ok: false; message: string };

async function mintInChild(request: MintRequest): Promise<CertKeyPair> {
  // The build puts mint-worker.js in the same folder as the code of this module (dist/cli/, scripts/build.ts); tests and
  // scripts run the TypeScript source next to this file.
  const entry = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './mint-worker.ts' : './mint-worker.js', import.meta.url));
  const answer = await askJsonChild<MintAnswer>(entry, request, 'the certificate minting process');
  if (!answer.ok) throw new Error(`minting a certificate: ${answer.message}`);
  return answer.pair;
}

export async function generateCa(now: number, validityMs: number, commonName = 'persistent-ips-webhook-ca'): Promise<CertKeyPair> {
  return mintInChild({ kind: 'ca', now, validityMs, commonName });
}

/** A serving certificate for the names of the policy, signed by the CA; it never outlives the CA. */
export async function generateServing(ca: CertKeyPair, now: number, policy: ServingPolicy): Promise<CertKeyPair> {
  if (policy.dnsNames.length === 0 && policy.ipAddresses.length === 0) throw new Error('a serving certificate needs at least one name');
  for (const ip of policy.ipAddresses) if (isIP(ip) === 0) throw new Error(`not an IP address: ${ip}`);
  const { dnsNames, ipAddresses, servingValidityMs } = policy;
  return mintInChild({ kind: 'serving', ca, now, policy: { dnsNames, ipAddresses, servingValidityMs } });
}

/**
 * Applies a plan: generates what it asks for and returns the new state (bundle included). Pure apart from the key
 * generation.
 */
export async function applyPlan(now: number, state: CertState, plan: CertPlan, policy: CertPolicy): Promise<CertState> {
  let ca = state.ca;
  let previous = [...state.bundle];
  if (plan.newCa) {
    if (state.ca) previous = [state.ca.certPem, ...previous];
    ca = await generateCa(now, policy.caValidityMs);
  }
  if (!ca) throw new Error('applyPlan: no CA');
  const serving = plan.newServing || !state.serving ? await generateServing(ca, now, policy) : state.serving;
  return { ca, serving, bundle: mergeCaBundle(ca.certPem, previous, now, policy.maxBundleSize) };
}

/** Whether two states hold the same material (so nothing needs writing). */
export function sameState(a: CertState, b: CertState): boolean {
  return JSON.stringify(stateToSecretData(a)) === JSON.stringify(stateToSecretData(b));
}
