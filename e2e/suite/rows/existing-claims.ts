// Spec §5 rows about a claim of the wanted name that is not (or not yet) the VM's: "claim with the same name but
// another owner UID", "claim terminating (deletionTimestamp)", "claim created by hand, no owner".
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { e2eCase, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  assertQuiet,
  createRunningVM,
  createVM,
  expectedPodInterface,
  hasOurFinalizer,
  ownerOf,
  waitForClaims,
  waitForEvent,
  waitForResyncs,
  watchLog,
  EVENTUALLY_MS,
  FOREIGN_FINALIZER,
  VM_LABEL,
  nadNamespace,
  RED,
} from '../fixtures.ts';
import { eventsFor, paths, type IPAMClaim, type KubeObject } from '../kube.ts';
import { podElements } from '../../kubevirt/flows.ts';
import { waitFor } from '../../kubevirt/virtctl.ts';

/** How many full resync passes a "still exactly one Event" check waits through. */
const RESYNCS = 3;

/**
 * The VM's launcher pod is refused while the claim of its name is not its own: a LauncherPodRefused Event on the VM
 * with the cause, and no launcher pod of it exists (each creation the stand-in retries is refused).
 */
async function assertRefused(env: SuiteEnv, ns: string, vm: { metadata: { name: string; uid?: string } }, cause: RegExp): Promise<void> {
  const refused = await waitForEvent(env, ns, vm.metadata.uid!, 'LauncherPodRefused');
  assert.match(refused[0]!.message, cause);
  assert.deepEqual(
    (await env.kv.listLauncherPods(ns, vm.metadata.name)).map((p) => p.metadata?.name),
    [],
    'no launcher pod admitted',
  );
}

/** Once the VM's own claim exists, KubeVirt's retry starts the VM, its pod pointed at that claim. */
async function assertRunsOn(env: SuiteEnv, ns: string, name: string, claim: IPAMClaim): Promise<void> {
  const { pod } = await env.kv.waitForVMIRunning(ns, name, { timeoutMs: EVENTUALLY_MS });
  const refs = podElements(pod)
    .map((e) => e['ipam-claim-reference'])
    .filter((r) => r !== undefined);
  assert.deepEqual(refs, [claim.metadata.name]);
  const now = await env.api.claim(ns, claim.metadata.name);
  assert.equal(now?.metadata.uid, claim.metadata.uid, "the claim the pod references is the VM's own");
}

export function registerExistingClaims(env: SuiteEnv): void {
  describe('claim with the same name but another owner UID', () => {
    e2eCase(
      env,
      'claim with the same name but another owner UID: never touched, one ClaimOwnedByAnotherObject Event (also after several resyncs), log and metric; the right claim once GC removed it',
      async (c) => {
        const ns = await nadNamespace(c, 'other-owner', 'red');
        // The other owner is a live object, so garbage collection keeps the claim for as long as the case needs it; the
        // claim otherwise looks like ours (name, label, spec).
        const owner = await env.api.create<KubeObject>(paths.configMaps(ns), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'previous-owner' } });
        const foreign = await env.api.create<IPAMClaim>(paths.claims(ns), {
          apiVersion: 'k8s.cni.cncf.io/v1alpha1',
          kind: 'IPAMClaim',
          metadata: {
            name: 'vm1.red',
            labels: { [VM_LABEL]: 'vm1' },
            ownerReferences: [
              { apiVersion: 'v1', kind: 'ConfigMap', name: 'previous-owner', uid: owner.metadata.uid!, controller: true, blockOwnerDeletion: true },
            ],
          },
          spec: { network: 'red', interface: expectedPodInterface('red') },
        });
        const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
        const ctl = env.shared;
        const logFrom = ctl.logs.length;
        const blockedBefore = await ctl.metric('persistent_ips_persistence_blocked_total', { reason: 'ClaimOwnedByAnotherObject' });

        // The VM does not start on a claim that is not its own: its launcher pod is refused (docs/webhook-behaviour.md).
        const vm = await createVM(env, ns, 'vm1', [RED]);
        const first = await waitForEvent(env, ns, vm.metadata.uid!, 'ClaimOwnedByAnotherObject');
        await assertRefused(env, ns, vm, /\(ClaimOwnedByAnotherObject\): IPAMClaim vm1\.red belongs to ConfigMap previous-owner/);
        assert.equal(first[0]!.type, 'Warning');
        assert.match(first[0]!.message, /vm1\.red/);
        await waitForResyncs(ctl, RESYNCS, ctl.logs.length);
        claimLog.check();
        assert.deepEqual(claimLog.events, [], 'the claim was never written');
        const now = await env.api.claim(ns, 'vm1.red');
        assert.equal(now?.metadata.uid, foreign.metadata.uid);
        assert.equal(now?.metadata.resourceVersion, foreign.metadata.resourceVersion, 'resourceVersion unchanged');
        const events = await eventsFor(env.cp, ns, vm.metadata.uid!, 'ClaimOwnedByAnotherObject');
        assert.equal(events.length, 1, `exactly one Event after ${RESYNCS} resyncs (got ${events.length})`);
        assert.equal(events[0]!.count ?? 1, 1);
        assert.ok(
          ctl.logsMatching((l) => l['namespace'] === ns && l['reason'] === 'ClaimOwnedByAnotherObject' && l.level === 'warn', logFrom).length >= 1,
          'a warning in the controller log',
        );
        assert.ok(
          (await ctl.metric('persistent_ips_persistence_blocked_total', { reason: 'ClaimOwnedByAnotherObject' })) > blockedBefore,
          'persistent_ips_persistence_blocked_total{reason="ClaimOwnedByAnotherObject"} went up',
        );

        // its owner goes, garbage collection removes the claim, and the VM's own claim is created
        await env.api.delete(paths.configMaps(ns, 'previous-owner'));
        const replaced = await waitFor(
          "the foreign claim to be replaced by the VM's own",
          async () => {
            const claim = await env.api.claim(ns, 'vm1.red');
            return claim && claim.metadata.uid !== foreign.metadata.uid && !claim.metadata.deletionTimestamp ? claim : undefined;
          },
          { timeoutMs: EVENTUALLY_MS, intervalMs: 100 },
        );
        const claims = new Map([['vm1.red', replaced]]);
        assertClaim(claims.get('vm1.red'), ownerOf(vm, 'VirtualMachine'), 'red', 'red');
        await assertRunsOn(env, ns, 'vm1', replaced);
      },
    );
  });

  describe('claim terminating (deletionTimestamp)', () => {
    e2eCase(
      env,
      'claim terminating (deletionTimestamp): a new VM of the same name waits (ClaimTerminating) until the foreign finalizer goes, then gets its claim',
      async (c) => {
        const ns = await nadNamespace(c, 'claim-terminating', 'red');
        // an earlier VM vm1 whose claim someone else also holds with a finalizer
        const { vm: earlier } = await createRunningVM(env, ns, 'vm1', [RED]);
        await waitForClaims(env, ns, ['vm1.red']);
        await env.api.jsonPatch(paths.claims(ns, 'vm1.red'), [{ op: 'add', path: '/metadata/finalizers/-', value: FOREIGN_FINALIZER }]);
        await env.kv.deleteVM(ns, 'vm1');
        await env.kv.waitForVMGone(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
        const terminating = await waitFor(
          'the old claim: deleted by garbage collection, our finalizer released, the foreign one left',
          async () => {
            const claim = await env.api.claim(ns, 'vm1.red');
            return claim?.metadata.deletionTimestamp && !hasOurFinalizer(claim) ? claim : undefined;
          },
          { timeoutMs: EVENTUALLY_MS, intervalMs: 100 },
        );
        assert.deepEqual(terminating.metadata.finalizers, [FOREIGN_FINALIZER]);
        assert.equal(terminating.metadata.ownerReferences?.[0]?.uid, earlier.metadata.uid);

        const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
        const vm = await createVM(env, ns, 'vm1', [RED]);
        assert.notEqual(vm.metadata.uid, earlier.metadata.uid);
        const events = await waitForEvent(env, ns, vm.metadata.uid!, 'ClaimTerminating');
        // Its launcher pod is never pointed at the earlier VM's claim (that would be the earlier VM's address).
        await assertRefused(env, ns, vm, /\(ClaimOwnedByAnotherObject\): IPAMClaim vm1\.red belongs to VirtualMachine vm1/);
        assert.match(events[0]!.message, /vm1\.red/);
        await assertQuiet(claimLog, 'the terminating claim while the new VM waits');
        const still = await env.api.claim(ns, 'vm1.red');
        assert.equal(still?.metadata.uid, terminating.metadata.uid, 'still the old claim');
        assert.equal(still?.metadata.resourceVersion, terminating.metadata.resourceVersion, 'not written');

        await env.api.jsonPatch(paths.claims(ns, 'vm1.red'), [
          { op: 'test', path: '/metadata/finalizers', value: [FOREIGN_FINALIZER] },
          { op: 'remove', path: '/metadata/finalizers' },
        ]);
        const claims = await waitForClaims(env, ns, ['vm1.red']);
        assert.notEqual(claims.get('vm1.red')!.metadata.uid, terminating.metadata.uid, 'a new claim');
        assertClaim(claims.get('vm1.red'), ownerOf(vm, 'VirtualMachine'), 'red', 'red');
        await assertRunsOn(env, ns, 'vm1', claims.get('vm1.red')!);
      },
    );
  });

  describe('claim created by hand, no owner', () => {
    e2eCase(env, 'claim created by hand, no owner: never adopted or deleted (not even when the VM goes); one ClaimNotOwned Event', async (c) => {
      const ns = await nadNamespace(c, 'claim-by-hand', 'red');
      const byHand = await env.api.create<IPAMClaim>(paths.claims(ns), {
        apiVersion: 'k8s.cni.cncf.io/v1alpha1',
        kind: 'IPAMClaim',
        metadata: { name: 'vm1.red', labels: { [VM_LABEL]: 'vm1' } },
        spec: { network: 'red', interface: expectedPodInterface('red') },
      });
      const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
      const ctl = env.shared;

      const vm = await createVM(env, ns, 'vm1', [RED]);
      const first = await waitForEvent(env, ns, vm.metadata.uid!, 'ClaimNotOwned');
      await assertRefused(env, ns, vm, /\(ClaimNotOwned\): IPAMClaim vm1\.red has no owner/);
      assert.equal(first[0]!.type, 'Warning');
      await waitForResyncs(ctl, RESYNCS, ctl.logs.length);
      assert.equal((await eventsFor(env.cp, ns, vm.metadata.uid!, 'ClaimNotOwned')).length, 1, 'exactly one Event');
      claimLog.check();
      assert.deepEqual(claimLog.events, [], 'never written (not adopted)');

      await env.kv.deleteVM(ns, 'vm1');
      await env.kv.waitForVMGone(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      await assertQuiet(claimLog, 'the hand-made claim after the VM is gone');
      const still = await env.api.claim(ns, 'vm1.red');
      assert.equal(still?.metadata.uid, byHand.metadata.uid, 'not deleted');
      assert.equal(still?.metadata.resourceVersion, byHand.metadata.resourceVersion, 'not written');
      assert.equal(still?.metadata.ownerReferences, undefined, 'not adopted');
    });
  });
}
