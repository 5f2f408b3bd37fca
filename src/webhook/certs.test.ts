import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { before, describe, it } from 'node:test';
import {
  applyPlan,
  caBundlePatch,
  DEFAULT_CERT_POLICY,
  generateCa,
  generateServing,
  joinPem,
  mergeCaBundle,
  planCertificates,
  sameState,
  secretToState,
  serviceDnsNames,
  shouldRotate,
  splitPem,
  stateToSecretData,
  webhooksTrust,
  type CertPolicy,
  type CertState,
  type MutatingWebhookConfiguration,
} from './certs.ts';
import type { CertKeyPair } from '../telemetry/tls-profile.ts';

const T0 = Date.UTC(2026, 0, 1);
const S = 1000;
const policy: CertPolicy = {
  ...DEFAULT_CERT_POLICY,
  dnsNames: serviceDnsNames('persistent-ips-webhook', 'persistent-ips-system'),
  ipAddresses: ['127.0.0.1'],
  caValidityMs: 300 * S,
  servingValidityMs: 90 * S,
  trustPropagationMs: 2 * S,
};

let ca: CertKeyPair;
let serving: CertKeyPair;
let otherCa: CertKeyPair;
let fresh: CertState;
let lateServing: CertKeyPair;

before(async () => {
  ca = await generateCa(T0, policy.caValidityMs);
  otherCa = await generateCa(T0, policy.caValidityMs, 'other');
  serving = await generateServing(ca, T0, policy);
  fresh = { ca, serving, bundle: [ca.certPem] };
  lateServing = await generateServing(ca, T0 + 180 * S, policy);
});

describe('generated certificates', () => {
  it('the CA is a CA, valid from shortly before now for its validity', () => {
    const cert = new X509Certificate(ca.certPem);
    assert.equal(cert.ca, true);
    assert.equal(cert.validToDate.getTime(), T0 + policy.caValidityMs);
    assert.ok(cert.validFromDate.getTime() <= T0);
    assert.match(cert.subject, /CN=persistent-ips-webhook-ca@/);
  });
  it('the serving certificate covers the service names and IPs, for server auth, signed by the CA', () => {
    const cert = new X509Certificate(serving.certPem);
    assert.equal(cert.ca, false);
    assert.deepEqual(policy.dnsNames, ['persistent-ips-webhook.persistent-ips-system.svc', 'persistent-ips-webhook.persistent-ips-system.svc.cluster.local']);
    for (const name of policy.dnsNames) assert.equal(cert.checkHost(name, { subject: 'never' }), name);
    assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
    assert.equal(cert.checkHost('elsewhere.svc', { subject: 'never' }), undefined);
    assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.1']);
    assert.equal(cert.verify(new X509Certificate(ca.certPem).publicKey), true);
  });
  it('a serving certificate never outlives its CA', async () => {
    const late = await generateServing(ca, T0 + 250 * S, policy);
    assert.equal(new X509Certificate(late.certPem).validToDate.getTime(), T0 + policy.caValidityMs);
  });
});

describe('shouldRotate', () => {
  const cert = { validFromDate: new Date(T0), validToDate: new Date(T0 + 90 * S) };
  const rows = [
    { at: 0, due: false },
    { at: 59.9, due: false },
    { at: 60, due: true },
    { at: 90, due: true },
    { at: 1000, due: true },
  ];
  for (const row of rows) it(`at ${row.at} s of 90: ${row.due}`, () => assert.equal(shouldRotate(T0 + row.at * S, cert, 2 / 3), row.due));
});

describe('secret round trip', () => {
  it('stateToSecretData and secretToState are inverse', () => {
    const data = stateToSecretData(fresh);
    assert.deepEqual(Object.keys(data).sort(), ['ca-bundle.crt', 'ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
    assert.ok(sameState(secretToState({ metadata: { name: 's' }, data }), fresh));
  });
  it('a missing or garbled Secret reads as empty parts', () => {
    assert.deepEqual(secretToState(undefined), { bundle: [] });
    assert.deepEqual(secretToState({ metadata: { name: 's' }, data: { 'tls.crt': 'bm9wZQ==', 'ca-bundle.crt': '!!!' } }), { bundle: [] });
  });
});

describe('planCertificates', () => {
  const cases: { name: string; state?: () => CertState; now: number; trustedSince?: number; newCa: boolean; newServing: boolean; reason?: RegExp }[] = [
    { name: 'nothing stored: create both', state: () => ({ bundle: [] }), now: T0, newCa: true, newServing: true, reason: /no readable CA/ },
    { name: 'fresh material: nothing to do', now: T0 + 10 * S, newCa: false, newServing: false },
    {
      name: 'serving past 2/3 of its life: renew it with the same CA, at once',
      now: T0 + 61 * S,
      newCa: false,
      newServing: true,
      reason: /serving certificate is due/,
    },
    {
      name: 'CA past 2/3 of its life: new CA, keep serving the old certificate until the new CA is trusted',
      state: () => ({ ...fresh, serving: lateServing }),
      now: T0 + 201 * S,
      newCa: true,
      newServing: false,
      reason: /CA is due for rotation/,
    },
    {
      name: 'CA past 2/3 and the serving certificate expired: new CA and a serving certificate of it at once',
      now: T0 + 201 * S,
      newCa: true,
      newServing: true,
    },
    { name: 'expired serving certificate: replace it at once', now: T0 + 95 * S, newCa: false, newServing: true, reason: /expired/ },
    {
      name: 'serving certificate for other names (service renamed): replace it',
      now: T0 + 10 * S,
      newCa: false,
      newServing: true,
      reason: /does not cover/,
    },
    {
      name: 'serving key does not match: replace it',
      state: () => ({ ...fresh, serving: { certPem: serving.certPem, keyPem: ca.keyPem } }),
      now: T0,
      newCa: false,
      newServing: true,
      reason: /key does not match/,
    },
    {
      name: 'CA key does not match: new CA',
      state: () => ({ ...fresh, ca: { certPem: ca.certPem, keyPem: otherCa.keyPem } }),
      now: T0,
      newCa: true,
      newServing: false,
      reason: /CA key does not match/,
    },
    {
      name: 'serving certificate signed by a CA nobody trusts: replace it',
      state: () => ({ ca: otherCa, serving, bundle: [otherCa.certPem] }),
      now: T0,
      newCa: false,
      newServing: true,
      reason: /not signed by a trusted CA/,
    },
  ];
  for (const row of cases) {
    it(row.name, () => {
      const p = row.name.includes('other names') ? { ...policy, dnsNames: ['renamed.persistent-ips-system.svc'] } : policy;
      const plan = planCertificates(row.now, row.state?.() ?? fresh, p, row.trustedSince);
      assert.equal(plan.newCa, row.newCa, plan.reasons.join('; '));
      assert.equal(plan.newServing, row.newServing, plan.reasons.join('; '));
      if (row.reason) assert.match(plan.reasons.join('; '), row.reason);
    });
  }

  it('next check: the earliest rotation time', () => {
    assert.equal(
      planCertificates(T0, fresh, policy, T0).nextCheckAt,
      new X509Certificate(serving.certPem).validFromDate.getTime() + (90 * S + 9 * S) * (2 / 3),
    );
  });

  describe('after a CA rotation (serving certificate still signed by the previous CA)', async () => {
    let rotated: CertState;
    before(async () => {
      const newCa = await generateCa(T0 + 201 * S, policy.caValidityMs);
      rotated = { ca: newCa, serving: await generateServing(ca, T0 + 180 * S, policy), bundle: [newCa.certPem, ca.certPem] };
    });
    const now = T0 + 205 * S;
    it('waits while the webhook configuration does not carry the new CA', () => {
      const plan = planCertificates(now, rotated, policy, undefined);
      assert.equal(plan.newServing, false);
      assert.equal(plan.newCa, false);
      assert.equal(plan.nextCheckAt, now + policy.trustPropagationMs);
    });
    it('waits for trustPropagationMs after the new CA appeared in the caBundle', () => {
      const plan = planCertificates(now, rotated, policy, now - 1 * S);
      assert.equal(plan.newServing, false);
      assert.equal(plan.nextCheckAt, now + 1 * S);
    });
    it('switches to a serving certificate of the new CA once it is trusted', () => {
      const plan = planCertificates(now, rotated, policy, now - 2 * S);
      assert.equal(plan.newServing, true);
      assert.match(plan.reasons.join(), /signed by a previous CA/);
    });
  });
});

describe('mergeCaBundle', () => {
  it('puts the current CA first, keeps valid earlier CAs, drops duplicates, expired CAs and non-CAs', async () => {
    const expired = await generateCa(T0 - 400 * S, policy.caValidityMs, 'expired');
    const bundle = mergeCaBundle(ca.certPem, [otherCa.certPem, ca.certPem, expired.certPem, serving.certPem, otherCa.certPem], T0, 4);
    assert.deepEqual(
      bundle.map((pem) => new X509Certificate(pem).fingerprint256),
      [ca.certPem, otherCa.certPem].map((pem) => new X509Certificate(pem).fingerprint256),
    );
  });
  it('caps the bundle, keeping the newest', async () => {
    const older = await generateCa(T0 - 100 * S, policy.caValidityMs, 'older');
    const bundle = mergeCaBundle(ca.certPem, [older.certPem, otherCa.certPem], T0, 2);
    assert.equal(bundle.length, 2);
    assert.equal(new X509Certificate(bundle[1]!).fingerprint256, new X509Certificate(otherCa.certPem).fingerprint256);
  });
});

describe('caBundle in the webhook configuration', () => {
  const b64 = (pems: string[]): string => Buffer.from(joinPem(pems)).toString('base64');
  const config = (bundles: (string | undefined)[]): MutatingWebhookConfiguration => ({
    metadata: { name: 'persistent-ips-launcher-pods', resourceVersion: '5' },
    webhooks: bundles.map((caBundle, i) => ({
      name: `w${i}`,
      clientConfig: { service: { name: 's', namespace: 'n' }, ...(caBundle === undefined ? {} : { caBundle }) },
      rules: [],
    })),
  });
  it('no patch when every caBundle holds the same certificates (order and whitespace aside)', () => {
    const cfg = config([b64([otherCa.certPem, ca.certPem]), Buffer.from(`\n${ca.certPem}\n\n${otherCa.certPem}`).toString('base64')]);
    assert.deepEqual(caBundlePatch(cfg, [ca.certPem, otherCa.certPem]), []);
  });
  it('patches only the caBundle of the webhooks that differ, guarded by a test of their name', () => {
    const cfg = config([b64([ca.certPem]), undefined, b64([otherCa.certPem, ca.certPem])]);
    const value = b64([otherCa.certPem, ca.certPem]);
    assert.deepEqual(caBundlePatch(cfg, [otherCa.certPem, ca.certPem]), [
      { op: 'test', path: '/webhooks/0/name', value: 'w0' },
      { op: 'replace', path: '/webhooks/0/clientConfig/caBundle', value },
      { op: 'test', path: '/webhooks/1/name', value: 'w1' },
      { op: 'add', path: '/webhooks/1/clientConfig/caBundle', value },
    ]);
  });
  it('webhooksTrust is true only when every webhook carries the CA', () => {
    assert.equal(webhooksTrust(config([b64([ca.certPem]), b64([otherCa.certPem, ca.certPem])]), ca.certPem), true);
    assert.equal(webhooksTrust(config([b64([ca.certPem]), undefined]), ca.certPem), false);
    assert.equal(webhooksTrust(config([]), ca.certPem), false);
  });
});

describe('rotation over time: the API server always trusts what is served', () => {
  it('holds through several CA and serving rotations, with the API server seeing caBundle changes late', async () => {
    const p: CertPolicy = { ...policy, caValidityMs: 30 * S, servingValidityMs: 12 * S, trustPropagationMs: 2 * S };
    const apiServerLagMs = 1.5 * S;
    let state: CertState = { bundle: [] };
    const published: { at: number; bundle: string[] }[] = [];
    let trustedSince: number | undefined;
    let served: string | undefined;
    let caRotations = 0;
    let servingRotations = 0;
    const trustedBy = (bundle: string[], certPem: string, now: number): boolean => {
      const cert = new X509Certificate(certPem);
      return now < cert.validToDate.getTime() && bundle.some((pem) => cert.verify(new X509Certificate(pem).publicKey));
    };
    for (let now = T0; now <= T0 + 120 * S; now += 500) {
      const plan = planCertificates(now, state, p, trustedSince);
      const next = await applyPlan(now, state, plan, p);
      if (plan.newCa && state.ca) caRotations++;
      if (plan.newServing && state.serving) servingRotations++;
      state = next;
      // The Secret is written, the replicas load the serving certificate, then the caBundle is patched.
      const before = served;
      served = state.serving!.certPem;
      const lastBundle = published.at(-1)?.bundle;
      if (!lastBundle || joinPem(lastBundle) !== joinPem(state.bundle)) {
        published.push({ at: now, bundle: state.bundle });
        trustedSince = now;
      }
      // The very first certificate: nothing could be trusted before the API server saw the first caBundle.
      if (before === undefined || published[0]!.at > now - apiServerLagMs) continue;
      // What the API server trusts now: the newest bundle it has seen, published at least apiServerLagMs ago.
      const seen = [...published].reverse().find((b) => b.at <= now - apiServerLagMs)?.bundle ?? [];
      assert.ok(trustedBy(seen, served, now), `at +${(now - T0) / S} s: served certificate not trusted by the API server's view`);
    }
    assert.ok(caRotations >= 4, `CA rotations: ${caRotations}`);
    assert.ok(servingRotations >= 8, `serving rotations: ${servingRotations}`);
  });
});

describe('splitPem', () => {
  it('finds certificate blocks in any surrounding text', () => {
    assert.equal(splitPem(`junk\n${ca.certPem}\nmore junk ${otherCa.certPem}`).length, 2);
    assert.deepEqual(splitPem('no pem here'), []);
  });
});
