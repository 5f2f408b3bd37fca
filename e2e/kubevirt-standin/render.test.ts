// Unit tests of the KubeVirt stand-in's pure rules (no cluster needed).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { buildVM } from './manifests.ts';
import {
  LEGACY_VMI_FINALIZER,
  RENDERED_INTERFACES_ANNOTATION,
  VMI_FINALIZER,
  VM_CONTROLLER_FINALIZER,
  currentPod,
  interfaceStatuses,
  launcherNetworkAnnotations,
  launcherPodName,
  needsPodReplacement,
  parseNetworksAnnotation,
  podInterfaceName,
  renderLauncherPod,
  renderVmiFromVm,
  shouldRun,
  syncNetworks,
  type Vm,
  type Vmi,
} from './render.ts';

const vmiOf = (vm: Vm, status: Vmi['status'] = {}): Vmi => {
  const vmi = renderVmiFromVm({ ...vm, metadata: { ...vm.metadata, uid: 'vm-uid' } });
  return { ...vmi, metadata: { ...vmi.metadata, uid: 'vmi-uid' }, status };
};

describe('KubeVirt names', () => {
  it('pod interface name is "pod" + 11 hex chars of sha256(network name) (values from sha256sum)', () => {
    assert.equal(podInterfaceName('red'), 'podb1f51a511f1');
    assert.equal(podInterfaceName('blue'), 'pod16477688c0e');
    assert.equal(podInterfaceName('net_a'), 'pod3db326c6c72');
  });

  it('launcher pod names look like generateName output and are stable per (VMI UID, purpose)', () => {
    const a = launcherPodName('vm1', 'uid-1', 'launcher');
    assert.match(a, /^virt-launcher-vm1-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    assert.equal(launcherPodName('vm1', 'uid-1', 'launcher'), a);
    assert.notEqual(launcherPodName('vm1', 'uid-2', 'launcher'), a);
    assert.notEqual(launcherPodName('vm1', 'uid-1', 'migration/x'), a);
  });
});

describe('launcher pod networks annotation', () => {
  const vm = buildVM({
    namespace: 'ns1',
    name: 'vm1',
    networks: [
      { name: 'red', nadName: 'nad-red' },
      { name: 'blue', nadName: 'other/nad-blue', macAddress: '02:00:00:00:00:01' },
      { name: 'gone', nadName: 'nad-gone', state: 'absent' },
    ],
  });
  const vmi = vmiOf(vm);

  it('lists every non-absent Multus secondary network with KubeVirt interface names', () => {
    const ann = launcherNetworkAnnotations('ns1', vmi.spec);
    assert.deepEqual(JSON.parse(ann['k8s.v1.cni.cncf.io/networks']!), [
      { name: 'nad-red', namespace: 'ns1', interface: podInterfaceName('red') },
      { name: 'nad-blue', namespace: 'other', interface: podInterfaceName('blue'), mac: '02:00:00:00:00:01' },
    ]);
    assert.equal(ann['v1.multus-cni.io/default-network'], undefined);
  });

  it('has no networks annotation without secondary networks, and names a Multus default network', () => {
    assert.deepEqual(launcherNetworkAnnotations('ns1', buildVM({ namespace: 'ns1', name: 'x' }).spec!.template!.spec), {});
    const spec = { networks: [{ name: 'prim', multus: { networkName: 'udn', default: true } }], domain: { devices: { interfaces: [{ name: 'prim', bridge: {} }] } } };
    assert.deepEqual(launcherNetworkAnnotations('ns1', spec), { 'v1.multus-cni.io/default-network': 'udn' });
  });

  it('renders a launcher pod owned by the VMI, without nodeName', () => {
    const pod = renderLauncherPod(vmi, { name: 'virt-launcher-vm1-abcde', node: 'standin-node-1' });
    assert.equal(pod.metadata?.labels?.['kubevirt.io'], 'virt-launcher');
    assert.equal(pod.metadata?.labels?.['kubevirt.io/created-by'], 'vmi-uid');
    assert.equal(pod.metadata?.labels?.['vm.kubevirt.io/name'], 'vm1');
    assert.equal(pod.metadata?.annotations?.['kubevirt.io/domain'], 'vm1');
    assert.deepEqual(pod.metadata?.ownerReferences, [
      { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vm1', uid: 'vmi-uid', controller: true, blockOwnerDeletion: true },
    ]);
    assert.equal(pod.spec?.nodeName, undefined);
  });

  it('parses both annotation forms', () => {
    assert.deepEqual(parseNetworksAnnotation('a, ns/b@eth9'), [{ name: 'a' }, { namespace: 'ns', name: 'b', interface: 'eth9' }]);
    assert.deepEqual(parseNetworksAnnotation('[{"name":"a","interface":"x"}]'), [{ name: 'a', interface: 'x' }]);
    assert.equal(parseNetworksAnnotation('[{'), undefined);
    assert.deepEqual(parseNetworksAnnotation(undefined), []);
  });
});

describe('VM → VMI', () => {
  it('copies the template, points at the VM and carries both finalizers', () => {
    const vm = buildVM({ namespace: 'ns1', name: 'vm1', networks: [{ name: 'red', nadName: 'nad-red' }] });
    const vmi = renderVmiFromVm({ ...vm, metadata: { ...vm.metadata, uid: 'vm-uid', generation: 3 } });
    assert.equal(vmi.metadata.name, 'vm1');
    assert.deepEqual(vmi.spec, vm.spec!.template!.spec);
    assert.deepEqual(vmi.metadata.finalizers, [VM_CONTROLLER_FINALIZER, VMI_FINALIZER]);
    assert.equal(vmi.metadata.ownerReferences?.[0]?.uid, 'vm-uid');
    assert.equal(vmi.metadata.annotations?.['kubevirt.io/vm-generation'], '3');
    assert.equal(vmi.metadata.labels?.['kubevirt.io/domain'], 'vm1');
    assert.notEqual(LEGACY_VMI_FINALIZER, VMI_FINALIZER);
  });

  it('follows runStrategy before running', () => {
    const base = buildVM({ namespace: 'n', name: 'v' });
    const rs = (runStrategy: string): Vm => ({ ...base, spec: { ...base.spec, runStrategy } });
    assert.equal(shouldRun(base, undefined), true);
    assert.equal(shouldRun({ ...base, spec: { ...base.spec, running: false } }, undefined), false);
    assert.equal(shouldRun(rs('Always'), undefined), true);
    assert.equal(shouldRun(rs('Halted'), undefined), false);
    assert.equal(shouldRun(rs('Manual'), undefined), undefined);
    assert.equal(shouldRun(rs('RerunOnFailure'), vmiOf(base, { phase: 'Succeeded' })), undefined);
    assert.equal(shouldRun(rs('RerunOnFailure'), vmiOf(base, { phase: 'Failed' })), true);
  });
});

describe('NIC hotplug sync', () => {
  const vm0 = buildVM({ namespace: 'ns1', name: 'vm1', networks: [{ name: 'red', nadName: 'nad-red' }] });

  it('copies a new bridge interface and its network to the VMI', () => {
    const vmi = vmiOf(vm0);
    const vm = buildVM({ namespace: 'ns1', name: 'vm1', networks: [{ name: 'red', nadName: 'nad-red' }, { name: 'blue', nadName: 'nad-blue' }] });
    const out = syncNetworks(vm, vmi);
    assert.equal(out.vm, undefined);
    assert.deepEqual(out.vmi?.networks.map((n) => n.name), ['default', 'red', 'blue']);
    assert.deepEqual(out.vmi?.interfaces.map((i) => i.name), ['default', 'red', 'blue']);
  });

  it('unplug: copies absent, then drops the interface from both once it is out of the VMI status', () => {
    const vm = buildVM({ namespace: 'ns1', name: 'vm1', networks: [{ name: 'red', nadName: 'nad-red', state: 'absent' }] });
    const running = vmiOf(vm0, { interfaces: [{ name: 'default' }, { name: 'red' }] });
    const step1 = syncNetworks(vm, running);
    assert.equal(step1.vm, undefined, 'the VM keeps it while the VMI still reports it');
    assert.equal(step1.vmi?.interfaces.find((i) => i.name === 'red')?.state, 'absent');
    const migrated: Vmi = { ...running, spec: { ...running.spec, networks: step1.vmi!.networks, domain: { devices: { interfaces: step1.vmi!.interfaces } } }, status: { interfaces: [{ name: 'default' }] } };
    const step2 = syncNetworks(vm, migrated);
    assert.deepEqual(step2.vmi?.networks.map((n) => n.name), ['default']);
    assert.deepEqual(step2.vm?.networks.map((n) => n.name), ['default']);
    assert.deepEqual(step2.vm?.interfaces.map((i) => i.name), ['default']);
  });

  it('asks for a new pod when the wanted interfaces differ from those the pod was made for', () => {
    const vmi = vmiOf(vm0);
    const pod = renderLauncherPod(vmi, { name: 'p', node: 'n' });
    assert.equal(needsPodReplacement(vmi, pod), false);
    const vm = buildVM({ namespace: 'ns1', name: 'vm1', networks: [{ name: 'red', nadName: 'nad-red' }, { name: 'blue', nadName: 'nad-blue' }] });
    assert.equal(needsPodReplacement(vmiOf(vm), pod), true);
    // a webhook rewriting the annotation does not make the pod look outdated
    const mutated: V1Pod = { ...pod, metadata: { ...pod.metadata, annotations: { ...pod.metadata!.annotations, 'k8s.v1.cni.cncf.io/networks': '[]' } } };
    assert.equal(needsPodReplacement(vmi, mutated), false);
    assert.equal(mutated.metadata?.annotations?.[RENDERED_INTERFACES_ANNOTATION], podInterfaceName('red'));
    assert.deepEqual(interfaceStatuses(vmi, mutated).map((s) => s.name), ['default']);
    assert.deepEqual(interfaceStatuses(vmi, pod).map((s) => s.name), ['default', 'red']);
  });

  it('finds the current pod across a migration', () => {
    const vmi = vmiOf(vm0);
    const mk = (name: string, t: string): V1Pod => ({ metadata: { name, uid: name, creationTimestamp: new Date(t) } });
    const src = mk('src', '2024-01-01T00:00:00Z');
    const tgt = mk('tgt', '2024-01-01T00:01:00Z');
    assert.equal(currentPod(vmi, [src])?.metadata?.name, 'src');
    const migrating = { ...vmi, status: { migrationState: { migrationUid: 'm', sourcePod: 'src', targetPod: 'tgt' } } };
    assert.equal(currentPod(migrating, [src, tgt])?.metadata?.name, 'src');
    const done = { ...vmi, status: { migrationState: { migrationUid: 'm', sourcePod: 'src', targetPod: 'tgt', completed: true } } };
    assert.equal(currentPod(done, [tgt])?.metadata?.name, 'tgt');
  });
});
