// Controller and webhook must agree on every VM: the claims the controller wants for a VM (read from its template)
// are exactly the claims the webhook points that VM's launcher pod at (read from the VMI KubeVirt made of the
// template), and the webhook admits the pod once those claims exist. Held over generated VM specs, including specs
// with no networks (KubeVirt's implicit pod network), primary user-defined networks, unplugged interfaces, dotted
// names and a claim of another VM already holding one of the names.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decide, persistentNetworks } from '../claims/decide.ts';
import { annotatedBridgeNad, applyPlan, claim, NS, nadMap, ovnNad } from '../../test/objects.ts';
import { claimName, podInterfaceName } from '../claims/names.ts';
import type { IPAMClaim, Pod, VirtualMachine, VirtualMachineInstance, VmInterface, VmiSpecLike, VmNetwork } from '../kube/types.ts';
import { mutateLauncherPod } from './pod-mutation.ts';

/**
 * KubeVirt's VMI defaulting of the pod network, written here from its documented rule (virt-api,
 * SetDefaultNetworkInterface), independently of src/claims/effective-spec.ts: no networks and no interfaces, and
 * autoattachPodInterface not false → the `default` pod network with a masquerade interface.
 */
function kubevirtVmiSpec(template: VmiSpecLike): VmiSpecLike {
  const spec = structuredClone(template);
  const devices = spec.domain?.devices ?? {};
  if (devices.autoattachPodInterface === false) return spec;
  if ((spec.networks ?? []).length > 0 || (devices.interfaces ?? []).length > 0) return spec;
  spec.networks = [{ name: 'default', pod: {} }];
  spec.domain = { devices: { ...devices, interfaces: [{ name: 'default', masquerade: {} }] } };
  return spec;
}

const NADS = [ovnNad('persistent'), annotatedBridgeNad('bridge'), ovnNad('ordinary', { persistent: false })];
const UDN = ovnNad('udn', { role: 'primary' });

interface NetGen {
  name: string;
  kind: 'pod' | 'persistent' | 'bridge' | 'ordinary' | 'missing';
  absent: boolean;
}

const netArb: fc.Arbitrary<NetGen> = fc.record({
  name: fc.constantFrom('default', 'red', 'b.c', 'c', 'net_a', 'Blue', 'x.y.z'),
  kind: fc.constantFrom('pod', 'persistent', 'bridge', 'ordinary', 'missing'),
  absent: fc.boolean(),
});

const caseArb = fc.record({
  vmName: fc.constantFrom('vm1', 'a', 'a.b', 'x.y'),
  nets: fc.uniqueArray(netArb, { maxLength: 4, selector: (n) => n.name }),
  autoattach: fc.constantFrom<boolean | undefined>(undefined, true, false),
  udn: fc.boolean(),
  // A claim of another VM (a dotted-name collision) already holds the plain name of the first network.
  collidingClaim: fc.boolean(),
});

function templateOf(nets: NetGen[], autoattach: boolean | undefined): VmiSpecLike {
  // At most one pod network, as KubeVirt requires.
  const seenPod = { value: false };
  const kept = nets.filter((n) => (n.kind === 'pod' ? !seenPod.value && (seenPod.value = true) : true));
  const networks: VmNetwork[] = kept.map((n) => (n.kind === 'pod' ? { name: n.name, pod: {} } : { name: n.name, multus: { networkName: n.kind } }));
  const interfaces: VmInterface[] = kept.map((n) => ({
    name: n.name,
    ...(n.kind === 'pod' ? { masquerade: {} } : { bridge: {} }),
    ...(n.absent ? { state: 'absent' } : {}),
  }));
  return { networks, domain: { devices: { interfaces, ...(autoattach !== undefined ? { autoattachPodInterface: autoattach } : {}) } } };
}

/** The launcher pod virt-controller renders for the VMI: one element per Multus secondary network in use. */
function launcherPod(vmi: VirtualMachineInstance): Pod {
  const absent = new Set((vmi.spec?.domain?.devices?.interfaces ?? []).filter((i) => i.state === 'absent').map((i) => i.name));
  const elements = (vmi.spec?.networks ?? [])
    .filter((n) => n.multus && !n.multus.default && !absent.has(n.name))
    .map((n) => ({ name: n.multus!.networkName, namespace: NS, interface: podInterfaceName(n.name) }));
  return {
    metadata: {
      name: `virt-launcher-${vmi.metadata.name}-abcde`,
      namespace: NS,
      labels: { 'kubevirt.io': 'virt-launcher' },
      annotations: { 'kubevirt.io/domain': vmi.metadata.name, ...(elements.length ? { 'k8s.v1.cni.cncf.io/networks': JSON.stringify(elements) } : {}) },
      ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: vmi.metadata.name, uid: 'vmi-uid', controller: true }],
    },
  };
}

describe('controller and webhook agree (generated VM specs)', () => {
  it('the webhook references exactly the claims the controller makes, and admits the pod once they exist', () => {
    fc.assert(
      fc.property(caseArb, ({ vmName, nets, autoattach, udn, collidingClaim }) => {
        const template = templateOf(nets, autoattach);
        const vm: VirtualMachine = {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachine',
          metadata: { name: vmName, namespace: NS, uid: 'vm-uid', resourceVersion: '1' },
          spec: { runStrategy: 'Always', template: { spec: template } },
        };
        const vmi: VirtualMachineInstance = {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          metadata: {
            name: vmName,
            namespace: NS,
            uid: 'vmi-uid',
            resourceVersion: '1',
            ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: vmName, uid: 'vm-uid', controller: true }],
          },
          spec: kubevirtVmiSpec(template),
        };
        const nads = nadMap(...NADS, ...(udn ? [UDN] : []));
        const first = vmi.spec?.networks?.[0];
        const existing: IPAMClaim[] =
          collidingClaim && first
            ? [
                claim({
                  name: claimName(vmName, first.name),
                  owners: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'some-other-vm', uid: 'other-uid', controller: true }],
                }),
              ]
            : [];

        const plan = decide({ key: { namespace: NS, name: vmName }, vm, vmi, nads, claims: existing, gateEnabled: true });
        const claims = applyPlan(existing, plan);
        const wanted = plan.wanted
          .filter((w) => w.status !== 'blocked')
          .map((w) => w.claim)
          .sort();

        const mutation = mutateLauncherPod({
          pod: launcherPod(vmi),
          namespace: NS,
          operation: 'CREATE',
          vmi,
          nads,
          persistent: persistentNetworks({ namespace: NS, name: vmi.metadata.name }, vmi.spec, nads),
          claims: new Map(claims.map((c) => [c.metadata.name, c])),
        });
        assert.deepEqual(mutation.references.map((r) => r.claim).sort(), wanted, 'same claims, by name');
        // A claim name another VM's claim holds while this VM has no other name to use (a network whose name is
        // already in the hashed form): the controller waits and reports; the webhook denies. Nothing else is denied.
        const waiting = plan.wanted
          .filter((w) => w.status === 'blocked' && w.reason?.startsWith('Claim'))
          .map((w) => w.claim)
          .sort();
        assert.deepEqual(mutation.denials.map((d) => d.claim).sort(), waiting, 'the pod is admitted once the controller made the claims');
        for (const ref of mutation.references) {
          const c = claims.find((x) => x.metadata.name === ref.claim);
          assert.equal(c?.metadata.ownerReferences?.[0]?.uid, 'vm-uid', `${ref.claim} is this VM's`);
        }
      }),
      { numRuns: 1500 },
    );
  });

  it('a template with no networks in a namespace with a persistent primary network: the implicit pod network gets its claim (not only with autoattachPodInterface false)', () => {
    const nads = nadMap(UDN);
    const vm = (autoattach?: boolean): VirtualMachine => ({
      metadata: { name: 'vm1', namespace: NS, uid: 'vm-uid', resourceVersion: '1' },
      spec: { template: { spec: { domain: { devices: autoattach === undefined ? {} : { autoattachPodInterface: autoattach } } } } },
    });
    const plan = decide({ key: { namespace: NS, name: 'vm1' }, vm: vm(), nads, claims: [], gateEnabled: true });
    assert.deepEqual(
      plan.creates.map((c) => [c.metadata.name, c.spec.interface]),
      [['vm1.default', 'eth0']],
    );
    assert.deepEqual(decide({ key: { namespace: NS, name: 'vm1' }, vm: vm(false), nads, claims: [], gateEnabled: true }).creates, []);
  });
});
