// Spec §5 row "create VM (running)".
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { assertPodReferences } from '../../kubevirt/flows.ts';
import { isControlledBy } from '../../kubevirt/launcher-fixture.ts';
import { e2eCase, type SuiteEnv } from '../env.ts';
import {
  assertClaim,
  createPersistentNad,
  createNad,
  createVM,
  nadConfig,
  ownerOf,
  waitForClaims,
  watchLog,
  EVENTUALLY_MS,
  nadNamespace,
  RED,
  BLUE,
} from '../fixtures.ts';
import { namespaceEvents, paths, type IPAMClaim } from '../kube.ts';

export function registerCreateVm(env: SuiteEnv): void {
  describe('create VM (running)', () => {
    e2eCase(
      env,
      'create VM (running): one claim per persistent network (owner reference, finalizer, label, network, interface); the launcher pod refers to them',
      async (c) => {
        const ns = await nadNamespace(c, 'create-vm', 'red');
        await createPersistentNad(env, ns, 'nad-blue', { network: 'tenant-blue', topology: 'localnet' });
        // an ordinary network (no allowPersistentIPs): no claim
        await createNad(env, ns, 'nad-plain', nadConfig(ns, 'nad-plain', { network: 'plain', allowPersistentIPs: false }));
        const claims = await watchLog<IPAMClaim>(c, paths.claims(ns));
        const pods = await watchLog(c, paths.pods(ns));

        const t0 = Date.now();
        const vm = await createVM(env, ns, 'vm1', [RED, BLUE, { name: 'plain', nadName: 'nad-plain' }]);
        const found = await waitForClaims(env, ns, ['vm1.red', 'vm1.blue']);
        const tClaims = Date.now() - t0;
        const { vmi, pod } = await env.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
        // the VMI and pod are virt-controller's: owner chain VM → VMI → pod
        assert.ok(isControlledBy(vmi.metadata, vm.metadata.uid), 'the VMI is controlled by the VM');
        assert.equal(pod.metadata?.labels?.['kubevirt.io'], 'virt-launcher');

        // read back with kubectl, an independent client
        const out = await env.cp.kubectl(['get', 'ipamclaims', '-n', ns, '-o', 'json']);
        const listed = new Map((JSON.parse(out.stdout) as { items: IPAMClaim[] }).items.map((x) => [x.metadata.name, x]));
        assert.deepEqual([...listed.keys()].sort(), ['vm1.blue', 'vm1.red'], 'exactly the persistent networks have claims');
        const owner = ownerOf(vm, 'VirtualMachine');
        assertClaim(listed.get('vm1.red'), owner, 'red', 'red');
        assertClaim(listed.get('vm1.blue'), owner, 'blue', 'tenant-blue');
        assert.equal(found.get('vm1.red')!.metadata.uid, listed.get('vm1.red')!.metadata.uid);

        // "before or soon after the launcher pod is created": report the order the API server saw
        const podRv = pods.events.find((e) => e.type === 'ADDED' && e.obj.metadata.name === pod.metadata!.name)?.rv;
        const claimRvs = ['vm1.red', 'vm1.blue'].map((n) => claims.of(n).find((e) => e.type === 'ADDED')!.rv);
        c.t.diagnostic(`claims after ${tClaims} ms; claim ADDED rvs ${claimRvs.join(', ')} vs launcher pod ADDED rv ${podRv}`);
        assert.ok(tClaims < EVENTUALLY_MS);

        // the launcher pod (as admitted, through the controller's webhook) points the IPAM plugin at the claims
        assertPodReferences(pod, { red: 'vm1.red', blue: 'vm1.blue', plain: undefined });
        // KubeVirt rewrites the networks annotation of the RUNNING pod from the VMI spec (GenerateFromActivePod, while
        // status.interfaces does not list the interfaces yet), without the references: the webhook's UPDATE rule is what
        // keeps them (e2e/kubevirt/README.md, "Where KubeVirt differed")
        const update = await env.shared.waitForLog(
          'an UPDATE admission of the running launcher pod',
          (l) => l['operation'] === 'UPDATE' && l['pod'] === pod.metadata?.name && l['namespace'] === ns,
          { timeoutMs: 2 * EVENTUALLY_MS },
        );
        c.t.diagnostic(`webhook on virt-controller's rewrite: ${JSON.stringify(update)}`);
        assertPodReferences((await env.api.get<V1Pod>(paths.pods(ns, pod.metadata!.name!)))!, { red: 'vm1.red', blue: 'vm1.blue', plain: undefined });

        const warnings = (await namespaceEvents(env.cp, ns)).filter((e) => e.type === 'Warning');
        c.t.diagnostic(
          `Warning Events in ${ns}: ${warnings.map((e) => `${e.reason} on ${e.involvedObject.kind}/${e.involvedObject.name}: ${e.message}`).join('; ') || 'none'}`,
        );
      },
    );
  });
}
