// Spec §5 rows "NAD edited to drop allowPersistentIPs" and "NAD missing / invalid JSON / empty config", and the
// NADs spec §4 says must be reported rather than half-handled: persistent in another namespace, layer3 topology.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { e2eCase, type CaseContext, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  assertQuiet,
  createNad,
  createPersistentNad,
  createRunningVM,
  nadConfig,
  ownerOf,
  setNadConfig,
  waitForClaims,
  waitForEvent,
  watchLog,
  writeClaimIps,
  EVENTUALLY_MS,
  nadNamespace,
  RED,
} from '../fixtures.ts';
import { paths, type IPAMClaim } from '../kube.ts';

/** The controller survived: same process, alive, /healthz 200. */
async function assertControllerHealthy(env: SuiteEnv, pid: number): Promise<void> {
  const ctl = env.shared;
  assert.equal(ctl.pid, pid, 'the same controller process');
  assert.ok(ctl.alive, 'the controller process is alive');
  assert.equal(await ctl.probe('healthz'), 200, '/healthz answers 200');
}

/**
 * A VM on a NAD that is broken in some way: an Event with `reason` on the VM, no claim, the controller alive; then
 * `repair` fixes the NAD and the claim appears.
 */
async function brokenNadCase(
  c: CaseContext,
  slug: string,
  reason: string,
  message: RegExp,
  breakIt: (ns: string) => Promise<void>,
  repair: (ns: string) => Promise<void>,
) {
  const env = c.world;
  const ns = await c.namespace(slug);
  const pid = env.shared.pid;
  await breakIt(ns);
  const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
  const { vm } = await createRunningVM(env, ns, 'vm1', [RED]);
  const events = await waitForEvent(env, ns, vm.metadata.uid!, reason);
  assert.equal(events[0]!.type, 'Warning');
  assert.equal(events[0]!.involvedObject.kind, 'VirtualMachine');
  assert.match(events[0]!.message, message);
  await assertQuiet(claimLog, 'claims while the NAD is unusable');
  assert.deepEqual(await env.api.claims(ns), [], 'no claim');
  await assertControllerHealthy(env, pid);

  await repair(ns);
  const claims = await waitForClaims(env, ns, ['vm1.red']);
  assertClaim(claims.get('vm1.red'), ownerOf(vm, 'VirtualMachine'), 'red', 'red');
  await assertControllerHealthy(env, pid);
}

export function registerNads(env: SuiteEnv): void {
  describe('NAD edited to drop allowPersistentIPs', () => {
    e2eCase(
      env,
      'NAD edited to drop allowPersistentIPs: no claim for a new VM; the existing claim is kept, also across a stop/start (KEEP-NOT-PERSISTENT)',
      async (c) => {
        const ns = await nadNamespace(c, 'nad-not-persistent', 'red');
        await createRunningVM(env, ns, 'vm1', [RED]);
        await waitForClaims(env, ns, ['vm1.red']);
        const kept = await writeClaimIps(env, ns, 'vm1.red', ['10.200.0.9/24']);
        const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));

        await setNadConfig(env, ns, 'nad-red', nadConfig(ns, 'nad-red', { network: 'red', allowPersistentIPs: false }));
        await createRunningVM(env, ns, 'vm2', [RED]);
        await env.kv.stopVM(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
        await env.kv.startVM(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
        await assertQuiet(claimLog, 'claims after the NAD stopped allowing persistent IPs');
        const claims = await env.api.claims(ns);
        assert.deepEqual(
          claims.map((x) => x.metadata.name),
          ['vm1.red'],
          'no claim for vm2',
        );
        assert.equal(claims[0]!.metadata.resourceVersion, kept.metadata.resourceVersion, 'vm1.red kept, not written');
        assert.deepEqual(claims[0]!.status?.ips, ['10.200.0.9/24']);

        // positive control: allowing it again gives vm2 its claim
        await setNadConfig(env, ns, 'nad-red', nadConfig(ns, 'nad-red', { network: 'red' }));
        const after = await waitForClaims(env, ns, ['vm1.red', 'vm2.red']);
        assertClaim(after.get('vm2.red'), ownerOf((await env.kv.getVM(ns, 'vm2'))!, 'VirtualMachine'), 'red', 'red');
      },
    );
  });

  describe('NAD missing / invalid JSON / empty config', () => {
    e2eCase(env, 'NAD missing: no crash, no claim, NetworkAttachmentDefinitionNotFound on the VM; the claim appears once the NAD is created', (c) =>
      brokenNadCase(
        c,
        'nad-missing',
        'NetworkAttachmentDefinitionNotFound',
        /nad-red/,
        async () => undefined,
        async (ns) => void (await createPersistentNad(env, ns, 'nad-red', { network: 'red' })),
      ),
    );
    e2eCase(env, 'NAD with invalid JSON: no crash, no claim, InvalidNetworkConfig on the VM; the claim appears once the config is fixed', (c) =>
      brokenNadCase(
        c,
        'nad-invalid-json',
        'InvalidNetworkConfig',
        /JSON/,
        async (ns) => void (await createNad(env, ns, 'nad-red', '{"cniVersion": "0.4.0", "name": "red", "allowPersistentIPs": tru')),
        (ns) => setNadConfig(env, ns, 'nad-red', nadConfig(ns, 'nad-red', { network: 'red' })),
      ),
    );
    e2eCase(env, 'NAD with an empty config: no crash, no claim, InvalidNetworkConfig on the VM; the claim appears once the config is filled in', (c) =>
      brokenNadCase(
        c,
        'nad-empty-config',
        'InvalidNetworkConfig',
        /empty/,
        async (ns) => void (await createNad(env, ns, 'nad-red', '')),
        (ns) => setNadConfig(env, ns, 'nad-red', nadConfig(ns, 'nad-red', { network: 'red' })),
      ),
    );
  });

  describe('NADs that cannot be persistent (spec §4)', () => {
    e2eCase(env, 'persistent NAD in another namespace: CrossNamespacePersistentNetwork on the VM, no claim in either namespace', async (c) => {
      const ns = await c.namespace('cross-ns');
      const other = await c.namespace('cross-ns-nads');
      await createPersistentNad(env, other, 'shared-red', { network: 'red' });
      const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
      const otherLog = await watchLog<IPAMClaim>(c, paths.claims(other));
      const { vm } = await createRunningVM(env, ns, 'vm1', [{ name: 'red', nadName: `${other}/shared-red` }]);
      const events = await waitForEvent(env, ns, vm.metadata.uid!, 'CrossNamespacePersistentNetwork');
      assert.match(events[0]!.message, new RegExp(`${other}/shared-red`));
      await assertQuiet(claimLog, 'claims in the VM namespace');
      assert.deepEqual(otherLog.events, [], 'no claim in the NAD namespace either');
      assert.deepEqual(await env.api.claims(ns), []);
      assert.deepEqual(await env.api.claims(other), []);
    });

    e2eCase(env, 'persistent NAD with layer3 topology: UnsupportedTopology on the VM, no claim', async (c) => {
      const ns = await c.namespace('layer3');
      await createPersistentNad(env, ns, 'nad-red', { network: 'red', topology: 'layer3', subnets: '10.128.0.0/16/24' });
      const claimLog = await watchLog<IPAMClaim>(c, paths.claims(ns));
      const { vm } = await createRunningVM(env, ns, 'vm1', [RED]);
      const events = await waitForEvent(env, ns, vm.metadata.uid!, 'UnsupportedTopology');
      assert.match(events[0]!.message, /layer3/);
      await assertQuiet(claimLog, 'claims of a layer3 network');
      assert.deepEqual(await env.api.claims(ns), []);
    });
  });
}
