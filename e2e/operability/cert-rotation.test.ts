// Issue 4, acceptance 4: rotation of the self-managed webhook certificates under load. The controller runs with a
// 20 s serving certificate and a 60 s CA (each renewed at 2/3 of its life), so that over 90 s the serving
// certificate is renewed several times and the CA at least once (with its hand-over: new CA published next to the
// old one, certificates of the new CA served only once the caBundle carries it). Meanwhile the real API server
// admits a launcher pod every 300 ms: not one may fail, and each must carry its claim reference.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { operabilityCase, paced, secs, summaryAtEnd } from './cases.ts';
import { sumOf, parsePrometheus, type ControllerProcess } from '../local/controller-process.ts';
import {
  claimReferences,
  CONTROLLER_NAMESPACE,
  expectedReferences,
  paths,
  handshake,
  secretCertificates,
  World,
  WEBHOOK_SECRET,
  type PodCreation,
  type Secret,
} from './world.ts';
import type { Vmi } from '../kubevirt/launcher-fixture.ts';

const world = new World('cert-rotation');

const SERVING_VALIDITY_S = 20;
const CA_VALIDITY_S = 60;
const LOAD_MS = 90_000;
const POD_PERIOD_MS = 300;
const SAMPLE_PERIOD_MS = 500;

let ns = '';
let controller: ControllerProcess;
let vmi: Vmi;

/** The API server's own count of calls to our webhook, by rejection, from its /metrics. */
async function apiserverWebhookCalls(): Promise<{ total: number; rejected: number }> {
  const text = (await world.cp.kubectl(['get', '--raw', '/metrics'], { timeoutMs: 60_000 })).stdout;
  const series = parsePrometheus(text).filter(
    (s) => s.name === 'apiserver_admission_webhook_request_total' && s.labels['name'] === 'launcher-pods-create.persistent-ips.kubevirt.io',
  );
  return {
    total: sumOf(series, 'apiserver_admission_webhook_request_total'),
    rejected: sumOf(series, 'apiserver_admission_webhook_request_total', { rejected: 'true' }),
  };
}

const pemCerts = (bundle: string): X509Certificate[] =>
  (bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((p) => new X509Certificate(p));

describe('operability: webhook certificate rotation under load', { timeout: 10 * 60_000 }, () => {
  before(
    async () => {
      await world.setUp();
      await world.installWebhookConfiguration(world.webhookPort);
      controller = await world.startController({
        name: 'short-certs',
        extraArgs: ['--webhook-cert-validity', String(SERVING_VALIDITY_S), '--webhook-ca-validity', String(CA_VALIDITY_S)],
      });
      await world.waitForCaBundle();
      ns = await world.namespace('certs');
      await world.createNad(ns, 'nad-red', { network: 'red' });
      vmi = await world.createVmi(ns, 'vmi-rot', [{ name: 'red', nadName: 'nad-red' }]);
      await world.waitForClaims(ns, ['vmi-rot.red']);
    },
    { timeout: 120_000 },
  );

  after(() => world.tearDown(), { timeout: 120_000 });

  operabilityCase(
    world,
    `serving certificate (${SERVING_VALIDITY_S} s) and CA (${CA_VALIDITY_S} s) rotate while the API server admits a launcher pod every ${POD_PERIOD_MS} ms for ${LOAD_MS / 1000} s: zero failed admissions`,
    async (t) => {
      const calls0 = await apiserverWebhookCalls();
      const logFrom = controller.logs.length;
      const t0 = Date.now();
      const pods: PodCreation[] = [];
      const served: { at: number; serial: string }[] = [];
      const secretSerials: string[] = [];
      const caPrints: string[] = [];
      const bundleSizes: number[] = [];
      const untrusted: string[] = [];
      const wanted = expectedReferences({ red: 'vmi-rot.red' });

      const loadOver = () => Date.now() - t0 >= LOAD_MS;
      await Promise.all([
        // Launcher pods through the API server (admission → webhook over TLS, verified with the caBundle).
        paced(POD_PERIOD_MS, loadOver, async (i) => {
          pods.push(await world.createLauncherPod(vmi, `rot-${i}`));
        }),
        // What is served and what is published: the certificate on the port must always verify against the caBundle
        // the API server has at that moment.
        paced(SAMPLE_PERIOD_MS, loadOver, async () => {
          const config = await world.api.get<{ webhooks: { clientConfig: { caBundle?: string } }[] }>(
            paths.webhookConfigurations('persistent-ips-launcher-pods'),
          );
          const bundle = Buffer.from(config?.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8');
          bundleSizes.push(pemCerts(bundle).length);
          const peer = await handshake(world.webhookPort, bundle);
          // A failed handshake is no certificate served: it counts as untrusted, never as one more serial.
          if (peer.serial !== undefined) served.push({ at: Date.now() - t0, serial: peer.serial });
          if (!peer.authorized)
            untrusted.push(`+${Date.now() - t0} ms: serial ${peer.serial ?? '(no certificate)'} not trusted by the caBundle (${peer.error})`);
          const fromSecret = secretCertificates(await world.api.get<Secret>(paths.secrets(CONTROLLER_NAMESPACE, WEBHOOK_SECRET)));
          if (fromSecret.servingSerial && secretSerials.at(-1) !== fromSecret.servingSerial) secretSerials.push(fromSecret.servingSerial);
          if (fromSecret.caFingerprint && caPrints.at(-1) !== fromSecret.caFingerprint) caPrints.push(fromSecret.caFingerprint);
        }),
      ]);
      const calls1 = await apiserverWebhookCalls();

      const servedSerials = [...new Set(served.map((s) => s.serial))];
      const servedChanges = served.filter((s, i) => i > 0 && s.serial !== served[i - 1]!.serial).map((s) => `+${secs(s.at)}`);
      const renewals = controller.logs.slice(logFrom).filter((l) => l.msg === 'renewing webhook certificates');
      const caRenewals = renewals.filter((l) => l['newCa'] === true).length;
      const servingRenewals = renewals.filter((l) => l['newServing'] === true).length;
      const failed = pods.filter((p): p is Extract<PodCreation, { ok: false }> => !p.ok);
      const slowest = Math.max(...pods.map((p) => p.ms));
      t.diagnostic(
        `${pods.length} launcher pods in ${secs(Date.now() - t0)}: ${failed.length} refused; slowest admission ${slowest} ms; ` +
          `API server counted ${calls1.total - calls0.total} webhook calls, ${calls1.rejected - calls0.rejected} rejected`,
      );
      t.diagnostic(
        `rotations: ${servingRenewals} serving-certificate renewals and ${caRenewals} CA renewals logged; ` +
          `${servedSerials.length} distinct serving certificates seen on the port (changes at ${servedChanges.join(', ')}), ` +
          `${secretSerials.length} in the Secret; ${caPrints.length} distinct CAs; caBundle sizes ${[...new Set(bundleSizes)].join('/')}`,
      );
      console.log(
        `[operability:certs] serving certificates ${servedSerials.length} (renewals ${servingRenewals}), CAs ${caPrints.length} (renewals ${caRenewals}), ${pods.length} pods, ${failed.length} refused`,
      );

      assert.deepEqual(
        failed.map((f) => `HTTP ${f.status}: ${f.message}`),
        [],
        'no launcher pod was refused',
      );
      for (const p of pods) if (p.ok) assert.deepEqual(claimReferences(p.pod), wanted, `${p.pod.metadata?.name} carries its claim reference`);
      assert.equal(calls1.rejected - calls0.rejected, 0, 'the API server saw no rejected or failed webhook call');
      assert.deepEqual(untrusted, [], 'the served certificate always verified against the published caBundle');
      assert.ok(servedSerials.length >= 2, `the serving certificate's serial changed at least once (${servedSerials.length} seen)`);
      assert.ok(caPrints.length >= 2, `the CA was rotated at least once (${caPrints.length} seen)`);
      assert.ok(pods.length >= (LOAD_MS / POD_PERIOD_MS) * 0.8, `pods kept coming (${pods.length})`);
    },
    { timeoutMs: 5 * 60_000 },
  );
});

summaryAtEnd(world);
