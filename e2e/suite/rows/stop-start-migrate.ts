// Spec §5 rows "VM stopped" and "VM started again" (one flow), "live migration".
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { e2eCase, type CaseContext, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  assertQuiet,
  createRunningVM,
  ownerOf,
  waitForClaims,
  watchLog,
  writeClaimIps,
  EVENTUALLY_MS,
  nadNamespace,
  RED,
  BLUE,
} from '../fixtures.ts';
import { paths, type IPAMClaim } from '../kube.ts';
import { assertPodReferences } from '../../kubevirt/flows.ts';

const IPS = { 'vm1.red': ['10.200.0.17/24', 'fd00:200::17/64'], 'vm1.blue': ['10.201.0.5/24'] } as const;

/** A running VM on two persistent networks whose claims carry addresses (as the IPAM plugin would write them). */
async function runningVmWithAddresses(c: CaseContext, slug: string) {
  const env = c.world;
  const ns = await nadNamespace(c, slug, 'red', 'blue');
  const { vm, vmi } = await createRunningVM(env, ns, 'vm1', [RED, BLUE]);
  await waitForClaims(env, ns, ['vm1.red', 'vm1.blue']);
  for (const [name, ips] of Object.entries(IPS)) await writeClaimIps(env, ns, name, [...ips]);
  const claims = new Map((await env.api.claims(ns)).map((x) => [x.metadata.name, x]));
  for (const [name, ips] of Object.entries(IPS)) assert.deepEqual(claims.get(name)?.status?.ips, [...ips]);
  return { ns, vm, vmi, claims };
}

/** The claims are exactly `before`: same objects (uid), never written (resourceVersion), same addresses. */
function assertUnchanged(before: Map<string, IPAMClaim>, after: IPAMClaim[], what: string): void {
  assert.deepEqual(after.map((x) => x.metadata.name).sort(), [...before.keys()].sort(), `${what}: same claim names`);
  for (const claim of after) {
    const was = before.get(claim.metadata.name)!;
    assert.equal(claim.metadata.uid, was.metadata.uid, `${what}: ${claim.metadata.name} is the same object`);
    assert.equal(claim.metadata.resourceVersion, was.metadata.resourceVersion, `${what}: ${claim.metadata.name} was not written`);
    assert.deepEqual(claim.status?.ips, was.status?.ips, `${what}: ${claim.metadata.name} keeps its addresses`);
    assert.deepEqual(claim.metadata.finalizers, was.metadata.finalizers, `${what}: ${claim.metadata.name} keeps its finalizer`);
  }
}

export function registerStopStartMigrate(env: SuiteEnv): void {
  describe('VM stopped, then started again', () => {
    e2eCase(
      env,
      'VM stopped, then started again: VMI and launcher pod go; claims, their finalizers and status.ips stay; started again, the same claim objects are reused (no write, same addresses) and the new launcher pod refers to them',
      async (c) => {
        const { ns, vm, vmi: first, claims } = await runningVmWithAddresses(c, 'vm-stop-start');
        const log = await watchLog<IPAMClaim>(c, paths.claims(ns));
        const pods = await env.kv.listLauncherPods(ns, 'vm1');
        assert.equal(pods.length, 1);

        await env.kv.stopVM(ns, 'vm1', { timeoutMs: EVENTUALLY_MS }); // waits until the VMI is gone
        await env.kv.waitForPodGone(ns, pods[0]!.metadata!.name!, { timeoutMs: EVENTUALLY_MS });
        // the controller has seen the VMI go (its watch) well within the window; nothing may happen to the claims
        await assertQuiet(log, `claims of stopped VM ${ns}/vm1`);
        const after = await env.api.claims(ns);
        assertUnchanged(claims, after, 'after stop');
        const owner = ownerOf(vm, 'VirtualMachine');
        for (const network of ['red', 'blue'])
          assertClaim(
            after.find((x) => x.metadata.name === `vm1.${network}`),
            owner,
            network,
            network,
          );
        assert.equal(await env.kv.getVMI(ns, 'vm1'), undefined, 'no VMI');

        const started = await watchLog<IPAMClaim>(c, paths.claims(ns));
        const vmi = await env.kv.startVM(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
        assert.ok(vmi?.metadata.uid, 'a VMI runs');
        assert.notEqual(vmi.metadata.uid, first.metadata.uid, 'a new VMI');
        const { pod } = await env.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
        await assertQuiet(started, `claims of restarted VM ${ns}/vm1`);
        assertUnchanged(claims, await env.api.claims(ns), 'after start');
        assert.deepEqual(started.events, [], 'no claim event at all since the VM was stopped');
        assertPodReferences(pod, { red: 'vm1.red', blue: 'vm1.blue' });
      },
    );
  });

  describe('live migration', () => {
    e2eCase(env, 'live migration: the target launcher pod refers to the same claims; the claims are not touched', async (c) => {
      const { ns, claims } = await runningVmWithAddresses(c, 'migration');
      const log = await watchLog<IPAMClaim>(c, paths.claims(ns));
      const source = await env.kv.currentLauncherPod(ns, 'vm1');
      assert.ok(source);

      const result = await env.kv.migrate(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      assert.ok(result.targetPod, 'the migration has a target pod');
      assert.notEqual(result.targetPod, source.metadata!.name, 'the target is a new pod');
      assert.equal(result.sourcePod, source.metadata!.name);
      const { pod } = await env.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
      assert.equal(pod.metadata!.name, result.targetPod, 'the VMI runs in the target pod');
      // KubeVirt keeps the source pod, completed, until the VMI goes (e2e/kubevirt/README.md, difference 4)
      const completed = await env.kv.waitForPodCompleted(ns, source.metadata!.name!, { timeoutMs: EVENTUALLY_MS });
      assert.equal(completed.status?.phase, 'Succeeded', 'the source launcher pod stays, completed');
      assert.deepEqual(
        Object.keys((await env.kv.getVMI(ns, 'vm1'))?.status?.activePods ?? {}).sort(),
        [source.metadata!.uid!, pod.metadata!.uid!].sort(),
        'activePods lists both pods',
      );

      await assertQuiet(log, `claims of migrated VM ${ns}/vm1`);
      assertUnchanged(claims, await env.api.claims(ns), 'after migration');
      assert.deepEqual(log.events, [], 'no claim event at all during the migration');

      assertPodReferences(source, { red: 'vm1.red', blue: 'vm1.blue' });
      assertPodReferences(pod, { red: 'vm1.red', blue: 'vm1.blue' });
    });
  });
}
