// Unit tests of the launcher fixture (test infrastructure): what it renders as virt-controller does (no cluster).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  LEGACY_VMI_FINALIZER,
  VMI_FINALIZER,
  VM_CONTROLLER_FINALIZER,
  buildVM,
  launcherNetworkAnnotations,
  launcherPodName,
  parseNetworksAnnotation,
  podInterfaceName,
  renderLauncherPod,
  renderVmiFromVm,
  type Vm,
  type Vmi,
} from './launcher-fixture.ts';

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
    const spec = {
      networks: [{ name: 'prim', multus: { networkName: 'udn', default: true } }],
      domain: { devices: { interfaces: [{ name: 'prim', bridge: {} }] } },
    };
    assert.deepEqual(launcherNetworkAnnotations('ns1', spec), { 'v1.multus-cni.io/default-network': 'udn' });
  });

  it('renders a launcher pod owned by the VMI, without nodeName', () => {
    const pod = renderLauncherPod(vmi, { name: 'virt-launcher-vm1-abcde' });
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

  it('builds VMs with a runStrategy (KubeVirt deprecated `running`)', () => {
    assert.equal(buildVM({ namespace: 'ns1', name: 'a' }).spec?.runStrategy, 'Always');
    assert.equal(buildVM({ namespace: 'ns1', name: 'b', running: false }).spec?.runStrategy, 'Halted');
    assert.equal(buildVM({ namespace: 'ns1', name: 'c', runStrategy: 'Manual' }).spec?.runStrategy, 'Manual');
    assert.equal(buildVM({ namespace: 'ns1', name: 'a' }).spec?.running, undefined);
  });
});
