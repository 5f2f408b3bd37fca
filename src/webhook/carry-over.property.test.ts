// Spec §8: at UPDATE, every element the old pod had keeps its `ipam-claim-reference`, whatever the gate, the NADs
// or the caches say. Held over generated pairs of networks annotations (elements kept, dropped, reordered, added,
// their references removed or changed, interfaces present or not, JSON or list form) and generated controller
// states, through the whole admission handler: an admitted UPDATE leaves every old reference on its element, and an
// UPDATE that would change one is refused.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isHashedPodInterfaceName, podInterfaceName } from '../claims/names.ts';
import { admissionReview, ovnNad } from '../../test/objects.ts';
import { FakeCache } from '../../test/fake-cache.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, NetworkSelectionElement, Pod, VirtualMachineInstance } from '../kube/types.ts';
import { createLogger } from '../telemetry/logger.ts';
import { createPodAdmissionHandler } from './admission.ts';
import { IPAM_CLAIM_REFERENCE, parseNetworkSelection } from '../claims/network-selection.ts';
import { Subject } from '../streams/rx.ts';
import { applyJsonPatch } from '../../test/json-patch.ts';

const NS = 'vms';
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const NADS = ['red', 'blue', 'green'];

const elementArb: fc.Arbitrary<NetworkSelectionElement> = fc
  .record({
    nad: fc.constantFrom(...NADS),
    namespaced: fc.boolean(),
    iface: fc.option(fc.constantFrom('red', 'blue', 'green', 'x'), { nil: undefined }),
    ref: fc.option(fc.constantFrom('vm1.red', 'vm1.blue', 'vm2.red', 'a.b.c'), { nil: undefined }),
  })
  .map(({ nad, namespaced, iface, ref }) => ({
    name: nad,
    ...(namespaced ? { namespace: NS } : {}),
    ...(iface ? { interface: podInterfaceName(iface) } : {}),
    ...(ref ? { [IPAM_CLAIM_REFERENCE]: ref } : {}),
  }));

/** What virt-controller (or anyone) may do to the old elements: keep, drop the reference, change it, reorder, add. */
const updateArb = (old: NetworkSelectionElement[]) =>
  fc
    .record({
      keep: fc.array(fc.record({ keep: fc.boolean(), strip: fc.boolean(), change: fc.option(fc.constantFrom('vm1.red', 'vm2.red'), { nil: undefined }) }), {
        minLength: old.length,
        maxLength: old.length,
      }),
      added: fc.array(elementArb, { maxLength: 2 }),
      reverse: fc.boolean(),
      listForm: fc.boolean(),
    })
    .map(({ keep, added, reverse, listForm }) => {
      const kept = old.flatMap((e, i) => {
        const k = keep[i]!;
        if (!k.keep) return [];
        const copy = { ...e };
        if (k.strip) delete copy[IPAM_CLAIM_REFERENCE];
        else if (k.change) copy[IPAM_CLAIM_REFERENCE] = k.change;
        return [copy];
      });
      const elements = reverse ? [...kept, ...added].reverse() : [...kept, ...added];
      // The comma-separated form carries no references: only when the update has none to write.
      const asList = listForm && elements.every((e) => e[IPAM_CLAIM_REFERENCE] === undefined && (e.interface === undefined || e.interface !== ''));
      const text = asList
        ? elements.map((e) => `${e.namespace ? `${e.namespace}/` : ''}${e.name}${e.interface ? `@${e.interface}` : ''}`).join(',')
        : JSON.stringify(elements);
      return text;
    });

const stateArb = fc.record({
  gate: fc.boolean(),
  synced: fc.boolean(),
  persistent: fc.subarray(NADS),
  claims: fc.subarray(['vm1.red', 'vm1.blue', 'vm1.green']),
  vmiCached: fc.boolean(),
});

function pod(text: string): Pod {
  return {
    metadata: {
      name: 'virt-launcher-vm1-x',
      namespace: NS,
      labels: { 'kubevirt.io': 'virt-launcher' },
      annotations: { [NETWORKS]: text },
      ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vm1', uid: 'vmi-uid', controller: true }],
    },
  };
}

const nad = (name: string, persistent: boolean): NetworkAttachmentDefinition => ovnNad(name, { persistent });

const claim = (name: string): IPAMClaim => ({
  metadata: {
    name,
    namespace: NS,
    uid: `uid-${name}`,
    resourceVersion: '1',
    ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vm1', uid: 'vmi-uid', controller: true }],
  },
  spec: { network: `net-${name.slice(4)}`, interface: podInterfaceName(name.slice(4)) },
});

const VMI: VirtualMachineInstance = {
  metadata: { name: 'vm1', namespace: NS, uid: 'vmi-uid' },
  spec: {
    networks: NADS.map((n) => ({ name: n, multus: { networkName: n } })),
    domain: { devices: { interfaces: NADS.map((n) => ({ name: n, bridge: {} })) } },
  },
};

/** `namespace/name@iface` (`…#k` for a repeat) or `namespace/name#k`, as an element is matched between the two objects. */
function ids(elements: NetworkSelectionElement[]): string[] {
  const seen = new Map<string, number>();
  return elements.map((e) => {
    const nad = `${e.namespace || NS}/${e.name}`;
    const base = e.interface ? `${nad}@${e.interface}` : nad;
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    return e.interface && k === 0 ? base : `${base}#${k}`;
  });
}

describe('carry-over at UPDATE (property)', () => {
  it('an admitted UPDATE keeps every reference of the old object on its element; one that changes a reference is refused', async () => {
    const arb = fc.array(elementArb, { maxLength: 4 }).chain((old) => fc.tuple(fc.constant(old), updateArb(old), stateArb));
    await fc.assert(
      fc.asyncProperty(arb, async ([old, newText, state]) => {
        const handle = createPodAdmissionHandler({
          logger: createLogger('silent'),
          gateEnabled: () => state.gate,
          synced: () => state.synced,
          vmis: new FakeCache(state.vmiCached ? [VMI] : []),
          nads: new FakeCache(NADS.map((n) => nad(n, state.persistent.includes(n)))),
          claims: new FakeCache(state.claims.map(claim)),
          fetchVmi: async () => VMI,
          claimEvents: new Subject(),
          fetchClaim: async (_ns, name) => (state.claims.includes(name) ? claim(name) : undefined),
          claimWaitMs: 0,
        });
        const oldPod = pod(JSON.stringify(old));
        const newPod = pod(newText);
        const out = await handle(admissionReview(newPod, 'UPDATE', oldPod));
        const requested = parseNetworkSelection(newText);
        assert.ok(requested.ok);
        // What each element of the new object had: by NAD and interface, or (a NAD swap) by an interface whose old
        // element is gone.
        const oldIds = ids(old);
        const newIds = ids(requested.elements);
        const gone = new Map(old.flatMap((e, i) => (isHashedPodInterfaceName(e.interface) && !newIds.includes(oldIds[i]!) ? [[e.interface, i] as const] : [])));
        // Compared by position, not identity: two new elements may share one (same NAD and interface), and an old
        // reference goes to the one the match picks, never to both (one claim on two attachments of a pod).
        const oldRefs: (string | undefined)[] = newIds.map((id, i) => {
          const iface = requested.elements[i]!.interface;
          const j = oldIds.includes(id) ? oldIds.indexOf(id) : iface ? gone.get(iface) : undefined;
          if (iface && !oldIds.includes(id)) gone.delete(iface);
          return j === undefined ? undefined : old[j]![IPAM_CLAIM_REFERENCE];
        });
        const changed = requested.elements.some(
          (e, i) => oldRefs[i] !== undefined && e[IPAM_CLAIM_REFERENCE] !== undefined && e[IPAM_CLAIM_REFERENCE] !== oldRefs[i],
        );
        if (changed) assert.equal(out.response?.allowed, false, 'an UPDATE that changes a reference is refused');
        if (!out.response?.allowed) return;
        const ops = out.response.patch ? JSON.parse(Buffer.from(out.response.patch, 'base64').toString('utf8')) : [];
        const after = parseNetworkSelection(applyJsonPatch(newPod, ops).metadata.annotations![NETWORKS]);
        assert.ok(after.ok);
        assert.equal(after.elements.length, requested.elements.length, 'the carry-over adds and drops no element');
        oldRefs.forEach((ref, i) => {
          if (ref !== undefined) assert.equal(after.elements[i]![IPAM_CLAIM_REFERENCE], ref, `element ${newIds[i]} (#${i}) keeps its reference`);
        });
      }),
      { numRuns: 500 },
    );
  });
});
