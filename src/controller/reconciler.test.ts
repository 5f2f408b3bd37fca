// Issue 26, point 5: a claim the controller deletes (hot-unplug) must be released as soon as it is unused, whatever
// order the API server's answer to the delete and the watch event of that delete arrive in. Both orders are made to
// happen here on purpose: the watch event is delivered (to the cache and the write overlay, as controller.ts does)
// before the delete's answer resolves, or after it. No I/O: the client is a stub that records each write.

import { keyString } from '../kube/key.ts';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CLAIM_FINALIZER, MULTUS_NETWORKS_ANNOTATION } from '../claims/constants.ts';
import { podInterfaceName, swapClaimName } from '../claims/names.ts';
import { claimOf, multus, nadMap, NS, ovnNad, virtualMachine, vmiOf, DELETED_AT } from '../../test/objects.ts';
import type { KubeClient } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { JsonPatchOp } from '../kube/patch.ts';
import type { IPAMClaim, KubeObject, NetworkAttachmentDefinition, Pod, VirtualMachine, VirtualMachineInstance } from '../kube/types.ts';
import { registerIndexes } from '../sources/indexes.ts';
import { Store } from '../sources/store.ts';
import { createLogger } from '../telemetry/logger.ts';
import { EventRecorder } from './events.ts';
import { reconcileOf } from './loop.ts';
import { createReconciler } from './reconciler.ts';
import { WriteOverlay } from './write-overlay.ts';

const log = createLogger('silent');

function world(vm: VirtualMachine, vmi: VirtualMachineInstance, claims: IPAMClaim[], nads: NetworkAttachmentDefinition[]) {
  const vms = new Store<VirtualMachine>();
  const vmis = new Store<VirtualMachineInstance>();
  const nadStore = new Store<NetworkAttachmentDefinition>();
  const claimStore = new Store<IPAMClaim>();
  registerIndexes({ claims: claimStore }, 'shared');
  vms.upsert(vm);
  vmis.upsert(vmi);
  for (const n of nads) nadStore.upsert(n);
  for (const c of claims) claimStore.upsert(c);
  return { vms, vmis, nads: nadStore, claims: claimStore };
}

/** One reconcile of `vm`'s key through a client stub; a verb the case does not give fails the test (list: nothing). */
function reconcileOnce(vm: VirtualMachine, sources: ReturnType<typeof world>, verbs: Record<string, unknown>, overlay = new WriteOverlay()) {
  const refuse = (verb: string) => async () => assert.fail(`no ${verb} expected`);
  const client = {
    get: refuse('get'),
    create: refuse('create'),
    delete: refuse('delete'),
    jsonPatch: refuse('jsonPatch'),
    list: async () => ({ items: [] }),
    ...verbs,
  } as unknown as KubeClient;
  const recorder = new EventRecorder(async () => undefined, log);
  const reconcile = reconcileOf(createReconciler({ sources: sources as never, client, gateEnabled: () => true, recorder, overlay, log }));
  return reconcile(keyString((vm as KubeObject).metadata), { signal: new AbortController().signal, retries: 0 });
}

describe('reconciler: a claim it deletes is released at once, in either order of answer and watch event', () => {
  for (const order of ['watch event first', 'answer first'] as const) {
    it(order, async () => {
      // The VM has unplugged `red` (state absent) and the VMI no longer has it: UNPLUG deletes its claim.
      const before = virtualMachine({ networks: [multus('blue', 'blue'), multus('red', 'red')] });
      const vm = virtualMachine({ networks: [multus('blue', 'blue'), multus('red', 'red', { absent: true })] });
      const vmi = vmiOf(virtualMachine({ networks: [multus('blue', 'blue')] }));
      const red = claimOf(before, 'red');
      const sources = world(vm, vmi, [claimOf(before, 'blue'), red], [ovnNad('blue'), ovnNad('red')]);
      assert.ok(nadMap(ovnNad('blue')).size === 1);
      const overlay = new WriteOverlay();
      const terminating: IPAMClaim = { ...red, metadata: { ...red.metadata, deletionTimestamp: DELETED_AT, resourceVersion: '11' } };
      /** What controller.ts does with a claim event: cache it, and tell the overlay (an echo is not requeued). */
      const deliverWatchEvent = (): boolean => {
        sources.claims.upsert(terminating);
        return overlay.observeUpdated(keyString(terminating.metadata), terminating);
      };
      const patches: { name: string; ops: readonly JsonPatchOp[] }[] = [];
      let echoTaken: boolean | undefined;
      const result = await reconcileOnce(
        vm,
        sources,
        {
          delete: async () => {
            if (order === 'watch event first') echoTaken = deliverWatchEvent();
            return terminating;
          },
          jsonPatch: async (_r: unknown, _ns: string, name: string, ops: readonly JsonPatchOp[]) => {
            patches.push({ name, ops });
            return { ...terminating, metadata: { ...terminating.metadata, finalizers: [], resourceVersion: '12' } };
          },
        },
        overlay,
      );
      if (order === 'answer first') echoTaken = deliverWatchEvent();

      // Released within the reconcile that deleted it: no later event or resync is needed.
      assert.deepEqual(
        patches.map((p) => p.name),
        [red.metadata.name],
      );
      assert.deepEqual(patches[0]!.ops, [
        { op: 'test', path: '/metadata/uid', value: red.metadata.uid },
        { op: 'test', path: '/metadata/finalizers', value: [CLAIM_FINALIZER] },
        { op: 'replace', path: '/metadata/finalizers', value: [] },
      ]);
      assert.equal(result.requeue, false);
      // Whether the late watch event then runs the key again no longer matters (it used to be taken for the delete's
      // echo, and the finalizer stayed until the resync).
      assert.equal(typeof echoTaken, 'boolean');
    });
  }
});

describe('reconciler: a claim left from an earlier NAD (SWAP) lives as long as a launcher pod may use it', () => {
  // The VM's `red` network was moved from nad-a to nad-b while it ran; its new claim exists. The old claim goes only
  // once no launcher pod of the VMI names it: a pod being deleted still runs the guest on the old address through
  // its grace period.
  const vm = virtualMachine({ networks: [multus('red', 'nad-b')] });
  const vmi = vmiOf(vm);
  const old = claimOf(vm, 'red', { network: 'net-nad-a' });
  const swapped = claimOf(vm, 'red', { name: swapClaimName(vm.metadata.name, 'red', 'net-nad-b'), network: 'net-nad-b' });
  const sourcePod = (status: { phase: string; terminating: boolean }): Pod => ({
    metadata: {
      name: 'virt-launcher-vm1-source',
      namespace: NS,
      ...(status.terminating ? { deletionTimestamp: DELETED_AT } : {}),
      ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: vm.metadata.name, uid: vmi.metadata.uid!, controller: true }],
      annotations: {
        [MULTUS_NETWORKS_ANNOTATION]: JSON.stringify([
          { name: 'nad-a', namespace: NS, interface: podInterfaceName('red'), 'ipam-claim-reference': old.metadata.name },
        ]),
      },
    },
    status: { phase: status.phase },
  });
  const cases = [
    { name: 'running', pod: { phase: 'Running', terminating: false }, deleted: [] },
    { name: 'being deleted, guest still shutting down', pod: { phase: 'Running', terminating: true }, deleted: [] },
    { name: 'finished', pod: { phase: 'Succeeded', terminating: true }, deleted: [old.metadata.name] },
  ];
  for (const c of cases) {
    it(`source pod ${c.name}: ${c.deleted.length === 0 ? 'the old claim stays' : 'the old claim is deleted'}`, async () => {
      const sources = world(vm, vmi, [old, swapped], [ovnNad('nad-a'), ovnNad('nad-b')]);
      const deleted: string[] = [];
      const result = await reconcileOnce(vm, sources, {
        delete: async (_r: unknown, _ns: string, name: string) => {
          deleted.push(name);
          return { ...old, metadata: { ...old.metadata, deletionTimestamp: DELETED_AT, resourceVersion: '11' } };
        },
        jsonPatch: async () => ({ ...old, metadata: { ...old.metadata, finalizers: [], resourceVersion: '12' } }),
        list: async () => ({ items: [sourcePod(c.pod)] }),
      });
      assert.deepEqual(deleted, c.deleted);
      // A claim kept for a pod being deleted is looked at again until the pod has finished: no event of ours says when.
      assert.equal(result.requeue, c.name.startsWith('being deleted'));
    });
  }
});

describe('reconciler: a release decided without a cached VMI is checked against the API', () => {
  // The VM is being deleted and the cache shows no VMI: FINALIZER-OWNER-GONE would release the claim. The VMI may
  // only be missing from the cache (started a moment ago, or its watch being re-established) while its pod runs.
  const vm = virtualMachine({ networks: [multus('red', 'red')], deleting: true });
  const vmi = vmiOf(virtualMachine({ networks: [multus('red', 'red')] }));
  const red = { ...claimOf(vm, 'red'), metadata: { ...claimOf(vm, 'red').metadata, deletionTimestamp: DELETED_AT } };
  for (const c of [
    { name: 'the API has the VMI: the finalizer stays', api: vmi, released: [] as string[] },
    { name: 'the API has no VMI either: the finalizer goes', api: undefined, released: [red.metadata.name] },
  ]) {
    it(c.name, async () => {
      const sources = world(vm, vmi, [red], [ovnNad('red')]);
      sources.vmis.delete(vmi);
      const reads: string[] = [];
      const released: string[] = [];
      await reconcileOnce(vm, sources, {
        get: async (_r: unknown, ns: string, name: string) => {
          reads.push(`${ns}/${name}`);
          if (c.api) return structuredClone(c.api);
          throw new KubeApiError({
            reason: 'notFound',
            code: 404,
            object: { kind: 'VirtualMachineInstance', namespace: ns, name },
            verb: 'get',
            message: 'not found',
          });
        },
        jsonPatch: async (_r: unknown, _ns: string, name: string, ops: readonly JsonPatchOp[]) => {
          released.push(name);
          // Guarded by the claim the decision saw: same uid, unchanged since (a claim garbage collection has just
          // stripped of a VM deleted with --cascade=orphan is ORPHAN's to re-own), same finalizers.
          assert.deepEqual(ops, [
            { op: 'test', path: '/metadata/uid', value: red.metadata.uid },
            { op: 'test', path: '/metadata/resourceVersion', value: red.metadata.resourceVersion },
            { op: 'test', path: '/metadata/finalizers', value: [CLAIM_FINALIZER] },
            { op: 'replace', path: '/metadata/finalizers', value: [] },
          ]);
          return { ...red, metadata: { ...red.metadata, finalizers: [], resourceVersion: '12' } };
        },
      });
      assert.deepEqual(reads, [`${NS}/${vm.metadata.name}`]);
      assert.deepEqual(released, c.released);
    });
  }
});

describe('reconciler: a claim made for a running VMI gets its running pod pointed at it at once', () => {
  // The NAD was made persistent while the VM ran: no claim, a launcher pod whose element names none.
  const vm = virtualMachine({ networks: [multus('red', 'red')] });
  const runningPod: Pod = {
    metadata: {
      name: 'virt-launcher-vm1-abcde',
      namespace: NS,
      uid: 'pod-uid-1',
      ownerReferences: [
        { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: vm.metadata.name, uid: vmiOf(vm).metadata.uid!, controller: true },
      ],
      annotations: { [MULTUS_NETWORKS_ANNOTATION]: JSON.stringify([{ name: 'red', namespace: NS, interface: podInterfaceName('red') }]) },
    },
    status: { phase: 'Running' },
  };
  for (const running of [true, false]) {
    it(
      running ? 'the VMI has a launcher pod: the key runs again now, and that pass points the pod at the claim' : 'no launcher pod: no second pass',
      async () => {
        const vmi = vmiOf(vm, running ? {} : { activePods: {} });
        const sources = world(vm, vmi, [], [ovnNad('red')]);
        const overlay = new WriteOverlay();
        const created: IPAMClaim[] = [];
        const create = async (_r: unknown, body: IPAMClaim) => {
          const stored = {
            ...structuredClone(body),
            metadata: { ...body.metadata, uid: 'claim-uid', resourceVersion: '20', creationTimestamp: '2099-01-01T00:00:00Z' },
          };
          created.push(stored);
          return stored;
        };
        const first = await reconcileOnce(vm, sources, { create }, overlay);
        assert.deepEqual(
          created.map((c) => c.metadata.name),
          ['vm1.red'],
        );
        assert.deepEqual(first, { requeue: running });
        if (!running) return;
        const patches: JsonPatchOp[][] = [];
        await reconcileOnce(
          vm,
          sources,
          {
            list: async () => ({ items: [runningPod] }),
            jsonPatch: async (_r: unknown, _ns: string, _n: string, ops: JsonPatchOp[]) => {
              patches.push(ops);
              return runningPod;
            },
          },
          overlay,
        );
        const written = patches.flat().flatMap((op) => (op.op === 'replace' && typeof op.value === 'string' ? [op.value] : []))[0];
        assert.ok(written, JSON.stringify(patches));
        assert.equal(JSON.parse(written)[0]['ipam-claim-reference'], 'vm1.red');
      },
    );
  }
});
