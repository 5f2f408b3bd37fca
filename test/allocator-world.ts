// Test helpers for the allocator loop: an in-memory "API server" for claim statuses (resourceVersion preconditions,
// a global revision counter like etcd's) whose changes reach the caches only when a test delivers them, so tests
// choose exactly how far behind the caches are.

import { keyString } from '../src/kube/key.ts';
import { pino } from 'pino';
import type { EventInput } from '../src/kube/client.ts';
import { KubeApiError } from '../src/kube/errors.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VirtualMachine, VirtualMachineInstance } from '../src/kube/types.ts';
import { Store } from '../src/sources/store.ts';
import { EventRecorder } from '../src/controller/events.ts';
import { registerIndexes } from '../src/sources/indexes.ts';
import { reconcileOf } from '../src/controller/loop.ts';
import { createNetworkReconciler, networkKey } from '../src/allocator/loop.ts';
import { WriteOverlay } from '../src/controller/write-overlay.ts';

export const NS = 'vms';

export function nad(
  name: string,
  network: string,
  annotations: Record<string, string>,
  extra: Record<string, unknown> = {},
  namespace = NS,
): NetworkAttachmentDefinition {
  return {
    metadata: { name, namespace, uid: `uid-nad-${namespace}-${name}`, annotations },
    spec: { config: JSON.stringify({ cniVersion: '0.4.0', name: network, type: 'bridge', ...extra }) },
  };
}

/** A bridge + static IPAM NAD that opts in, with its pool in annotations. */
export function allocatorNad(name: string, network: string, subnets: string, exclude?: string, namespace = NS): NetworkAttachmentDefinition {
  return nad(
    name,
    network,
    {
      'persistent-ips.kubevirt.io/allow-persistent-ips': 'true',
      'persistent-ips.kubevirt.io/allocator': 'true',
      'persistent-ips.kubevirt.io/subnets': subnets,
      ...(exclude ? { 'persistent-ips.kubevirt.io/exclude-subnets': exclude } : {}),
    },
    {},
    namespace,
  );
}

export function vm(name: string, networks: { name: string; nad: string }[], addresses?: Record<string, string[]>, namespace = NS): VirtualMachine {
  return {
    metadata: { name, namespace, uid: `uid-vm-${name}` },
    spec: {
      template: {
        ...(addresses ? { metadata: { annotations: { 'network.kubevirt.io/addresses': JSON.stringify(addresses) } } } : {}),
        spec: {
          networks: networks.map((n) => ({ name: n.name, multus: { networkName: n.nad } })),
          domain: { devices: { interfaces: networks.map((n) => ({ name: n.name, bridge: {} })) } },
        },
      },
    },
  };
}

export function claim(
  vmName: string,
  logical: string,
  network: string,
  o: { created?: string; ips?: string[]; ownerUid?: string; namespace?: string } = {},
): IPAMClaim {
  return {
    metadata: {
      name: `${vmName}.${logical}`,
      namespace: o.namespace ?? NS,
      uid: `uid-claim-${vmName}.${logical}`,
      creationTimestamp: o.created ?? '2025-01-01T00:00:00Z',
      ownerReferences: [
        {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachine',
          name: vmName,
          uid: o.ownerUid ?? `uid-vm-${vmName}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: { network, interface: 'pod0' },
    ...(o.ips ? { status: { ips: o.ips } } : {}),
  };
}

/** What the fake API does on the next status write. */
export type WriteFault = 'none' | 'timeout-applied' | 'timeout-lost';

export class FakeWorld {
  readonly nads = new Store<NetworkAttachmentDefinition>();
  readonly claims = new Store<IPAMClaim>();
  readonly vms = new Store<VirtualMachine>();
  readonly vmis = new Store<VirtualMachineInstance>();
  /** The API server's claims, by key. */
  readonly server = new Map<string, IPAMClaim>();
  readonly events: EventInput[] = [];
  readonly writes: { key: string; status: IPAMClaim['status'] }[] = [];
  overlay = new WriteOverlay();
  readonly recorder = new EventRecorder(
    async (e) => {
      this.events.push(e);
    },
    pino({ level: 'silent' }),
  );
  revision = 100;
  faults: WriteFault[] = [];
  /** Launcher pods, by the uid of the VMI that created them (the `kubevirt.io/created-by` label). */
  readonly pods = new Map<string, Pod[]>();
  /** Every pod list: namespace/vmiUid. */
  readonly podReads: string[] = [];
  /** When set, pod lists fail. */
  podReadFault = false;

  constructor() {
    registerIndexes({ nads: this.nads, claims: this.claims }, 'allocator');
    registerIndexes({ vmis: this.vmis }, 'shared');
  }

  /** Creates a claim on the server and in the cache (as if its ADDED event was delivered). */
  addClaim(c: IPAMClaim): IPAMClaim {
    const stored = structuredClone(c);
    stored.metadata.resourceVersion = String(++this.revision);
    this.server.set(keyString(stored.metadata), stored);
    this.claims.upsert(structuredClone(stored));
    return stored;
  }

  /** Delivers the server's current state of a claim (or all) to the cache. */
  deliver(key?: string): void {
    for (const [k, c] of this.server) if (key === undefined || key === k) this.claims.upsert(structuredClone(c));
  }

  deleteClaim(key: string): void {
    const c = this.server.get(key);
    this.server.delete(key);
    if (c) {
      this.claims.delete(c);
      this.overlay.observeDeleted(key, c.metadata.uid);
    }
  }

  reconciler(now = () => new Date('2025-06-01T12:00:00Z')) {
    return reconcileOf(
      createNetworkReconciler({
        nads: this.nads,
        claims: this.claims,
        vms: this.vms,
        vmis: this.vmis,
        overlay: this.overlay,
        recorder: this.recorder,
        log: pino({ level: 'silent' }),
        now,
        writeStatus: async (c, status, resourceVersion) => {
          const key = keyString(c.metadata);
          const fault = this.faults.shift() ?? 'none';
          const current = this.server.get(key);
          const ref = { kind: 'IPAMClaim', namespace: c.metadata.namespace, name: c.metadata.name };
          if (fault === 'timeout-lost') throw new KubeApiError({ reason: 'transient', object: ref, verb: 'patch', message: 'context deadline exceeded' });
          if (!current) throw new KubeApiError({ reason: 'notFound', code: 404, object: ref, verb: 'patch' });
          if (current.metadata.resourceVersion !== resourceVersion) throw new KubeApiError({ reason: 'conflict', code: 409, object: ref, verb: 'patch' });
          const next = structuredClone({ ...current, status: { ...(current.status ?? {}), ...structuredClone(status) } });
          next.metadata.resourceVersion = String(++this.revision);
          this.server.set(key, next);
          this.writes.push({ key, status: structuredClone(status) });
          if (fault === 'timeout-applied') throw new KubeApiError({ reason: 'transient', code: 504, object: ref, verb: 'patch', message: 'timeout' });
          return structuredClone(next);
        },
        readClaim: async (namespace, name) => structuredClone(this.server.get(`${namespace}/${name}`)),
        listLauncherPods: async (namespace, vmiUid) => {
          this.podReads.push(`${namespace}/${vmiUid}`);
          if (this.podReadFault) throw new KubeApiError({ reason: 'transient', code: 503, object: { kind: 'Pod', namespace, name: '' }, verb: 'list' });
          return structuredClone(this.pods.get(vmiUid) ?? []).filter((p) => p.metadata.namespace === namespace);
        },
      }),
    );
  }

  async pass(network: string, reconcile = this.reconciler()) {
    return reconcile(networkKey(network), { signal: new AbortController().signal, retries: 0 });
  }

  /** Every address held on the server, by claim key. */
  held(): Map<string, string[]> {
    return new Map([...this.server].map(([k, c]) => [k, c.status?.ips ?? []]));
  }
}

/** A running VMI of the VM `vmName` (controlled by it), with the given launcher pods active. */
export function runningVmi(
  vmName: string,
  networks: { name: string; nad: string }[],
  activePods: string[] = ['uid-pod-1'],
  namespace = NS,
): VirtualMachineInstance {
  return {
    metadata: {
      name: vmName,
      namespace,
      uid: `uid-vmi-${vmName}`,
      ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: vmName, uid: `uid-vm-${vmName}`, controller: true }],
    },
    spec: { networks: networks.map((n) => ({ name: n.name, multus: { networkName: n.nad } })) },
    status: { phase: 'Running', activePods: Object.fromEntries(activePods.map((p) => [p, 'node-1'])) },
  };
}

/** A launcher pod of `vmiUid` whose network-status lists `status` (NAD `namespace/name`, interface, ips). */
export function launcherPod(
  name: string,
  vmiUid: string,
  status: { name: string; interface: string; ips: string[] }[],
  o: { phase?: string; deleting?: boolean; ownerUid?: string; namespace?: string } = {},
): Pod {
  return {
    metadata: {
      name,
      namespace: o.namespace ?? NS,
      uid: `uid-${name}`,
      labels: { 'kubevirt.io': 'virt-launcher', 'kubevirt.io/created-by': vmiUid },
      annotations: {
        'k8s.v1.cni.cncf.io/network-status': JSON.stringify([{ name: 'ovn-kubernetes', interface: 'eth0', ips: ['10.244.0.9'], default: true }, ...status]),
      },
      ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'x', uid: o.ownerUid ?? vmiUid, controller: true }],
      ...(o.deleting ? { deletionTimestamp: '2025-01-01T00:00:00Z' } : {}),
    },
    status: { phase: o.phase ?? 'Running' },
  };
}
