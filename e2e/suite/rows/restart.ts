// Spec §5 row "controller restarted at any moment": the controller is SIGKILLed in the middle of a burst of claim
// creations, and again in the middle of finalizer releases, and restarted each time; and its webhook is asked about
// a launcher pod the first moment it answers after a restart.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { poll } from '../../harness/index.ts';
import { admitDirectly, applyPatch } from '../../local/admission.ts';
import { localWebhookConfiguration } from '../../local/webhook-config.ts';
import { renderLauncherPod, type Vm, type Vmi } from '../../kubevirt/launcher-fixture.ts';
import { waitFor } from '../../kubevirt/virtctl.ts';
import { e2eCase, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  createVM,
  deletedRv,
  finalizerReleaseRv,
  hasOurFinalizer,
  ownerOf,
  watchLog,
  EVENTUALLY_MS,
  nadNamespace,
  RED,
  BLUE,
} from '../fixtures.ts';
import { paths, type IPAMClaim, type WatchLog } from '../kube.ts';
import { assertPodReferences } from '../../kubevirt/flows.ts';

const VMS = 30;
const NETWORKS = ['red', 'blue'] as const;
/** VMs deleted in the second phase. */
const DELETED = 10;
/** "The first few claims": the controller is killed as soon as this many exist. */
const KILL_AFTER_CLAIMS = 4;
const CONVERGE_MS = 90_000;

const vmName = (i: number) => `vm-${String(i).padStart(2, '0')}`;
/** The claims of VMs `vms`, one per network, sorted. */
const claimsOf = (vms: string[]) => vms.flatMap((n) => NETWORKS.map((net) => `${n}.${net}`)).sort();

async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

/** Polls (every 5 ms: the point is to stop the controller early) until `pred` holds for the recorded events. */
async function whenLog<T extends IPAMClaim>(log: WatchLog<T>, what: string, pred: () => boolean, timeoutMs = 60_000): Promise<void> {
  // A broken watch fails at once (check throws), not at the deadline.
  await poll(what, timeoutMs, async () => pred() || undefined, { intervalMs: 5, abort: () => void log.check() });
}

/** How long the start-up case keeps asking the restarted webhook before giving up. */
const ADMISSION_DEADLINE_MS = 30_000;

/** The caBundle the controller keeps in the suite's MutatingWebhookConfiguration. */
async function webhookCaBundle(env: SuiteEnv): Promise<Buffer> {
  const name = localWebhookConfiguration(0).metadata.name;
  const cfg = await env.api.get<{ webhooks: { clientConfig: { caBundle?: string } }[] }>(paths.webhookConfigurations(name));
  const b64 = cfg?.webhooks[0]?.clientConfig.caBundle;
  if (!b64) throw new Error(`MutatingWebhookConfiguration ${name} has no caBundle`);
  return Buffer.from(b64, 'base64');
}

export function registerRestart(env: SuiteEnv): void {
  describe('controller restarted at any moment', () => {
    e2eCase(
      env,
      'controller restarted at any moment: the webhook never admits a launcher pod without its claim reference, not even in the first moments after a restart',
      async (c) => {
        const ns = await nadNamespace(c, 'restart-webhook', 'red');
        await env.withoutSharedController(async () => {
          const first = await env.startController({ name: 'webhook-startup-1', namespace: ns });
          await createVM(env, ns, 'vm1', [RED]);
          const { vmi, pod } = await env.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
          assertPodReferences(pod, { red: 'vm1.red' });
          await first.stop();

          // The launcher pod virt-controller would create now (e.g. retrying one it could not create while the
          // webhook was down: failurePolicy Fail), sent to the restarted controller's webhook the first moment it
          // answers. The suite sends the AdmissionReview itself, as the API server does: the API server retries a
          // webhook call that could not connect with a backoff (0.5 s and up), so its first call after a restart lands
          // at a random moment, and the window this case is about lasts tens of milliseconds. `--qps 1 --burst 1` (a
          // heavily throttled client, as on a busy API server) stretches the start-up to seconds, so that the first
          // answer comes while the controller is still listing, every time.
          const launcher = renderLauncherPod(vmi, { name: 'virt-launcher-vm1-next' });
          const caBundle = await webhookCaBundle(env);
          const second = await env.spawnController({ name: 'webhook-startup-2', namespace: ns, extraArgs: ['--qps', '1', '--burst', '1'] });
          let attempts = 0;
          const answer = await poll(
            "the restarted webhook's first answer",
            ADMISSION_DEADLINE_MS,
            async () => {
              attempts++;
              const a = await admitDirectly(env.webhookPort, caBundle, launcher);
              return a.status === 200 && a.allowed !== undefined ? a : undefined;
            },
            { intervalMs: 2 },
          );
          const answeredAt = new Date().toISOString();
          await second.waitReady(ADMISSION_DEADLINE_MS);
          const synced = (await second.waitForLog('caches synced', (l) => l.msg === 'caches synced')).time;
          const gateKnown = second.logs.find((l) => l.msg === 'feature gate changed; reconciling every VM')?.time;
          c.t.diagnostic(
            `first answer at ${answeredAt} after ${attempts} attempts: ${JSON.stringify(answer)}; ` +
              `controller log: gate known at ${gateKnown}, caches synced at ${synced}`,
          );
          const outcomes = (await second.metrics())
            .filter((m) => m.name === 'persistent_ips_webhook_admissions_total' && m.value > 0)
            .map((m) => `${JSON.stringify(m.labels)} ${m.value}`);
          c.t.diagnostic(`webhook outcomes of that process: ${outcomes.join('; ')}`);
          // control: once ready, the same request gets the reference
          const control = await admitDirectly(env.webhookPort, caBundle, launcher);
          assert.equal(control.allowed, true, `once ready, the webhook admits the pod: ${JSON.stringify(control)}`);
          assertPodReferences(applyPatch(launcher, control.patch), { red: 'vm1.red' });

          // the first answer: a refusal (virt-controller retries) is fine; admitting the pod unchanged is not
          if (answer.allowed) assertPodReferences(applyPatch(launcher, answer.patch), { red: 'vm1.red' });
        });
      },
    );

    e2eCase(
      env,
      `controller restarted at any moment: SIGKILLed while creating the claims of ${VMS} VMs × ${NETWORKS.length} networks, and while releasing finalizers; converges with no duplicate, lost or stray claim and no early finalizer release`,
      async (c) => {
        const ns = await nadNamespace(c, 'restart', 'red', 'blue');
        const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
        const vmiLog = await watchLog<Vmi>(c, paths.vmis(ns));
        const names = Array.from({ length: VMS }, (_, i) => vmName(i));
        const added = () => claimLog.events.filter((e) => e.type === 'ADDED').length;

        await env.withoutSharedController(async () => {
          // Phase 1: the VMs exist before the controller starts, so that it starts with a burst of 60 creates.
          const vms = new Map<string, Vm>();
          await inBatches(names, 10, async (n) => vms.set(n, await createVM(env, ns, n, [RED, BLUE])));
          // --qps 20: the 60 creates take a few seconds instead of a few hundred milliseconds, so that the kill lands
          // in the middle of the burst even on a loaded machine (the point is where the kill lands, not the speed)
          const first = await env.startController({ name: 'restart-1', namespace: ns, extraArgs: ['--qps', '20', '--burst', '5'] });
          await whenLog(claimLog, `${KILL_AFTER_CLAIMS} claims`, () => added() >= KILL_AFTER_CLAIMS);
          await first.kill();
          const atKill = (await env.api.claims(ns)).length;
          c.t.diagnostic(`SIGKILLed after ${atKill} of ${VMS * NETWORKS.length} claims`);
          assert.ok(atKill < VMS * NETWORKS.length, `killed in the middle of the burst (${atKill} claims existed)`);

          await env.startController({ name: 'restart-2', namespace: ns });
          const wanted = claimsOf(names);
          await waitFor(
            `all ${wanted.length} claims`,
            async () => (await env.api.claims(ns)).filter((x) => !x.metadata.deletionTimestamp).length === wanted.length,
            { timeoutMs: CONVERGE_MS, intervalMs: 200 },
          );
          const claims = await env.api.claims(ns);
          assert.deepEqual(claims.map((x) => x.metadata.name).sort(), wanted, 'exactly the wanted claims');
          for (const claim of claims) {
            const [vm, net] = claim.metadata.name.split('.') as [string, string];
            assertClaim(claim, ownerOf(vms.get(vm)!, 'VirtualMachine'), net, net);
          }
          // every VM runs (launcher pods waited while no webhook answered: failurePolicy Fail). Their references are
          // not checked here: what the webhook answers right after a start is the case above.
          for (const n of names) await env.kv.waitForVMIRunning(ns, n, { timeoutMs: CONVERGE_MS });

          // Phase 2: delete some VMs; kill the controller as soon as it released the first finalizer.
          const doomed = names.slice(0, DELETED);
          const doomedClaims = claimsOf(doomed);
          const released = () => doomedClaims.filter((n) => finalizerReleaseRv(claimLog, n) !== undefined).length;
          await inBatches(doomed, 10, (n) => env.kv.deleteVM(ns, n));
          await whenLog(claimLog, 'the first finalizer release', () => released() >= 1, CONVERGE_MS);
          const second = env.controllers().find((x) => x.name === 'restart-2')!;
          await second.kill();
          c.t.diagnostic(`SIGKILLed after ${released()} of ${doomedClaims.length} finalizer releases`);
          await env.startController({ name: 'restart-3', namespace: ns });
          await waitFor(
            'the deleted VMs and their claims to be gone',
            async () => {
              const left = new Set((await env.api.claims(ns)).map((x) => x.metadata.name));
              if (doomedClaims.some((n) => left.has(n))) return false;
              for (const n of doomed) if (await env.kv.getVM(ns, n)) return false;
              return true;
            },
            { timeoutMs: CONVERGE_MS, intervalMs: 200 },
          );
          claimLog.check();

          // The end state: exactly the claims of the remaining VMs, each owned by its live VM, with our finalizer.
          const final = await env.api.claims(ns);
          const kept = claimsOf(names.slice(DELETED));
          assert.deepEqual(final.map((x) => x.metadata.name).sort(), kept, 'exactly the claims of the remaining VMs');
          for (const claim of final) {
            const [vm, net] = claim.metadata.name.split('.') as [string, string];
            const live = await env.kv.getVM(ns, vm);
            assert.ok(live && !live.metadata.deletionTimestamp, `${claim.metadata.name}: its VM exists`);
            assertClaim(claim, ownerOf(live, 'VirtualMachine'), net, net);
          }
          assert.ok(final.every(hasOurFinalizer));

          // History: one object per claim name (never recreated, never duplicated), no finalizer released while a
          // VMI of the VM existed, none released at all for the remaining VMs.
          for (const name of wanted) {
            const uids = new Set(
              claimLog
                .of(name)
                .filter((e) => e.type === 'ADDED')
                .map((e) => e.obj.metadata.uid),
            );
            assert.equal(uids.size, 1, `${name}: created exactly once (uids ${[...uids].join(', ')})`);
          }
          for (const n of doomed) {
            const vmiGone = deletedRv(vmiLog, n);
            assert.ok(vmiGone, `VMI ${n} deletion recorded`);
            for (const net of NETWORKS) {
              const rel = finalizerReleaseRv(claimLog, `${n}.${net}`);
              assert.ok(rel && rel > vmiGone, `${n}.${net}: finalizer released (rv ${rel}) after VMI ${n} was gone (rv ${vmiGone})`);
            }
          }
          for (const name of kept) assert.equal(finalizerReleaseRv(claimLog, name), undefined, `${name}: finalizer never released`);
        });
      },
      { timeoutMs: 300_000 },
    );
  });
}
