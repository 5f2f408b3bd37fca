// Spec §5 rows "hotplug an interface" and "hot-unplug (state: absent)", on real KubeVirt (LiveUpdate, no Multus
// dynamic-networks controller): the VM template changes, virt-controller copies it to the VMI, the workload updater
// migrates the VMI to a pod with (or without) the network, and an unplugged interface then leaves the VMI spec.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { MIGRATION_JOB_LABEL, type Vmi } from '../../kubevirt/launcher-fixture.ts';
import { e2eCase, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  createPersistentNad,
  createRunningVM,
  deletionStartRv,
  firstRv,
  ownerOf,
  waitForClaimGone,
  waitForClaims,
  waitForDeletedEvents,
  watchLog,
  EVENTUALLY_MS,
  nadNamespace,
  RED,
  BLUE,
} from '../fixtures.ts';
import { paths, type IPAMClaim } from '../kube.ts';
import { assertPodReferences } from '../../kubevirt/flows.ts';

export function registerHotplug(env: SuiteEnv): void {
  describe('hotplug an interface', () => {
    e2eCase(env, 'hotplug an interface: a claim appears for the new interface; the existing claim is not touched', async (c) => {
      const ns = await nadNamespace(c, 'hotplug', 'red', 'blue');
      const { vm } = await createRunningVM(env, ns, 'vm1', [RED]);
      const red = (await waitForClaims(env, ns, ['vm1.red'])).get('vm1.red')!;

      const vmi = await env.kv.hotplugInterface(ns, 'vm1', { networkName: 'blue', nadName: 'nad-blue' }, { timeoutMs: EVENTUALLY_MS });
      assert.ok(
        vmi?.status?.interfaces?.some((i) => i.name === 'blue'),
        'the VMI reports the hotplugged interface',
      );
      const claims = await waitForClaims(env, ns, ['vm1.red', 'vm1.blue']);
      assertClaim(claims.get('vm1.blue'), ownerOf(vm, 'VirtualMachine'), 'blue', 'blue');
      assert.equal(claims.get('vm1.red')!.metadata.resourceVersion, red.metadata.resourceVersion, 'vm1.red not written');
      assert.equal(claims.size, 2);
      // without Multus's dynamic networks controller, the interface reaches the guest through a migration to a pod
      // that has it, and that pod refers to both claims
      const pod = await env.kv.currentLauncherPod(ns, 'vm1');
      assert.ok(pod?.metadata?.labels?.[MIGRATION_JOB_LABEL], `the VMI runs in a migration target pod: ${pod?.metadata?.name}`);
      assertPodReferences(pod, { red: 'vm1.red', blue: 'vm1.blue' });
    });
  });

  describe('hot-unplug (state: absent)', () => {
    e2eCase(env, 'hot-unplug (state: absent): once the interface is gone from the VMI, its claim is deleted; the other claim stays', async (c) => {
      const ns = await nadNamespace(c, 'hot-unplug', 'red', 'blue');
      await createRunningVM(env, ns, 'vm1', [RED, BLUE]);
      const before = await waitForClaims(env, ns, ['vm1.red', 'vm1.blue']);
      const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
      const vmiLog = await watchLog<Vmi>(c, paths.vmis(ns));
      const logFrom = env.shared.logs.length;

      await env.kv.hotUnplugInterface(ns, 'vm1', 'blue', { timeoutMs: EVENTUALLY_MS }); // waits: gone from VMI and VM
      await waitForClaimGone(env, ns, 'vm1.blue');
      await waitForDeletedEvents(claimLog, ['vm1.blue'], EVENTUALLY_MS); // the GET saw it first (ordering.ts)

      const goneFromVmi = firstRv(vmiLog, 'vm1', (e) => !e.obj.spec?.networks?.some((n) => n.name === 'blue'));
      const deleting = deletionStartRv(claimLog, 'vm1.blue');
      assert.ok(goneFromVmi && deleting, 'both recorded');
      assert.ok(deleting > goneFromVmi, `claim deleted (rv ${deleting}) only once the interface was gone from the VMI (rv ${goneFromVmi})`);
      await env.shared.waitForLog(
        'the deletion of vm1.blue',
        (l) => l['namespace'] === ns && l['claim'] === 'vm1.blue' && l.msg === 'deleted IPAMClaim of a network the VM no longer has',
        { from: logFrom },
      );

      const after = await env.api.claims(ns);
      assert.deepEqual(
        after.map((x) => x.metadata.name),
        ['vm1.red'],
      );
      assert.equal(after[0]!.metadata.resourceVersion, before.get('vm1.red')!.metadata.resourceVersion, 'vm1.red not written');
    });

    describe('hot-unplug of five interfaces, with the default 10-minute resync (issue 26, point 5)', () => {
      e2eCase(
        env,
        "every claim the controller deletes is released at once, whatever order the delete's answer and its watch event come in: none lingers terminating until a resync",
        async (c) => {
          const ns = await c.namespace('unplug-release');
          const nets = ['n1', 'n2', 'n3', 'n4', 'n5'];
          await env.withoutSharedController(async () => {
            // The shared controller's 2 s resync would release a stuck claim by itself: this one resyncs every 600 s.
            const ctl = await env.startController({ name: 'unplug-release', namespace: ns, resyncPeriodS: 600 });
            for (const [i, n] of nets.entries()) await createPersistentNad(env, ns, `nad-${n}`, { network: n, subnets: `10.21${i}.0.0/24` });
            await createRunningVM(env, ns, 'vm1', [{ name: 'keep', nadName: 'nad-n1' }, ...nets.map((n) => ({ name: n, nadName: `nad-${n}` }))]);
            await waitForClaims(env, ns, ['vm1.keep', ...nets.map((n) => `vm1.${n}`)]);
            // On real KubeVirt each unplug is a migration (~30 s here): the five go in one VM edit, and the controller
            // still deletes (and must release) five claims, each its own race of delete answer and watch event.
            const from = ctl.logs.length;
            await env.kv.hotUnplugInterface(ns, 'vm1', nets, { timeoutMs: EVENTUALLY_MS });
            for (const n of nets) {
              // EVENTUALLY_MS (30 s) is far below the resync: only the reconcile that deleted the claim can have released it
              await waitForClaimGone(env, ns, `vm1.${n}`);
              await ctl.waitForLog(
                `the release of vm1.${n} by the reconcile that deleted it`,
                (l) => l['namespace'] === ns && l['claim'] === `vm1.${n}` && l.msg === 'removed finalizer from the IPAMClaim just deleted',
                { from },
              );
            }
            assert.deepEqual(
              (await env.api.claims(ns)).map((x) => x.metadata.name),
              ['vm1.keep'],
            );
          });
        },
      );
    });
  });
}
