// VM manifests for tests of the KubeVirt stand-in and of the controller (test infrastructure).
import type { VmInterface, VmNetwork } from '../../src/kube/types.ts';
import { VM_API_VERSION, type Vm } from './render.ts';

export interface VMNetworkRequest {
  /** Logical network name (VM network and interface `name`). */
  name: string;
  /** NAD reference, `name` or `namespace/name`. */
  nadName: string;
  macAddress?: string;
  state?: 'absent';
}

/**
 * A small VirtualMachine: pod network (masquerade) plus one bridge interface per Multus secondary network.
 * `running` sets `spec.running`; `runStrategy` sets `spec.runStrategy` instead.
 */
export function buildVM(opts: {
  namespace: string;
  name: string;
  running?: boolean;
  runStrategy?: string;
  networks?: VMNetworkRequest[];
  podNetwork?: boolean;
  labels?: Record<string, string>;
}): Vm {
  const networks: VmNetwork[] = [];
  const interfaces: VmInterface[] = [];
  if (opts.podNetwork !== false) {
    networks.push({ name: 'default', pod: {} });
    interfaces.push({ name: 'default', masquerade: {} });
  }
  for (const n of opts.networks ?? []) {
    networks.push({ name: n.name, multus: { networkName: n.nadName } });
    interfaces.push({ name: n.name, bridge: {}, ...(n.macAddress ? { macAddress: n.macAddress } : {}), ...(n.state ? { state: n.state } : {}) });
  }
  return {
    apiVersion: VM_API_VERSION,
    kind: 'VirtualMachine',
    metadata: { name: opts.name, namespace: opts.namespace },
    spec: {
      ...(opts.runStrategy !== undefined ? { runStrategy: opts.runStrategy } : { running: opts.running ?? true }),
      template: {
        metadata: { labels: { 'kubevirt.io/domain': opts.name, ...(opts.labels ?? {}) } },
        spec: {
          domain: { devices: { interfaces }, resources: { requests: { memory: '64Mi' } } },
          networks,
          terminationGracePeriodSeconds: 0,
        },
      },
    },
  };
}
