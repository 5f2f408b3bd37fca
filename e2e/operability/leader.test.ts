// Issue 4, acceptance 3: leader election between two controller processes (`--leader-elect`, distinct probe,
// metrics and webhook ports) against a real API server: one reconciles, the other waits; SIGKILL of the leader
// while VMs are being created; the standby takes over within 20 s; no claim is lost or made twice; the webhook
// keeps answering.
//
// The webhook: every replica serves it, but a URL webhook configuration (local runs have no Service to spread calls
// over ready replicas) names ONE address. It names the replica that survives (B), so the API server's admissions
// show that launcher pods keep being admitted, with their references, across the leader's death; and the killed
// replica (A) is asked directly, over TLS with the published CA, from before the load starts until it is killed,
// to show that it answered correctly as long as it lived. Together: both replicas served, and the one the API
// server uses never stopped. A VM created while nobody leads has its launcher pod refused until the new leader made
// its claim (never admitted without it, nor with another's), then admitted on the retry.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { CLAIM_FINALIZER } from '../../src/claims/constants.ts';
import { freePort, poll } from '../harness/index.ts';
import { buildVM, launcherPodName, renderLauncherPod } from '../kubevirt/launcher-fixture.ts';
import { operabilityCase, paced, secs, summaryAtEnd } from './cases.ts';
import { sumOf, type ControllerProcess } from '../local/controller-process.ts';
import {
  claimReferences,
  CONTROLLER_NAMESPACE,
  expectedReferences,
  LEASE_NAME,
  paths,
  World,
  WEBHOOK_SECRET,
  type Lease,
  type PodCreation,
  type Secret,
} from './world.ts';
import { admitDirectly, applyPatch, type AdmissionAnswer } from '../local/admission.ts';
import { WatchLog, type IPAMClaim } from '../suite/kube.ts';

const world = new World('leader-election', { virtController: true });
const TAKEOVER_LIMIT_MS = 20_000;

let portA = 0;
let portB = 0;
let ns = '';
let directNs = '';

const start = (name: string, port: number): Promise<ControllerProcess> => world.startController({ name, webhookPort: port, leaderElect: true });
const isLeader = async (c: ControllerProcess): Promise<number> => c.metric('leader_election_master_status');
const reconciles = async (c: ControllerProcess): Promise<number> => c.metric('controller_runtime_reconcile_total');
const identityOf = (c: ControllerProcess): string => String(c.logs.find((l) => l['component'] === 'leader-election' && l['identity'])?.['identity'] ?? '');
const holder = async (): Promise<string> => (await world.api.get<Lease>(paths.leases(CONTROLLER_NAMESPACE, LEASE_NAME)))?.spec?.holderIdentity ?? '';
const red = (vm: string) => expectedReferences({ red: `${vm}.red` });

describe('operability: leader election between two controller processes', { timeout: 10 * 60_000 }, () => {
  before(
    async () => {
      await world.setUp();
      portA = world.webhookPort;
      do portB = await freePort();
      while (portB === portA);
      await world.installWebhookConfiguration(portB);
      ns = await world.namespace('le');
      directNs = await world.namespace('le-direct');
      await world.createNad(ns, 'nad-red', { network: 'red' });
      await world.createNad(directNs, 'nad-red', { network: 'red' });
    },
    { timeout: 120_000 },
  );

  after(() => world.tearDown(), { timeout: 120_000 });

  operabilityCase(
    world,
    'two --leader-elect replicas: only the leader reconciles; SIGKILL of the leader while VMs are created; the standby takes over within 20 s; no claim lost or duplicated; the webhook keeps answering',
    async (t) => {
      // A first, so that A leads.
      const a = await start('a', portA);
      await poll('A to lead', 30_000, async () => ((await isLeader(a)) === 1 ? true : undefined));
      const b = await start('b', portB);
      assert.equal(await isLeader(a), 1, 'A: leader_election_master_status 1');
      assert.equal(await isLeader(b), 0, 'B: leader_election_master_status 0');
      assert.equal(await holder(), identityOf(a), `the Lease names A (${identityOf(a)})`);
      t.diagnostic(`A ${identityOf(a)} leads (webhook :${portA}); B ${identityOf(b)} stands by (webhook :${portB}, the configuration's URL)`);
      const claims = await WatchLog.start<IPAMClaim>(world.api, paths.claims(ns));

      // While A leads, only A reconciles.
      const [ra0, rb0] = [await reconciles(a), await reconciles(b)];
      const vms: { name: string; uid: string; at: number }[] = [];
      const createVm = async () => {
        const name = `le-${vms.length + 1}`;
        const vm = await world.kv.createVM(buildVM({ namespace: ns, name, networks: [{ name: 'red', nadName: 'nad-red' }] }));
        vms.push({ name, uid: vm.metadata.uid!, at: Date.now() });
      };
      for (let i = 0; i < 3; i++) await createVm();
      await world.waitForClaims(
        ns,
        vms.map((v) => `${v.name}.red`),
      );
      const [ra1, rb1] = [await reconciles(a), await reconciles(b)];
      assert.ok(ra1 > ra0, `the leader's controller_runtime_reconcile_total grows (${ra0} → ${ra1})`);
      assert.equal(rb1, rb0, `the standby's controller_runtime_reconcile_total does not (${rb0} → ${rb1})`);

      // Load: a VM every 600 ms (stand-in → launcher pods admitted by B through the API server), a launcher pod made
      // directly through the API server every 300 ms, and A's webhook asked directly every 100 ms.
      const secret = await world.api.get<Secret>(paths.secrets(CONTROLLER_NAMESPACE, WEBHOOK_SECRET));
      const ca = Buffer.from(secret!.data!['ca-bundle.crt']!, 'base64').toString('utf8');
      const probeVmi = await world.createVmi(directNs, 'probe', [{ name: 'red', nadName: 'nad-red' }]);
      const probePod = renderLauncherPod(probeVmi, { name: launcherPodName('probe', probeVmi.metadata.uid!, 'direct') });
      let loading = true;
      let killedAt = 0;
      const directPods: (PodCreation & { at: number })[] = [];
      const aAnswers: { sent: number; done: number; a: AdmissionAnswer }[] = [];
      const loadOver = () => !loading;
      const loops = Promise.all([
        paced(600, loadOver, () => createVm()),
        paced(300, loadOver, async (i) => {
          const created = await world.createLauncherPod(probeVmi, `direct-${i}`);
          directPods.push({ ...created, at: Date.now() });
        }),
        paced(
          100,
          () => killedAt > 0 || !loading,
          async () => {
            const sent = Date.now();
            const answer = await admitDirectly(portA, ca, probePod);
            aAnswers.push({ sent, done: Date.now(), a: answer });
          },
        ),
      ]);
      try {
        // Kill A once the load runs: some VMs made and A seen answering under it.
        const loadStart = vms.length;
        await poll('load running', 30_000, async () => (vms.length >= loadStart + 4 && aAnswers.length >= 10 ? true : undefined));
        const vmsAtKill = vms.length;
        const rbAtKill = await reconciles(b);
        assert.equal(rbAtKill, rb0, 'the standby never reconciled while A led');
        killedAt = Date.now();
        await a.kill();
        const takenOver = await poll('B to take over', 60_000, async () => ((await isLeader(b)) === 1 ? Date.now() : undefined), { intervalMs: 100 });
        const takeoverMs = takenOver - killedAt;
        t.diagnostic(`leader A SIGKILLed with ${vmsAtKill} VMs created; B leads ${secs(takeoverMs)} later (limit ${secs(TAKEOVER_LIMIT_MS)})`);
        console.log(`[operability:leader] takeover after SIGKILL of the leader: ${takeoverMs} ms`);
        assert.ok(takeoverMs <= TAKEOVER_LIMIT_MS, `takeover within ${TAKEOVER_LIMIT_MS} ms (took ${takeoverMs} ms)`);
        assert.equal(await holder(), identityOf(b), 'the Lease names B');
        // Keep the load on a little longer under the new leader.
        const vmsAtTakeover = vms.length;
        await poll('VMs created under the new leader', 30_000, async () => (vms.length >= vmsAtTakeover + 3 ? true : undefined));
      } finally {
        loading = false;
        await loops;
      }
      assert.ok((await reconciles(b)) > rb0, 'B reconciles once it leads');

      // No claim lost: every VM has its claim, owned by it, with the finalizer; and none made twice or deleted.
      const want = vms.map((v) => `${v.name}.red`);
      const found = await world.waitForClaims(ns, want, 60_000);
      for (const v of vms) {
        const claim = found.find((c) => c.metadata.name === `${v.name}.red`)!;
        assert.equal(claim.metadata.ownerReferences?.[0]?.uid, v.uid, `${claim.metadata.name} is owned by its VM`);
        assert.deepEqual(claim.metadata.finalizers, [CLAIM_FINALIZER]);
      }
      claims.check();
      const count = (type: string, name: string) => claims.of(name).filter((e) => e.type === type).length;
      const twice = want.filter((n) => count('ADDED', n) !== 1);
      const deleted = want.filter((n) => count('DELETED', n) !== 0);
      claims.stop();
      assert.deepEqual(twice, [], 'every claim was created exactly once');
      assert.deepEqual(deleted, [], 'no claim was deleted');
      const conflicts = sumOf(await b.metrics(), 'persistent_ips_api_requests_total', { verb: 'create', resource: 'ipamclaims', code: '409' });
      t.diagnostic(`${vms.length} VMs, ${found.length} claims, each ADDED once; B's claim creates refused as existing: ${conflicts}`);

      // The webhook kept answering: every launcher pod admitted (B, through the API server), with its reference.
      for (const v of vms) {
        const { pod } = await world.kv.waitForVMIRunning(ns, v.name, { timeoutMs: 30_000 });
        assert.deepEqual(claimReferences(pod), red(v.name), `launcher pod of ${v.name}`);
      }
      // While no replica leads, nobody creates the claims of VMs made meanwhile: their launcher pods are refused as
      // "not yet" (ClaimNotFound, docs/webhook-behaviour.md) and admitted on the stand-in's retry once B made them
      // (just asserted). Any other refusal is a failure.
      const refused = await world.rejectedLauncherPods();
      const notYet = refused.filter((w) => /IPAMClaim \S+\.red does not exist yet/.test(w.message));
      assert.deepEqual(
        refused.filter((w) => !notYet.includes(w)),
        [],
        'the API server refused no launcher pod of virt-controller for any other reason',
      );
      t.diagnostic(
        `virt-controller's launcher pods refused while the claim was not made yet (failover window): for ${new Set(notYet.map((w) => w.vmi)).size} VMIs`,
      );
      const failedDirect = directPods.filter((p) => !p.ok);
      assert.deepEqual(failedDirect, [], 'no launcher pod made directly was refused');
      for (const p of directPods) if (p.ok) assert.deepEqual(claimReferences(p.pod), red('probe'));
      const aroundKill = directPods.filter((p) => Math.abs(p.at - killedAt) < 2_000).length;
      // A answered correctly until it was killed.
      const beforeKill = aAnswers.filter((x) => x.done < killedAt);
      const wrong = beforeKill.filter(
        (x) => !(x.a.allowed === true && x.a.patch) || JSON.stringify(claimReferences(applyPatch(probePod, x.a.patch))) !== JSON.stringify(red('probe')),
      );
      assert.deepEqual(
        wrong.map((x) => x.a),
        [],
        "A's webhook answered every request before the kill with the right patch",
      );
      assert.ok(beforeKill.length >= 10);
      t.diagnostic(
        `webhook: ${directPods.length} launcher pods made directly (${aroundKill} within 2 s of the kill) and ${vms.length} by the stand-in, all admitted by B with references; ` +
          `A answered ${beforeKill.length} direct admissions correctly until the kill`,
      );
    },
    { timeoutMs: 5 * 60_000 },
  );
});

summaryAtEnd(world);
