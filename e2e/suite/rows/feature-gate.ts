// Spec §5 row "feature gate turned off", with the two ways the gate is set (src/cli/main.ts): the KubeVirt CR's
// developerConfiguration.featureGates, read live, and --feature-gates, which wins when it names the gate.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { setGateInCR } from '../../kubevirt/kubevirt.ts';
import type { Vmi } from '../../kubevirt/launcher-fixture.ts';
import type { ControllerProcess } from '../../local/controller-process.ts';
import { e2eCase, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  assertQuiet,
  createRunningVM,
  deletedRv,
  finalizerReleaseRv,
  ownerOf,
  waitForClaimGone,
  waitForClaims,
  waitForDeletedEvents,
  watchLog,
  EVENTUALLY_MS,
  nadNamespace,
  RED,
} from '../fixtures.ts';
import { paths, type IPAMClaim } from '../kube.ts';
import { assertPodReferences } from '../../kubevirt/flows.ts';

const GATE_CHANGED = 'feature gate changed; reconciling every VM';

/** Sets the gate in the KubeVirt CR and waits until `ctl` says it saw the change. */
async function setGate(env: SuiteEnv, on: boolean, ctl: ControllerProcess = env.shared): Promise<void> {
  const from = ctl.logs.length;
  await setGateInCR(env.api, on);
  await ctl.waitForLog(`the gate turned ${on ? 'on' : 'off'}`, (l) => l.msg === GATE_CHANGED && l['enabled'] === on, { from });
}

export function registerFeatureGate(env: SuiteEnv): void {
  describe('feature gate turned off', () => {
    e2eCase(
      env,
      'feature gate turned off, then on in the KubeVirt CR while the controller runs: no claim and no pod mutation for a new VM while off (deleting an existing VM still releases its claims); once on, its claims appear without a restart',
      async (c) => {
        const ns = await nadNamespace(c, 'gate-off', 'red');
        await createRunningVM(env, ns, 'vm1', [RED]);
        await waitForClaims(env, ns, ['vm1.red']);
        const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
        const vmiLog = await watchLog<Vmi>(c, paths.vmis(ns));
        const pid = env.shared.pid;

        await setGate(env, false);
        try {
          const { pod } = await createRunningVM(env, ns, 'vm2', [RED]);
          await assertQuiet(claimLog, 'claims with the gate off');
          assert.deepEqual(
            (await env.api.claims(ns)).map((x) => x.metadata.name),
            ['vm1.red'],
            'no claim for vm2',
          );

          // never strand a finalizer: vm1's claim is released once its VMI is gone, and garbage-collected
          await env.kv.deleteVM(ns, 'vm1');
          await waitForClaimGone(env, ns, 'vm1.red');
          await env.kv.waitForVMGone(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
          await waitForDeletedEvents(claimLog, ['vm1.red'], EVENTUALLY_MS); // the GET saw it first (ordering.ts)
          const released = finalizerReleaseRv(claimLog, 'vm1.red');
          const vmiGone = deletedRv(vmiLog, 'vm1');
          assert.ok(released && vmiGone && released > vmiGone, `finalizer released (rv ${released}) after the VMI was gone (rv ${vmiGone})`);

          // no pod mutation either: vm2's launcher pod went through the webhook unchanged
          assertPodReferences(pod, { red: undefined });
        } finally {
          await setGate(env, true);
        }
        // positive control: vm2 lacked a claim only because of the gate, and gets it without a restart
        const claims = await waitForClaims(env, ns, ['vm2.red']);
        assertClaim(claims.get('vm2.red'), ownerOf((await env.kv.getVM(ns, 'vm2'))!, 'VirtualMachine'), 'red', 'red');
        assert.equal(env.shared.pid, pid, 'the same controller process throughout');
        assert.ok(env.shared.alive, 'no controller restart');
      },
    );

    e2eCase(
      env,
      'feature gate turned off by --feature-gates=PersistentIPs=false although the KubeVirt CR enables it (and =true wins over a CR without it)',
      async (c) => {
        const ns = await nadNamespace(c, 'gate-flag', 'red');
        const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
        await env.withoutSharedController(async () => {
          // the CR says on (the suite's default); the flag says off
          const off = await env.startController({ name: 'gate-flag-false', namespace: ns, featureGates: 'PersistentIPs=false' });
          const synced = await off.waitForLog('caches synced', (l) => l.msg === 'caches synced');
          assert.deepEqual(synced['gate'], { enabled: false, source: 'flag' });
          const { vm } = await createRunningVM(env, ns, 'vm1', [RED]);
          await assertQuiet(claimLog, 'claims with --feature-gates=PersistentIPs=false');
          assert.deepEqual(await env.api.claims(ns), []);
          await off.stop();

          // the CR says off; the flag says on
          await setGateInCR(env.api, false);
          try {
            const on = await env.startController({ name: 'gate-flag-true', namespace: ns, featureGates: 'PersistentIPs=true' });
            const synced2 = await on.waitForLog('caches synced', (l) => l.msg === 'caches synced');
            assert.deepEqual(synced2['gate'], { enabled: true, source: 'flag' });
            const claims = await waitForClaims(env, ns, ['vm1.red']);
            assertClaim(claims.get('vm1.red'), ownerOf(vm, 'VirtualMachine'), 'red', 'red');
          } finally {
            await setGateInCR(env.api, true);
          }
        });
      },
    );
  });
}
