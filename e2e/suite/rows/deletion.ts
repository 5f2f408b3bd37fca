// Spec §5 rows "VM deleted (background)", "VM deleted (foreground)", "standalone VMI".
//
// To see what the controller does WHILE a VMI still exists, these cases stop virt-controller (as if it were slow or
// down): the VMI then lingers for as long as the case needs, and the case starts virt-controller again.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { buildVM, type Vm, type Vmi } from '../../kubevirt/launcher-fixture.ts';
import { waitFor } from '../../kubevirt/virtctl.ts';
import { e2eCase, inNamespace, type CaseContext, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  assertQuiet,
  backgroundDeletionViolations,
  createRunningVM,
  deletedRv,
  deletionStartRv,
  finalizerReleaseRv,
  firstRv,
  hasOurFinalizer,
  ownerOf,
  waitForClaimGone,
  waitForClaims,
  waitForDeletedEvents,
  watchLog,
  expectedPodInterface,
  EVENTUALLY_MS,
  nadNamespace,
  RED,
  BLUE,
} from '../fixtures.ts';
import { paths, type IPAMClaim, type WatchLog } from '../kube.ts';
import { assertPodReferences } from '../../kubevirt/flows.ts';

const CLAIMS = ['vm1.red', 'vm1.blue'];

/**
 * VM vm1 running on the persistent networks red and blue, its claims made; its claims, VMI and VM watched from then
 * on. It is deleted with `cascade` while virt-controller is stopped, so that its VMI lingers while `meanwhile` looks;
 * then VM, VMI and claims go, and the watches have delivered their deletions once this returns.
 */
async function deleteWithVmiLingering(
  c: CaseContext,
  cascade: 'background' | 'foreground',
  meanwhile: (ns: string, claimLog: WatchLog<IPAMClaim>) => Promise<void>,
) {
  const env = c.world;
  const ns = await nadNamespace(c, `delete-${cascade}`, 'red', 'blue');
  await createRunningVM(env, ns, 'vm1', [RED, BLUE]);
  await waitForClaims(env, ns, CLAIMS);
  const logs = {
    claimLog: await watchLog<IPAMClaim>(c, paths.claims(ns)),
    vmiLog: await watchLog<Vmi>(c, paths.vmis(ns)),
    vmLog: await watchLog<Vm>(c, paths.vms(ns)),
  };
  const logFrom = env.shared.logs.length;
  await env.stopVirtController();
  try {
    await env.cp.kubectl(['delete', 'virtualmachines.kubevirt.io', 'vm1', '-n', ns, `--cascade=${cascade}`, '--wait=false']);
    await meanwhile(ns, logs.claimLog);
  } finally {
    await env.startVirtController();
  }
  for (const name of CLAIMS) await waitForClaimGone(env, ns, name);
  await env.kv.waitForVMGone(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
  // The GETs above saw the deletions first; judge the order only once the watches have delivered them too.
  await waitForDeletedEvents(logs.vmiLog, ['vm1'], EVENTUALLY_MS);
  await waitForDeletedEvents(logs.vmLog, ['vm1'], EVENTUALLY_MS);
  await waitForDeletedEvents(logs.claimLog, CLAIMS, EVENTUALLY_MS);
  return { ns, logFrom, ...logs };
}

export function registerDeletion(env: SuiteEnv): void {
  describe('VM deleted (background)', () => {
    e2eCase(env, 'VM deleted (background): claims keep the finalizer while the VMI exists, lose it once the VMI is gone, then GC deletes them', async (c) => {
      const { ns, logFrom, claimLog, vmiLog, vmLog } = await deleteWithVmiLingering(c, 'background', async (ns, claimLog) => {
        await env.kv.waitForVM(ns, 'vm1', (vm) => !!vm.metadata.deletionTimestamp, { timeoutMs: EVENTUALLY_MS, what: 'VM vm1 terminating' });
        // The VM waits behind KubeVirt's finalizer, its VMI still runs: the claims must keep their finalizer.
        await assertQuiet(claimLog, 'claims while the VM is terminating and its VMI still exists');
        const held = await env.api.claims(ns);
        assert.deepEqual(held.map((x) => x.metadata.name).sort(), [...CLAIMS].sort());
        for (const claim of held) assert.ok(hasOurFinalizer(claim) && !claim.metadata.deletionTimestamp, `${claim.metadata.name} held`);
        assert.ok(await env.kv.getVMI(ns, 'vm1'), 'the VMI still exists');
      });
      const gone = { vmi: deletedRv(vmiLog, 'vm1'), vm: deletedRv(vmLog, 'vm1') };
      assert.deepEqual(
        CLAIMS.flatMap((name) => backgroundDeletionViolations(claimLog, name, gone)),
        [],
        `claims ${CLAIMS.join(', ')}, VMI gone at rv ${gone.vmi}, VM at rv ${gone.vm}`,
      );
      assert.deepEqual(
        env.shared.logsMatching((l) => inNamespace(ns)(l) && l.msg === 'deleted IPAMClaim of a network the VM no longer has', logFrom),
        [],
        'the controller itself deleted no claim',
      );
    });
  });

  describe('VM deleted (foreground)', () => {
    e2eCase(env, 'VM deleted (foreground): GC marks the claims while the VM waits; the finalizer holds until the VMI is gone; then all go', async (c) => {
      const { claimLog, vmiLog, vmLog } = await deleteWithVmiLingering(c, 'foreground', async (ns, claimLog) => {
        // garbage collection marks the blocking dependents (the claims) for deletion; our finalizer holds them
        const marked = await waitFor(
          'GC to mark both claims for deletion',
          async () => {
            const claims = await env.api.claims(ns);
            return claims.length === CLAIMS.length && claims.every((x) => x.metadata.deletionTimestamp && hasOurFinalizer(x)) ? claims : undefined;
          },
          { timeoutMs: EVENTUALLY_MS, intervalMs: 100 },
        );
        await assertQuiet(claimLog, 'marked claims while the VMI still exists', undefined, marked);
        for (const claim of await env.api.claims(ns)) assert.ok(hasOurFinalizer(claim), `${claim.metadata.name} still holds our finalizer`);
        const vm = await env.kv.getVM(ns, 'vm1');
        assert.ok(vm?.metadata.deletionTimestamp, 'the VM waits (terminating)');
        assert.ok(vm.metadata.finalizers?.includes('foregroundDeletion'), 'the VM waits for its dependents (foregroundDeletion)');
        assert.ok(await env.kv.getVMI(ns, 'vm1'), 'the VMI still exists');
      });
      const vmiGone = deletedRv(vmiLog, 'vm1');
      const vmGone = deletedRv(vmLog, 'vm1');
      assert.ok(vmiGone && vmGone, 'VMI and VM deletions recorded');
      for (const name of CLAIMS) {
        const released = finalizerReleaseRv(claimLog, name);
        assert.ok(released, `${name}: finalizer release recorded`);
        assert.ok(released > vmiGone, `${name}: finalizer released (rv ${released}) only after the VMI was gone (rv ${vmiGone})`);
        const claimGone = deletedRv(claimLog, name)!;
        assert.ok(claimGone < vmGone, `${name}: gone (rv ${claimGone}) before the VM finished deleting (rv ${vmGone})`);
      }
    });
  });

  describe('standalone VMI', () => {
    e2eCase(env, 'standalone VMI: the claim is owned by the VMI and loses its finalizer once the VMI is terminating with no active pod', async (c) => {
      const ns = await nadNamespace(c, 'standalone-vmi', 'red');
      const template = buildVM({ namespace: ns, name: 'vmi1', networks: [RED] }).spec!.template!;
      await env.api.create(paths.vmis(ns), {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name: 'vmi1', namespace: ns, labels: template.metadata?.labels },
        spec: template.spec,
      });
      const { vmi, pod } = await env.kv.waitForVMIRunning(ns, 'vmi1', { timeoutMs: EVENTUALLY_MS });
      const claims = await waitForClaims(env, ns, ['vmi1.red']);
      assertClaim(claims.get('vmi1.red'), ownerOf(vmi, 'VirtualMachineInstance'), 'red', 'red');
      assertPodReferences(pod, { red: 'vmi1.red' });
      const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
      const vmiLog = await watchLog<Vmi>(c, paths.vmis(ns));
      const podLog = await watchLog(c, paths.pods(ns));

      await env.stopVirtController();
      try {
        await env.api.delete(paths.vmis(ns, 'vmi1'));
        const terminating = await env.kv.waitForVMI(ns, 'vmi1', (v) => !!v.metadata.deletionTimestamp, { timeoutMs: EVENTUALLY_MS });
        assert.ok(Object.keys(terminating.status?.activePods ?? {}).length > 0, 'the terminating VMI still has an active pod');
        await assertQuiet(claimLog, 'the claim while its VMI is terminating with an active pod');
        assert.ok(hasOurFinalizer((await env.api.claim(ns, 'vmi1.red'))!), 'finalizer held');
      } finally {
        await env.startVirtController();
      }

      await waitForClaimGone(env, ns, 'vmi1.red');
      await env.kv.waitForVMIGone(ns, 'vmi1', { timeoutMs: EVENTUALLY_MS });
      await waitForDeletedEvents(vmiLog, ['vmi1'], EVENTUALLY_MS);
      await waitForDeletedEvents(claimLog, ['vmi1.red'], EVENTUALLY_MS);
      await waitForDeletedEvents(podLog, [pod.metadata!.name!], EVENTUALLY_MS);
      const podless = firstRv(
        vmiLog,
        'vmi1',
        (e) => e.type === 'DELETED' || (!!e.obj.metadata.deletionTimestamp && Object.keys(e.obj.status?.activePods ?? {}).length === 0),
      );
      const released = finalizerReleaseRv(claimLog, 'vmi1.red');
      assert.ok(podless && released, 'both recorded');
      assert.ok(released > podless, `finalizer released (rv ${released}) only once the VMI was terminating with no active pod (rv ${podless})`);
      const podGone = deletedRv(podLog, pod.metadata!.name!)!;
      assert.ok(released > podGone, `finalizer released (rv ${released}) only after the launcher pod was gone (rv ${podGone})`);
      const vmiGone = deletedRv(vmiLog, 'vmi1')!;
      const deleting = deletionStartRv(claimLog, 'vmi1.red')!;
      assert.ok(deleting > vmiGone, `claim deleted (rv ${deleting}) by garbage collection once the VMI was gone (rv ${vmiGone})`);
    });

    e2eCase(
      env,
      'standalone VMI deleted in the foreground while its launcher pod is starting (activePods still empty): the claim keeps its finalizer while the pod exists (issue 26, 6)',
      async (c) => {
        const ns = await nadNamespace(c, 'standalone-starting', 'red');
        const template = buildVM({ namespace: ns, name: 'vmi1', networks: [RED] }).spec!.template!;
        await env.stopVirtController(); // KubeVirt silent: nobody fills activePods, as in the moment after the pod's creation
        try {
          const vmi = await env.api.create<Vmi>(paths.vmis(ns), {
            apiVersion: 'kubevirt.io/v1',
            kind: 'VirtualMachineInstance',
            metadata: { name: 'vmi1', namespace: ns, labels: template.metadata?.labels, finalizers: ['e2e.persistent-ips.test/hold'] },
            spec: template.spec,
          });
          await waitForClaims(env, ns, ['vmi1.red']);
          // the launcher pod virt-controller would be creating: owned by the VMI, KubeVirt's created-by label
          const pod = await env.api.create<{ metadata: { name: string } }>(paths.pods(ns), {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: {
              generateName: 'virt-launcher-vmi1-',
              namespace: ns,
              labels: { 'kubevirt.io': 'virt-launcher', 'kubevirt.io/created-by': vmi.metadata.uid },
              annotations: {
                'kubevirt.io/domain': 'vmi1',
                'k8s.v1.cni.cncf.io/networks': JSON.stringify([{ name: 'nad-red', namespace: ns, interface: expectedPodInterface('red') }]),
              },
              ownerReferences: [
                {
                  apiVersion: 'kubevirt.io/v1',
                  kind: 'VirtualMachineInstance',
                  name: 'vmi1',
                  uid: vmi.metadata.uid,
                  controller: true,
                  blockOwnerDeletion: true,
                },
              ],
            },
            // bound to a node: its deletion is graceful (the kubelet would finish it; none runs here), as for a real
            // launcher pod, which garbage collection's foreground deletion cannot make vanish at once
            spec: { nodeName: 'e2e-node-without-kubelet', containers: [{ name: 'compute', image: 'example.invalid/virt-launcher' }] },
          });
          const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
          await env.api.delete(paths.vmis(ns, 'vmi1'), { propagationPolicy: 'Foreground' });
          await env.kv.waitForVMI(ns, 'vmi1', (v) => !!v.metadata.deletionTimestamp && Object.keys(v.status?.activePods ?? {}).length === 0, {
            timeoutMs: EVENTUALLY_MS,
          });
          // garbage collection marks the claim; our finalizer must hold while the pod is there (no kubelet ends it)
          await waitFor('the claim marked for deletion', async () => ((await env.api.claim(ns, 'vmi1.red'))?.metadata.deletionTimestamp ? true : undefined), {
            timeoutMs: EVENTUALLY_MS,
          });
          await assertQuiet(claimLog, "the marked claim while its VMI's launcher pod exists", undefined, [(await env.api.claim(ns, 'vmi1.red'))!]);
          assert.ok(hasOurFinalizer((await env.api.claim(ns, 'vmi1.red'))!), 'finalizer held while the launcher pod exists');
          // the pod goes (what the kubelet would finish): then, and only then, the claim is released
          await env.cp.kubectl(['delete', 'pod', '-n', ns, pod.metadata.name, '--grace-period=0', '--force', '--wait=false']);
          await waitForClaimGone(env, ns, 'vmi1.red');
          await env.api.mergePatch(paths.vmis(ns, 'vmi1'), { metadata: { finalizers: null } });
        } finally {
          await env.startVirtController();
        }
      },
    );
  });
}
