// Issue 4, acceptance 1: the launcher-pod webhook, called by the real kube-apiserver over TLS (URL configuration
// derived from manifests/webhook, caBundle written by the controller), served by the controller process built from
// this repository (`dist/cli/main.js run`).
//
// One world for the file. Launcher pods come from KubeVirt's real virt-controller in one namespace, and are created
// directly through the API (rendered as virt-controller renders them: the launcher fixture, test infrastructure) in
// another where a case needs to see each admission itself or to control when the VMI appears; virt-controller is
// stopped meanwhile (world.withKubeVirtSilent), so that those admissions are the case's own.
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import type { NetworkSelectionElement } from '../../src/kube/types.ts';
import { poll } from '../harness/index.ts';
import { buildVM, launcherNetworkElements, launcherPodName, renderLauncherPod, type VMNetworkRequest, type Vmi } from '../kubevirt/launcher-fixture.ts';
import { podElements } from '../kubevirt/flows.ts';
import { setGateInCR } from '../kubevirt/kubevirt.ts';
import { operabilityCase, summaryAtEnd } from './cases.ts';
import { startLagProxy } from './lag-proxy.ts';
import { sumOf, type ControllerOptions, type ControllerProcess, type LogLine } from '../local/controller-process.ts';
import { claimReferences, expectedReferences, paths, handshake, World, WEBHOOK_SECRET, CONTROLLER_NAMESPACE, type Secret } from './world.ts';
import { admitDirectly, applyPatch } from '../local/admission.ts';

const world = new World('webhook', { virtController: true });

/**
 * How long "no claim appears" is watched for where the gate is off. With the gate on, this controller creates a new
 * VM's claims within a few hundred milliseconds of the VM (the first case prints the time it measured); three
 * seconds without any is the evidence that none is coming, not a wait for something to happen.
 */
const NO_CLAIM_WINDOW_MS = 3_000;

/** Two persistent networks and one ordinary one (NADs of the same names in every namespace used here). */
const NETWORKS: VMNetworkRequest[] = [
  { name: 'red', nadName: 'nad-red' },
  { name: 'blue', nadName: 'nad-blue' },
  { name: 'plain', nadName: 'nad-plain' },
];
const wantedRefs = (vm: string) => expectedReferences({ red: `${vm}.red`, blue: `${vm}.blue`, plain: undefined });
const noRefs = expectedReferences({ red: undefined, blue: undefined, plain: undefined });

/** Namespace driven by virt-controller (VMs → VMIs → launcher pods). */
let vmNs = '';
/** Namespace where VMIs and launcher pods are created directly through the API (virt-controller silent). */
let directNs = '';

const restartController = (name: string, extra: Partial<ControllerOptions> = {}) => world.restartController({ name, ...extra });
const stopController = () => world.controller?.stop();

const running = (): ControllerProcess => {
  if (!world.controller?.alive) throw new Error('no controller is running');
  return world.controller;
};

async function createNads(ns: string): Promise<void> {
  await world.createNad(ns, 'nad-red', { network: 'red' });
  await world.createNad(ns, 'nad-blue', { network: 'tenant-blue', subnets: '10.201.0.0/24' });
  await world.createNad(ns, 'nad-plain', { network: 'plain', persistent: false, subnets: '10.202.0.0/24' });
}

/** `elements` with exactly `refs` added: `ipam-claim-reference` on the interfaces that have one. */
const withRefs = (elements: NetworkSelectionElement[], refs: Record<string, string | undefined>) =>
  elements.map((e) => (refs[e.interface!] ? { ...e, 'ipam-claim-reference': refs[e.interface!] } : e));

/**
 * The admitted pod must be the rendered one (what KubeVirt asked for) with exactly `refs` added: every element
 * kept as it was, in order, plus `ipam-claim-reference` where a claim is expected, and nothing else changed.
 */
function assertAdmittedAs(pod: V1Pod, rendered: V1Pod, refs: Record<string, string | undefined>): void {
  assert.deepEqual(
    podElements(pod),
    withRefs(podElements(rendered), refs),
    'network-selection elements: the rendered ones, in order, with exactly the expected ipam-claim-reference values',
  );
  assert.deepEqual(claimReferences(pod), refs);
  const others = (p: V1Pod) => Object.fromEntries(Object.entries(p.metadata?.annotations ?? {}).filter(([k]) => k !== 'k8s.v1.cni.cncf.io/networks'));
  assert.deepEqual(others(pod), others(rendered), 'every other annotation is untouched');
  assert.deepEqual(pod.metadata?.labels, rendered.metadata?.labels, 'labels untouched');
}

/**
 * A launcher pod virt-controller made: its network-selection elements are KubeVirt's (rendered from the VMI spec as
 * virt-controller renders them), in order, with exactly `refs` added. Its other annotations and labels are
 * virt-controller's own, unknown here: that the webhook leaves them alone is asserted on the pods this file renders
 * itself (assertAdmittedAs), which take the same path through the webhook.
 */
function assertVmPodAdmitted(pod: V1Pod, vmi: Vmi, refs: Record<string, string | undefined>): void {
  assert.deepEqual(
    podElements(pod),
    withRefs(launcherNetworkElements(vmi.metadata.namespace!, vmi.spec), refs),
    "network-selection elements: KubeVirt's, in order, with exactly the expected ipam-claim-reference values",
  );
  assert.deepEqual(claimReferences(pod), refs);
}

/** A bounded observation window (NO_CLAIM_WINDOW_MS): no claim of the VM or VMI `owner` appears in `ns`. */
async function assertNoClaimAppears(ns: string, owner: string, message: string): Promise<void> {
  for (const deadline = Date.now() + NO_CLAIM_WINDOW_MS; Date.now() < deadline; await sleep(250)) {
    const names = (await world.api.claims(ns)).map((x) => x.metadata.name).filter((n) => n.startsWith(`${owner}.`));
    assert.deepEqual(names, [], message);
  }
}

/** Admissions the webhook declined (gate off). */
const skipped = (c: ControllerProcess) => c.metric('persistent_ips_webhook_admissions_total', { result: 'skipped' });

/** Where the webhook found the VMIs of the pods it admitted: its cache, or a GET from the API. */
async function vmiLookups(c: ControllerProcess): Promise<{ cache: number; api: number }> {
  const m = await c.metrics();
  const of = (source: string) => sumOf(m, 'persistent_ips_webhook_vmi_lookups_total', { source });
  return { cache: of('cache'), api: of('api') };
}

const gateLog = (enabled: boolean) => (l: LogLine) => l.msg === 'feature gate changed; reconciling every VM' && l['enabled'] === enabled;

describe('operability: the launcher-pod webhook through the real API server over TLS', { timeout: 15 * 60_000 }, () => {
  before(
    async () => {
      await world.setUp();
      await world.installWebhookConfiguration(world.webhookPort);
      world.controller = await world.startController({ name: 'main' });
      await world.waitForCaBundle();
      vmNs = await world.namespace('wh-vms');
      directNs = await world.namespace('wh-direct');
      await createNads(vmNs);
      await createNads(directNs);
    },
    { timeout: 180_000 },
  );

  after(() => world.tearDown(), { timeout: 120_000 });

  operabilityCase(
    world,
    'launcher pod of a VM with two persistent networks and one ordinary one gets exactly its two claim references (virt-controller → API server → webhook over TLS)',
    async (t) => {
      const c = running();
      const bundle = await world.waitForCaBundle();
      const tls = await handshake(world.webhookPort, bundle);
      assert.ok(tls.authorized, `the webhook's certificate verifies against the caBundle for 127.0.0.1 (${tls.error ?? 'ok'})`);
      const before = await c.metrics();

      const t0 = Date.now();
      await world.kv.createVM(buildVM({ namespace: vmNs, name: 'vm1', networks: NETWORKS }));
      const claims = await world.waitForClaims(vmNs, ['vm1.red', 'vm1.blue']);
      const tClaims = Date.now() - t0;
      const { vmi, pod } = await world.kv.waitForVMIRunning(vmNs, 'vm1', { timeoutMs: 30_000 });
      t.diagnostic(`claims ${claims.map((x) => x.metadata.name).join(', ')} ${tClaims} ms after the VM; launcher pod ${pod.metadata!.name} running`);

      assertVmPodAdmitted(pod, vmi, wantedRefs('vm1'));
      // The ordinary network's element is exactly what KubeVirt asked for.
      const plain = podElements(pod).find((e) => e.name === 'nad-plain');
      assert.deepEqual(
        plain,
        launcherNetworkElements(vmNs, vmi.spec).find((e) => e.name === 'nad-plain'),
      );
      assert.equal(Object.hasOwn(plain!, 'ipam-claim-reference'), false);
      // Each reference names a claim of this VM for that network.
      for (const claim of claims) assert.equal(claim.metadata.ownerReferences?.[0]?.name, 'vm1');

      const after = await c.metrics();
      const delta = (name: string, labels: Record<string, string> = {}) => sumOf(after, name, labels) - sumOf(before, name, labels);
      assert.ok(delta('persistent_ips_webhook_admissions_total', { result: 'patched' }) >= 1, 'the API server called the webhook, which patched the pod');
      const refused = await world.rejectedLauncherPods(vmNs);
      assert.equal(refused.length, 0, `no launcher pod was refused: ${JSON.stringify(refused)}`);
    },
  );

  operabilityCase(world, 'a pod without the kubevirt.io=virt-launcher label is not touched (never sent to the webhook)', async () => {
    await world.withKubeVirtSilent(async () => {
      const c = running();
      const vmi = await world.kv.getVMI(vmNs, 'vm1');
      assert.ok(vmi, 'VMI vm1 exists (previous case)');
      const pod = renderLauncherPod(vmi, { name: 'not-a-launcher' });
      delete pod.metadata!.labels!['kubevirt.io'];
      const before = await c.metric('persistent_ips_webhook_admissions_total');
      const created = await world.createPod(vmNs, pod);
      assert.ok(created.ok, `pod created: ${created.ok ? '' : created.message}`);
      assert.equal(
        created.pod.metadata?.annotations?.['k8s.v1.cni.cncf.io/networks'],
        pod.metadata!.annotations!['k8s.v1.cni.cncf.io/networks'],
        'networks annotation byte for byte as sent',
      );
      assert.deepEqual(claimReferences(created.pod), noRefs);
      assert.equal(await c.metric('persistent_ips_webhook_admissions_total'), before, 'the webhook was not called (every call counts an outcome)');
      await world.api.delete(paths.pods(vmNs, 'not-a-launcher'));
    });
  });

  operabilityCase(
    world,
    "webhook HTTP metrics: controller-runtime's controller_runtime_webhook_requests_total and _latency_seconds count the API server's calls (docs/webhook-behaviour.md)",
    async () => {
      await world.withKubeVirtSilent(async () => {
        const c = running();
        const before = await c.metrics();
        const vmi = await world.kv.getVMI(vmNs, 'vm1');
        assert.ok(vmi, 'VMI vm1 exists (first case)');
        const created = await world.createLauncherPod(vmi, 'metrics-probe');
        assert.ok(created.ok, `launcher pod admitted: ${created.ok ? '' : created.message}`);
        assert.deepEqual(claimReferences(created.pod), wantedRefs('vm1'));
        const after = await c.metrics();
        const delta = (name: string, labels: Record<string, string> = {}) => sumOf(after, name, labels) - sumOf(before, name, labels);
        assert.equal(delta('persistent_ips_webhook_admissions_total', { result: 'patched' }), 1, "one admission (this project's counter)");
        const series = after.filter((x) => x.name.startsWith('controller_runtime_webhook_')).map((x) => `${x.name}${JSON.stringify(x.labels)} ${x.value}`);
        assert.equal(
          delta('controller_runtime_webhook_requests_total', { webhook: '/mutate-v1-pod', code: '200' }),
          1,
          `controller_runtime_webhook_requests_total{webhook="/mutate-v1-pod",code="200"} counts the call; series now: ${series.join('; ') || '(none)'}`,
        );
        assert.equal(delta('controller_runtime_webhook_latency_seconds_count', { webhook: '/mutate-v1-pod' }), 1, 'the latency histogram observed it');
        await world.api.delete(paths.pods(vmNs, created.pod.metadata!.name!));
      });
    },
  );

  operabilityCase(world, 'gate off in the KubeVirt CR: launcher pods are admitted unchanged and no claim is made', async (t) => {
    const c = running();
    const from = c.logs.length;
    await setGateInCR(world.api, false);
    await c.waitForLog('the gate turning off', gateLog(false), { from });
    try {
      const skippedBefore = await skipped(c);
      await world.kv.createVM(buildVM({ namespace: vmNs, name: 'vm-gate-off', networks: NETWORKS }));
      const { vmi, pod } = await world.kv.waitForVMIRunning(vmNs, 'vm-gate-off', { timeoutMs: 30_000 });
      assertVmPodAdmitted(pod, vmi, noRefs);
      assert.ok((await skipped(c)) > skippedBefore, 'the webhook was called and declined (gate off)');
      await assertNoClaimAppears(vmNs, 'vm-gate-off', 'no claim while the gate is off');
      t.diagnostic(`pod ${pod.metadata!.name} admitted unchanged; no claim in ${NO_CLAIM_WINDOW_MS} ms`);
    } finally {
      const back = c.logs.length;
      await setGateInCR(world.api, true);
      await c.waitForLog('the gate turning on again', gateLog(true), { from: back });
    }
    await world.kv.deleteVM(vmNs, 'vm-gate-off');
  });

  operabilityCase(world, '--feature-gates=PersistentIPs=false overrides the CR: launcher pods are admitted unchanged', async () => {
    await world.withKubeVirtSilent(async () => {
      const c = await restartController('gate-flag-off', { featureGates: 'PersistentIPs=false' });
      const synced = await c.waitForLog('caches synced', (l) => l.msg === 'caches synced');
      assert.deepEqual(synced['gate'], { enabled: false, source: 'flag' }, 'the flag decides');
      const skippedBefore = await skipped(c);
      const vmi = await world.createVmi(directNs, 'vmi-flag-off', NETWORKS);
      const created = await world.createLauncherPod(vmi, 'create');
      assert.ok(created.ok, `launcher pod admitted: ${created.ok ? '' : created.message}`);
      assertAdmittedAs(created.pod, renderLauncherPod(vmi, { name: created.pod.metadata!.name! }), noRefs);
      assert.ok((await skipped(c)) > skippedBefore, 'the webhook was called and declined (gate off)');
      await world.api.delete(paths.vmis(directNs, 'vmi-flag-off'));
      await restartController('main-2');
    });
  });

  operabilityCase(
    world,
    'a launcher pod created right after its VMI, before the VMI reaches the controller cache, still gets its references (API GET fallback)',
    async (t) => {
      await world.withKubeVirtSilent(async () => {
        // Created back to back, the VMI's watch event usually reaches the controller before the pod's admission does (a
        // plain loop of 30 tries never missed the cache on this machine). To make "not in the cache yet" certain, this
        // controller talks to the API server through a proxy that delivers the server's bytes LAG_MS late: its VMI
        // watch lags, while the API server calls the webhook directly. The webhook must then read the VMI from the API.
        const LAG_MS = 500;
        const proxy = await startLagProxy(world.cp.server, LAG_MS);
        try {
          const kubeconfig = proxy.writeKubeconfig(join(world.dir, 'kubeconfig-lagging'), world.cp.caFile, world.cp.token);
          const c = await restartController('main-lagging-watch', { kubeconfig });
          const start = await vmiLookups(c);
          const names = ['race-1', 'race-2', 'race-3'];
          for (const name of names) {
            const vmi = await world.createVmi(directNs, name, NETWORKS);
            const created = await world.createLauncherPod(vmi, 'create');
            assert.ok(created.ok, `launcher pod of ${name} admitted: ${created.ok ? '' : `HTTP ${created.status} ${created.message}`}`);
            assertAdmittedAs(created.pod, renderLauncherPod(vmi, { name: created.pod.metadata!.name! }), wantedRefs(name));
            t.diagnostic(`${name}: VMI created, launcher pod admitted ${created.ms} ms later with its references`);
          }
          const end = await vmiLookups(c);
          t.diagnostic(`vmi lookups: source="api" +${end.api - start.api}, source="cache" +${end.cache - start.cache}`);
          assert.equal(end.api - start.api, names.length, 'persistent_ips_webhook_vmi_lookups_total{source="api"} grew by one per pod');
          // The controller makes the claims the references name.
          await world.waitForClaims(
            directNs,
            names.flatMap((n) => [`${n}.red`, `${n}.blue`]),
          );
        } finally {
          await restartController('main-3');
          await proxy.close();
        }
      });
    },
  );

  operabilityCase(
    world,
    'controller started after the VM exists: the launcher pod refused while it was down is admitted with its references once it is up',
    async (t) => {
      await stopController();
      await world.kv.createVM(buildVM({ namespace: vmNs, name: 'vm-late', networks: NETWORKS }));
      // failurePolicy Fail: with no webhook answering, the API server refuses the launcher pod; virt-controller retries.
      const refused = await poll('a refused launcher pod of vm-late', 30_000, async () =>
        (await world.rejectedLauncherPods(vmNs)).find((w) => w.vmi === 'vm-late'),
      );
      t.diagnostic(`while down: ${refused.message.slice(0, 220)}`);
      const c = await restartController('main-after-vm');
      const { vmi, pod } = await world.kv.waitForVMIRunning(vmNs, 'vm-late', { timeoutMs: 30_000 });
      assertVmPodAdmitted(pod, vmi, wantedRefs('vm-late'));
      await poll('claims vm-late.red and vm-late.blue', 30_000, async () => {
        const names = (await world.api.claims(vmNs)).map((x) => x.metadata.name);
        return names.includes('vm-late.red') && names.includes('vm-late.blue') ? true : undefined;
      });
      const lookups = await vmiLookups(c);
      t.diagnostic(`vm-late admitted after restart; vmi lookups: cache ${lookups.cache}, api ${lookups.api}`);
    },
  );

  operabilityCase(
    world,
    'a controller watching one namespace (--namespace) leaves launcher pods of other namespaces alone (it will never make their claims)',
    async (t) => {
      await world.withKubeVirtSilent(async () => {
        // docs/rbac.md "Watching one namespace only": with --namespace=NS the controller keeps claims for VMs in NS only.
        // The webhook configuration still sends it every namespace's launcher pods. A reference to a claim nobody will
        // create would leave the IPAM plugin waiting for it; the pod must be admitted unchanged.
        const c = await restartController('namespaced', { extraArgs: ['--namespace', vmNs] });
        try {
          const vmi = await world.createVmi(directNs, 'vmi-other-ns', NETWORKS);
          const created = await world.createLauncherPod(vmi, 'create');
          assert.ok(created.ok, `launcher pod admitted: ${created.ok ? '' : `HTTP ${created.status} ${created.message}`}`);
          t.diagnostic(
            `pod in ${directNs} (not watched) stored with ${JSON.stringify(claimReferences(created.pod))}; vmi lookups api ${(await vmiLookups(c)).api}`,
          );
          await assertNoClaimAppears(directNs, 'vmi-other-ns', 'no claim outside the watched namespace');
          assert.deepEqual(claimReferences(created.pod), noRefs, 'no reference to a claim this controller will never create');
        } finally {
          await world.api.delete(paths.vmis(directNs, 'vmi-other-ns'));
          await restartController('main-4');
        }
      });
    },
  );

  operabilityCase(
    world,
    'a starting controller never admits a launcher pod without its references (every answer from process start to ready, direct and through the API server)',
    async (t) => {
      await world.withKubeVirtSilent(async () => {
        // The VMI exists before the controller does. From the moment the process starts until well after /readyz, its
        // launcher pod is (a) sent straight to the webhook port, and (b) created through the API server (the URL
        // configuration calls that port whether or not the controller is ready: there is no Service and no readiness
        // gating in local runs). Every answer must be the right patch or a refusal (KubeVirt retries a refusal); an
        // "allowed, unchanged" answer starts the VM without its persistent addresses.
        //
        // The controller reaches the API server through a proxy that answers LAG_MS late (lag-proxy.ts), as a busy API
        // server or a large cluster whose lists take seconds would: start-up then has its real order spread out in time
        // (certificate from the Secret, webhook serving, informers listing, caches synced) instead of squeezed into the
        // few milliseconds a fast local API server gives, where a window between two steps is only sometimes seen.
        const LAG_MS = 1_000;
        const proxy = await startLagProxy(world.cp.server, LAG_MS);
        const kubeconfig = proxy.writeKubeconfig(join(world.dir, 'kubeconfig-lagging-startup'), world.cp.caFile, world.cp.token);
        await stopController();
        const vmi = await world.createVmi(directNs, 'vmi-startup', NETWORKS);
        const pod = renderLauncherPod(vmi, { name: launcherPodName(vmi.metadata.name, vmi.metadata.uid!, 'probe') });
        const secret = await world.api.get<Secret>(paths.secrets(CONTROLLER_NAMESPACE, WEBHOOK_SECRET));
        const ca = Buffer.from(secret!.data!['ca-bundle.crt']!, 'base64').toString('utf8');
        const wanted = wantedRefs('vmi-startup');
        const c = await world.startController({ name: 'main-startup-probe', waitReady: false, kubeconfig });
        world.controller = c;
        t.after(async () => {
          await stopController();
          await proxy.close();
        });
        let readyAt = 0;
        const readiness = (async () => {
          while (!readyAt && c.alive) {
            if ((await c.probe('readyz')) === 200) readyAt = Date.now();
            else await new Promise((r) => setTimeout(r, 20));
          }
        })();
        const since = (at: number) => `+${at - c.startedAt} ms${!readyAt || at < readyAt ? ' (before ready)' : ''}`;
        const wrong: string[] = [];
        const counts = { direct: { noAnswer: 0, refused: 0, patched: 0 }, api: { refused: 0, patched: 0 } };
        let afterReady = 0;
        const going = () => {
          if (!c.alive) assert.fail(c.diedReason());
          if (Date.now() - c.startedAt > 90_000) assert.fail('the controller did not become ready within 90 s');
          return afterReady < 60;
        };
        // Senders on kept-alive connections: many answers per millisecond of start-up, so that a short window of wrong
        // answers is seen.
        const agent = new Agent({ keepAlive: true, maxSockets: 3 });
        const direct = async () => {
          while (going()) {
            const a = await admitDirectly(world.webhookPort, ca, pod, agent);
            const at = Date.now();
            if (readyAt) afterReady++;
            if (a.status === 0) {
              counts.direct.noAnswer++;
              await new Promise((r) => setTimeout(r, 5)); // nothing listening yet
            } else if (a.allowed === false) counts.direct.refused++;
            else if (a.allowed === true && a.patch && JSON.stringify(claimReferences(applyPatch(pod, a.patch))) === JSON.stringify(wanted))
              counts.direct.patched++;
            else
              wrong.push(`direct ${since(at)}: HTTP ${a.status} allowed=${a.allowed} ${a.patch ? `wrong patch ${JSON.stringify(a.patch)}` : 'without patch'}`);
          }
        };
        let n = 0;
        const throughApi = async () => {
          while (going()) {
            const created = await world.createLauncherPod(vmi, `startup-${n++}`);
            const at = Date.now();
            if (readyAt) afterReady++;
            if (!created.ok) {
              counts.api.refused++;
              await new Promise((r) => setTimeout(r, 5));
            } else if (JSON.stringify(claimReferences(created.pod)) === JSON.stringify(wanted)) counts.api.patched++;
            else wrong.push(`API server ${since(at)}: pod ${created.pod.metadata?.name} stored with ${JSON.stringify(claimReferences(created.pod))}`);
          }
        };
        await Promise.all([direct(), direct(), direct(), throughApi(), throughApi()]);
        agent.destroy();
        await readiness;
        t.diagnostic(
          `ready ${readyAt - c.startedAt} ms after start; direct answers: ${counts.direct.noAnswer} none, ${counts.direct.refused} refused, ${counts.direct.patched} right patch; ` +
            `through the API server: ${counts.api.refused} refused, ${counts.api.patched} with references; ${wrong.length} admitted WITHOUT references`,
        );
        const firstLines = c.logs.filter((l) =>
          ['serving the launcher-pod webhook', 'caches synced', 'feature gate changed; reconciling every VM'].includes(String(l.msg)),
        );
        t.diagnostic(`controller start-up: ${firstLines.map((l) => `${l.msg} @${Date.parse(String(l.time)) - c.startedAt} ms`).join('; ')}`);
        const viaApi = wrong.filter((w) => w.startsWith('API server'));
        if (viaApi.length) t.diagnostic(`through the API server: ${viaApi.slice(0, 3).join('; ')}${viaApi.length > 3 ? ` (+${viaApi.length - 3} more)` : ''}`);
        assert.equal(
          wrong.length,
          0,
          `no launcher pod may be admitted without its claim references while the controller starts; ${wrong.length} were ` +
            `(${viaApi.length} of them stored by the API server), first ${wrong[0]}, last ${wrong.at(-1)} ` +
            '(the webhook serves as soon as its certificate is loaded, before the caches, and with them the PersistentIPs gate, are synced)',
        );
      });
    },
  );
});

summaryAtEnd(world);
