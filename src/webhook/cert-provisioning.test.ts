import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FakeClock } from '../../test/fake-clock.ts';
import { createLogger, type Logger } from '../telemetry/logger.ts';
import { capturingLogger } from '../../test/log-lines.ts';
import { applyJsonPatch } from '../../test/json-patch.ts';
import { KubeApiError, type ApiErrorReason } from '../kube/errors.ts';
import { createFileCertificates, createSelfManagedCertificates, kubeCertStoreClient, RETRY_MAX_MS, type CertStoreClient } from './cert-provisioning.ts';
import { generateCa, generateServing, secretToState, serviceDnsNames, splitPem, type MutatingWebhookConfiguration, type Secret } from './certs.ts';
import type { CertKeyPair } from '../telemetry/tls-profile.ts';

const logger = createLogger('silent');
const T0 = Date.UTC(2026, 0, 1);
const S = 1000;
const policy = {
  dnsNames: serviceDnsNames('persistent-ips-webhook', 'persistent-ips-system'),
  ipAddresses: ['127.0.0.1'],
  caValidityMs: 60 * S,
  servingValidityMs: 24 * S,
  trustPropagationMs: 2 * S,
};

/** The API server's side: one Secret and one webhook configuration, with resourceVersion preconditions. */
class FakeCluster {
  secret: Secret | undefined;
  config: MutatingWebhookConfiguration | undefined;
  rv = 0;
  secretWrites = 0;
  configPatches = 0;
  configReadFails = false;
  /** What the API server answers a Secret GET, when set (a failure before anything is minted). */
  secretReadError: Error | undefined;
  /** What it answers a Secret create or update, when set. */
  secretWriteError: Error | undefined;
  /** Without the namespace, a Secret GET is 404 and a create is 404 `namespaces "..." not found`. */
  namespaceExists = true;
  secretCreates = 0;

  constructor(withConfig = true) {
    if (withConfig) {
      this.config = {
        metadata: { name: 'persistent-ips-launcher-pods', resourceVersion: '1' },
        webhooks: [
          { name: 'create', clientConfig: { service: { name: 'persistent-ips-webhook', namespace: 'persistent-ips-system' } } },
          { name: 'hotplug', clientConfig: { service: { name: 'persistent-ips-webhook', namespace: 'persistent-ips-system' } } },
        ],
      };
    }
  }

  client(): CertStoreClient {
    return {
      getSecret: async () => {
        if (this.secretReadError) throw this.secretReadError;
        return structuredClone(this.secret);
      },
      createSecret: async (secret) => {
        this.secretCreates++;
        if (this.secretWriteError) throw this.secretWriteError;
        if (!this.namespaceExists) {
          const ns = secret.metadata.namespace ?? '';
          const status = {
            kind: 'Status',
            status: 'Failure',
            reason: 'NotFound',
            code: 404,
            message: `namespaces "${ns}" not found`,
            details: { name: ns, kind: 'namespaces' },
          };
          throw new KubeApiError({ reason: 'notFound', code: 404, status, object: { kind: 'Secret', namespace: ns }, verb: 'create' });
        }
        if (this.secret) throw secretError('alreadyExists', 409, 'create', { name: secret.metadata.name });
        return this.#storeSecret(secret);
      },
      updateSecret: async (secret) => {
        if (this.secretWriteError) throw this.secretWriteError;
        if (!this.secret || secret.metadata.resourceVersion !== this.secret.metadata.resourceVersion) {
          throw secretError('conflict', 409, 'update', { name: secret.metadata.name });
        }
        return this.#storeSecret(secret);
      },
      getWebhookConfiguration: async () => {
        if (this.configReadFails) throw new Error('forbidden');
        return structuredClone(this.config);
      },
      patchWebhookConfiguration: async (patch) => {
        this.config = applyJsonPatch(this.config!, patch);
        this.configPatches++;
        return structuredClone(this.config);
      },
    };
  }

  #storeSecret(secret: Secret): Secret {
    this.secretWrites++;
    this.secret = { ...structuredClone(secret), metadata: { ...secret.metadata, resourceVersion: String(++this.rv) } };
    return structuredClone(this.secret);
  }

  /** The CAs in the caBundle of every webhook (they must agree). */
  trustedCas(): X509Certificate[] {
    const bundles = (this.config?.webhooks ?? []).map((w) => Buffer.from(w.clientConfig?.caBundle ?? '', 'base64').toString('utf8'));
    assert.ok(
      bundles.every((b) => b === bundles[0]),
      'every webhook carries the same caBundle',
    );
    return splitPem(bundles[0] ?? '').map((pem) => new X509Certificate(pem));
  }
}

/** A cluster (with the webhook configuration unless told otherwise), a fake clock at T0, and one replica on them. */
function setup(options: { withConfig?: boolean; log?: Logger } = {}) {
  const cluster = new FakeCluster(options.withConfig);
  const clock = new FakeClock(T0);
  return { cluster, clock, a: replica(cluster, clock, options.log) };
}

function replica(cluster: FakeCluster, clock: FakeClock, log = logger) {
  const served: CertKeyPair[] = [];
  const source = createSelfManagedCertificates({
    client: cluster.client(),
    secretName: 'persistent-ips-webhook-cert',
    namespace: 'persistent-ips-system',
    webhookConfigurationName: 'persistent-ips-launcher-pods',
    policy,
    logger: log,
    clock,
    onCertificate: (pair) => served.push(pair),
  });
  return { source, served };
}

/**
 * Waits (for the pass to finish: minting runs in a child process) until the loop has put its next sleep on the fake
 * clock, and returns that sleep's length. The loop is the clock's only user, so one pending timer is that sleep.
 */
async function nextSleep(clock: FakeClock): Promise<number> {
  const deadline = Date.now() + 20_000;
  while (clock.pending === 0) {
    if (Date.now() > deadline) throw new Error('the provisioning loop scheduled no next attempt');
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.equal(clock.pending, 1, 'one sleep at a time');
  return clock.pendingDelays()[0]!;
}

/** Lets the pending sleep end and waits for the pass after it; returns the sleep that pass scheduled. */
async function step(clock: FakeClock): Promise<number> {
  clock.advance(await nextSleep(clock));
  return nextSleep(clock);
}

/** What the API server answers about the Secret. */
const secretError = (reason: ApiErrorReason, code: number, verb: string, object: { namespace?: string; name?: string } = {}) =>
  new KubeApiError({ reason, code, verb, object: { kind: 'Secret', ...object } });
const unavailable = () => secretError('transient', 503, 'get', { namespace: 'persistent-ips-system', name: 'persistent-ips-webhook-cert' });

function trustedBy(cas: X509Certificate[], certPem: string, now: number): boolean {
  const cert = new X509Certificate(certPem);
  return now < cert.validToDate.getTime() && cas.some((ca) => now < ca.validToDate.getTime() && cert.verify(ca.publicKey));
}

describe('self-managed webhook certificates', () => {
  it('first start: creates the Secret, serves its certificate, publishes the CA in every webhook', async () => {
    const { cluster, clock, a } = setup();
    assert.equal(a.source.ready(), false);
    await a.source.reconcile();
    assert.equal(a.source.ready(), true);
    assert.equal(cluster.secretWrites, 1);
    assert.equal(cluster.secret?.type, 'kubernetes.io/tls');
    const state = secretToState(cluster.secret);
    assert.equal(a.served.length, 1);
    assert.equal(a.served[0]!.certPem, state.serving?.certPem);
    assert.equal(cluster.trustedCas().length, 1);
    assert.ok(trustedBy(cluster.trustedCas(), a.served[0]!.certPem, clock.now()));
  });

  it('steady state: no writes', async () => {
    const { cluster, clock, a } = setup();
    await a.source.reconcile();
    const writes = [cluster.secretWrites, cluster.configPatches];
    clock.advance(5 * S);
    await a.source.reconcile();
    await a.source.reconcile();
    assert.deepEqual([cluster.secretWrites, cluster.configPatches], writes);
    assert.equal(a.served.length, 1);
  });

  it('two replicas starting together converge on one CA and one serving certificate', async () => {
    const { cluster, clock, a } = setup();
    const b = replica(cluster, clock);
    await Promise.all([a.source.reconcile(), b.source.reconcile()]);
    assert.equal(cluster.secretWrites, 1, "the slower replica adopted the first one's Secret");
    assert.equal(a.source.current()?.certPem, b.source.current()?.certPem);
    assert.equal(cluster.trustedCas().length, 1);
  });

  it('adopts an existing valid Secret without writing', async () => {
    const { cluster, clock } = setup();
    await replica(cluster, clock).source.reconcile();
    const writes = cluster.secretWrites;
    const b = replica(cluster, clock);
    await b.source.reconcile();
    assert.equal(cluster.secretWrites, writes);
    assert.equal(b.served[0]?.certPem, secretToState(cluster.secret).serving?.certPem);
  });

  it('rotates CA and serving certificates over time; two replicas always serve what the caBundle trusts', async () => {
    const { cluster, clock, a } = setup();
    const b = replica(cluster, clock);
    await a.source.reconcile();
    await b.source.reconcile();
    const cas = new Set<string>();
    for (let step = 0; step < 300; step++) {
      clock.advance(500);
      // The replicas look at different moments; b only every other step, as a slow poller would.
      await a.source.reconcile();
      if (step % 2 === 0) await b.source.reconcile();
      const trusted = cluster.trustedCas();
      for (const ca of trusted) cas.add(ca.fingerprint256);
      for (const r of [a, b]) {
        assert.ok(trustedBy(trusted, r.source.current()!.certPem, clock.now()), `step ${step}: a served certificate is not trusted`);
      }
    }
    assert.ok(cas.size >= 4, `CAs used: ${cas.size}`);
    assert.ok(a.served.length >= 8, `serving certificates: ${a.served.length}`);
  });

  it('never switches to a serving certificate of a new CA while the webhook configuration cannot be read', async () => {
    const { cluster, clock, a } = setup();
    await a.source.reconcile();
    const firstCa = secretToState(cluster.secret).ca!.certPem;
    // Routine serving renewals until the CA passes 2/3 of its 60 s (at 40 s the serving certificate is valid).
    for (let t = 0; t < 3; t++) {
      clock.advance(10 * S);
      await a.source.reconcile();
    }
    assert.equal(secretToState(cluster.secret).ca!.certPem, firstCa);
    clock.advance(10 * S);
    await a.source.reconcile(); // new CA, published next to the old one
    const secondCa = secretToState(cluster.secret).ca!.certPem;
    assert.notEqual(secondCa, firstCa);
    assert.equal(cluster.trustedCas().length, 2);
    const servedBefore = a.source.current()!.certPem;
    assert.ok(new X509Certificate(servedBefore).verify(new X509Certificate(firstCa).publicKey), "still serving the old CA's certificate");
    // A second replica that cannot read the configuration must not switch either, however long it waits.
    cluster.configReadFails = true;
    const b = replica(cluster, clock);
    clock.advance(3 * S); // beyond trustPropagationMs, serving certificate still valid
    await b.source.reconcile();
    assert.ok(new X509Certificate(b.source.current()!.certPem).verify(new X509Certificate(firstCa).publicKey));
    cluster.configReadFails = false;
    await a.source.reconcile();
    assert.ok(new X509Certificate(a.source.current()!.certPem).verify(new X509Certificate(secondCa).publicKey), 'switched once trusted');
  });

  it('works without a webhook configuration, and publishes the CA once it appears', async () => {
    const { cluster, a } = setup({ withConfig: false });
    await a.source.reconcile();
    assert.equal(a.source.ready(), true);
    cluster.config = new FakeCluster(true).config;
    await a.source.reconcile();
    assert.equal(cluster.trustedCas().length, 1);
  });

  it('replaces a Secret someone filled with garbage', async () => {
    const { cluster, a } = setup();
    cluster.secret = {
      metadata: { name: 'persistent-ips-webhook-cert', namespace: 'persistent-ips-system', resourceVersion: '1' },
      type: 'Opaque',
      data: { 'tls.crt': 'Z2FyYmFnZQ==' },
    };
    await a.source.reconcile();
    assert.equal(a.source.ready(), true);
    assert.equal(cluster.secret?.type, 'Opaque', 'the type of an existing Secret is kept');
  });

  it('a failed pass is retried after 1 s, 2 s, 4 s, ... up to 30 s; a successful pass starts again at 1 s', async () => {
    const { log, lines } = capturingLogger();
    const { cluster, clock, a } = setup({ log });
    cluster.secretReadError = unavailable();
    await a.source.start();
    assert.equal(a.source.ready(), false);
    const delays = [await nextSleep(clock)];
    for (let i = 0; i < 6; i++) delays.push(await step(clock));
    assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000, RETRY_MAX_MS, RETRY_MAX_MS]);
    assert.equal(lines.filter((l) => l.level === 'error').length, 7, 'each failure of another kind than a missing namespace is an error');
    cluster.secretReadError = undefined;
    const afterSuccess = await step(clock);
    assert.equal(a.source.ready(), true);
    // The routine look, at the serving certificate's rotation time (about 2/3 of its 24 s), not a retry.
    assert.ok(afterSuccess >= 10 * S && afterSuccess < 24 * S, `after a success the next look is the routine one (${afterSuccess} ms)`);
    cluster.secretReadError = unavailable();
    assert.equal(await step(clock), 1000, 'the first failure after a success waits 1 s again');
    assert.equal(await step(clock), 2000);
    await a.source.stop();
    assert.equal(clock.pending, 0, 'stop() cancels the pending retry');
  });

  it('a write refused for another reason than a lost race is left to the backoff, not repeated at once', async () => {
    const { cluster, a } = setup();
    cluster.secretWriteError = secretError('forbidden', 403, 'create', { namespace: 'persistent-ips-system' });
    await assert.rejects(a.source.reconcile(), (e: unknown) => e === cluster.secretWriteError);
    assert.equal(cluster.secretCreates, 1, 'one create per pass');
  });

  it('a missing controller namespace: one clear error line, quiet retries with backoff, one line when it recovers', async () => {
    const { log, lines } = capturingLogger();
    const { cluster, clock, a } = setup({ log });
    cluster.namespaceExists = false;
    await a.source.start();
    const delays = [await nextSleep(clock), await step(clock), await step(clock), await step(clock)];
    assert.deepEqual(delays, [1000, 2000, 4000, 8000], 'backoff, not a retry a second');
    assert.equal(cluster.secretCreates, 4, 'one create per attempt: a 404 is not taken for a lost race');
    // Above debug: what the first attempt set out to do (as on any first start), and the one line about the namespace.
    const loud = lines.filter((l) => l.level !== 'debug');
    assert.deepEqual(
      loud.map((l) => `${l.level} ${l.msg.slice(0, 40)}`),
      ['info renewing webhook certificates', 'error namespace persistent-ips-system does not'],
    );
    const line = loud[1];
    assert.equal(line!.level, 'error');
    assert.equal(line!.namespace, 'persistent-ips-system');
    assert.match(line!.msg, /namespace persistent-ips-system does not exist/);
    assert.match(line!.msg, /create the namespace/);
    assert.match(line!.msg, /--controller-namespace/);
    assert.ok(!JSON.stringify(lines).includes('"stack"'), 'no stack trace in any line');
    assert.equal(lines.filter((l) => l.level === 'debug' && /still does not exist/.test(l.msg)).length, 3, 'the repeats go to debug');
    assert.equal(a.source.ready(), false);

    cluster.namespaceExists = true;
    await step(clock);
    assert.equal(a.source.ready(), true);
    assert.equal(cluster.secretWrites, 1);
    const recovered = lines.filter((l) => l.level === 'info' && /namespace exists now/.test(l.msg));
    assert.equal(recovered.length, 1, 'said once when it recovers');
    await step(clock);
    assert.equal(lines.filter((l) => /namespace exists now/.test(l.msg)).length, 1, 'and not again at the next routine pass');
    await a.source.stop();
  });

  it('start() serves at once and stop() ends the loop', async () => {
    const { a } = setup();
    await a.source.start();
    assert.equal(a.source.ready(), true);
    await a.source.stop();
  });
});

describe('external (file) webhook certificates', () => {
  it('loads tls.crt/tls.key, reloads on change, and keeps the current pair while the files are inconsistent', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'persistent-ips-certs-'));
    try {
      const ca = await generateCa(Date.now(), 3600 * S);
      const first = await generateServing(ca, Date.now(), policy);
      const second = await generateServing(ca, Date.now(), policy);
      const loaded: CertKeyPair[] = [];
      const files = createFileCertificates({ dir, logger, onCertificate: (pair) => loaded.push(pair), clock: new FakeClock(0) });
      await files.start();
      assert.equal(files.ready(), false, 'no files yet');
      await writeFile(join(dir, 'tls.crt'), first.certPem);
      await writeFile(join(dir, 'tls.key'), first.keyPem);
      await files.reload();
      assert.equal(files.ready(), true);
      assert.equal(files.current()?.certPem, first.certPem);
      // Half-way through an update: new certificate, old key. Keep serving the old pair.
      await writeFile(join(dir, 'tls.crt'), second.certPem);
      await files.reload();
      assert.equal(files.current()?.certPem, first.certPem);
      await writeFile(join(dir, 'tls.key'), second.keyPem);
      await files.reload();
      assert.equal(files.current()?.certPem, second.certPem);
      await files.reload();
      assert.equal(loaded.length, 2, 'an unchanged pair is not handed over again');
      await files.stop();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('kubeCertStoreClient', () => {
  it('maps 404 to undefined, passes other errors on, and addresses the right objects', async () => {
    const calls: string[] = [];
    const notFound = (kind: string) => new KubeApiError({ reason: 'notFound', code: 404, object: { kind }, verb: 'get' });
    const store = kubeCertStoreClient(
      {
        get: async (r, ns, name) => {
          calls.push(`get ${r.plural} ${ns ?? '-'} ${name}`);
          if (r.plural === 'secrets') throw notFound('Secret');
          throw new KubeApiError({ reason: 'forbidden', code: 403, object: { kind: r.kind }, verb: 'get' });
        },
        create: async (r, obj) => {
          calls.push(`create ${r.plural}`);
          return obj;
        },
        replace: async (r, obj) => {
          calls.push(`replace ${r.plural}`);
          return obj;
        },
        jsonPatch: async (r, ns, name) => {
          calls.push(`patch ${r.group}/${r.plural} ${ns ?? '-'} ${name}`);
          return {} as never;
        },
      },
      { namespace: 'persistent-ips-system', secretName: 'persistent-ips-webhook-cert', webhookConfigurationName: 'persistent-ips-launcher-pods' },
    );
    const signal = new AbortController().signal;
    assert.equal(await store.getSecret(signal), undefined);
    await assert.rejects(store.getWebhookConfiguration(signal), KubeApiError);
    await store.patchWebhookConfiguration([], signal);
    assert.deepEqual(calls, [
      'get secrets persistent-ips-system persistent-ips-webhook-cert',
      'get mutatingwebhookconfigurations - persistent-ips-launcher-pods',
      'patch admissionregistration.k8s.io/mutatingwebhookconfigurations - persistent-ips-launcher-pods',
    ]);
  });
});
