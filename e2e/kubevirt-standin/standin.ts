// KubeVirt stand-in: TEST INFRASTRUCTURE, NOT KUBEVIRT.
//
// KubeVirt cannot run in this project's test clusters (a bare etcd + kube-apiserver + kube-controller-manager with
// only the garbage-collector and namespace controllers: no nodes, no kubelet, no virt-handler, no Multus). This
// module does, against a real API server and at the level of API objects only, what KubeVirt's control plane does
// with the objects the persistent-ips controller watches, so that the controller can be tested against the same
// sequence of API events it would see in a KubeVirt cluster. Nothing in here runs a VM.
//
// Reproduced (KubeVirt behaviour → what the stand-in writes):
// - VM controller: a VM that should run (runStrategy Always / RerunOnFailure, or `running: true`) gets a VMI of the
//   same name whose metadata and spec come from `spec.template` (plus `kubevirt.io/vm-generation`), controlled by
//   the VM (controller + blockOwnerDeletion); a VM that should not run (Halted / `running: false`) has its VMI
//   deleted; Manual and Once are left alone. A final VMI of a VM that should run is deleted and made again.
// - The finalizer `kubevirt.io/virtualMachineControllerFinalize` on every VM, held until the VM's VMI is gone (so a
//   VM deleted in background or foreground mode waits for its VMI), and on every VMI it creates, removed once the
//   VMI is final. A VM deleted with `orphan` propagation leaves its VMI alone.
// - VMI controller: one launcher pod `virt-launcher-<vmi>-<5 chars>` per VMI with label `kubevirt.io:
//   virt-launcher`, `kubevirt.io/created-by: <vmi uid>`, `vm.kubevirt.io/name`, the VMI's labels, annotation
//   `kubevirt.io/domain`, a controller reference to the VMI, `k8s.v1.cni.cncf.io/networks` with one element
//   `{name, namespace, interface[, mac]}` per Multus secondary network whose interface is not `state: absent`
//   (interface = "pod" + 11 hex chars of sha256(network name)), and `v1.multus-cni.io/default-network` for a Multus
//   default network. Pods are created once and never updated, so whatever a mutating webhook added stays.
// - VMI status: phase Scheduling (pod created) → Running; `activePods` (pod UID → fake node) lists every pod the
//   VMI controls, terminating ones included, until it is gone from the API; `nodeName`, a Ready condition, and
//   `interfaces` (primary network as eth0; a secondary network while the current pod's networks annotation, as
//   admitted, carries its interface).
// - VMI deletion: the finalizer `kubevirt.io/foregroundDeleteVirtualMachine` (put on every VMI, as KubeVirt's
//   admission webhook does) holds the VMI while its pods are deleted; then the phase becomes Succeeded with empty
//   activePods, and only then the finalizers go. A launcher pod that disappears on its own fails the VMI.
// - Live migration (`migrate()`, or automatic, below): a target pod with the same kind of networks annotation
//   (rendered from the VMI spec as it is now, label `kubevirt.io/migrationJobUID`), both pods in activePods, then
//   the source pod deleted, then only the target in activePods; progress in `status.migrationState`.
// - NIC hotplug (KubeVirt ≥ 1.5 with the LiveUpdate rollout strategy, no Multus dynamic-networks controller): a
//   bridge/SR-IOV interface added to the VM template is copied to the running VMI, which is then migrated to a pod
//   that carries the new network. Hot-unplug: `state: absent` on the VM is copied to the VMI; the VMI migrates to a
//   pod without that network; once the VMI's status no longer lists the interface, it is removed (with its
//   network) from the VMI spec and then from the VM spec.
//
// Not reproduced: scheduling, nodes and kubelet (pods stay Pending with no nodeName; the node names in activePods
// are fake), virt-handler and the guest (no domain, no guest agent, no IP addresses in status.interfaces), Multus
// (status.interfaces is derived from the pod's networks annotation; no network-status annotation), the
// VirtualMachineInstanceMigration and VirtualMachineInstanceReplicaSet kinds, KubeVirt's admission webhooks
// (no validation or defaulting of VM/VMI specs), instance types and preferences, DataVolumes, volume hotplug,
// in-place NIC hotplug through the Multus dynamic-networks controller, network binding plugins, the ordinal
// (`net1`) interface naming of old VMs, adoption of orphaned VMIs, crash-loop backoff, pause, and the
// start/stop/restart subresources (`startVM`/`stopVM` patch the VM spec instead).
//
// Use `startKubeVirtStandIn()` in a test, or run `main.ts --kubeconfig PATH` as a separate process; drive it with
// the operations of `KubeVirtStandInClient` (client.ts).
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { resourcePath, resources } from '../../src/kube/resources.ts';
import type { ObjectMeta } from '../../src/kube/types.ts';
import { KubeVirtStandInClient } from './client.ts';
import { Controllers, LAUNCHER_SELECTOR, isExpectedRace } from './controllers.ts';
import { KubeApi } from './kube.ts';
import { controllerOf } from './render.ts';
import { WorkQueue } from './workqueue.ts';

export interface KubeVirtStandInOptions {
  kubeconfigPath: string;
  /** Only this namespace (default: all namespaces). */
  namespace?: string;
  log?: Logger;
  /** Migrate a running VMI to a new pod when its interfaces change (KubeVirt's NIC hotplug); default true. */
  migrateOnInterfaceChange?: boolean;
  /** Parallel reconciles (default 4). */
  workers?: number;
}

/** A running stand-in: the operations of KubeVirtStandInClient, plus stop(). */
export class KubeVirtStandIn extends KubeVirtStandInClient {
  readonly #stop: () => Promise<void>;

  constructor(api: KubeApi, stop: () => Promise<void>) {
    super(api);
    this.#stop = stop;
  }

  /** Stops watching and waits for the reconciles in flight. Objects are left as they are. */
  stop(): Promise<void> {
    return this.#stop();
  }
}

export function defaultStandInLogger(level = process.env['KUBEVIRT_STANDIN_LOG_LEVEL'] ?? 'warn'): Logger {
  return pino({ level, base: { component: 'kubevirt-standin' }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination(2));
}

interface WatchSpec {
  what: string;
  path: string;
  params: Record<string, string | number | boolean>;
  keys: (obj: { metadata?: Partial<ObjectMeta> }) => string[];
}

/**
 * Starts the stand-in against the cluster of `kubeconfigPath`: checks that the KubeVirt CRDs are served, starts
 * watching VMs, VMIs and launcher pods, and resolves once every watch is established (their initial events then
 * bring every existing object through a reconcile).
 */
export async function startKubeVirtStandIn(opts: KubeVirtStandInOptions): Promise<KubeVirtStandIn> {
  const log = opts.log ?? defaultStandInLogger();
  const kc = new KubeConfig();
  kc.loadFromFile(opts.kubeconfigPath);
  const api = new KubeApi(kc);
  await api.discover();

  let queue: WorkQueue | undefined;
  const controllers = new Controllers(api, log, { migrateOnInterfaceChange: opts.migrateOnInterfaceChange ?? true }, (key) => queue?.add(key));
  queue = new WorkQueue((key) => controllers.reconcile(key), log, { workers: opts.workers ?? 4, isQuiet: isExpectedRace });

  const ns = opts.namespace;
  const specs: WatchSpec[] = [
    {
      what: 'virtualmachines',
      path: resourcePath(resources.virtualMachines, ns),
      params: {},
      keys: (o) => [Controllers.vmKey(o.metadata!.namespace!, o.metadata!.name!)],
    },
    {
      what: 'virtualmachineinstances',
      path: resourcePath(resources.virtualMachineInstances, ns),
      params: {},
      // a VMI change concerns its own controller and the VM of the same name (if any)
      keys: (o) => [Controllers.vmiKey(o.metadata!.namespace!, o.metadata!.name!), Controllers.vmKey(o.metadata!.namespace!, o.metadata!.name!)],
    },
    {
      what: 'launcher pods',
      path: resourcePath(resources.pods, ns),
      params: { labelSelector: LAUNCHER_SELECTOR },
      keys: (o) => {
        const owner = controllerOf(o.metadata);
        return owner?.kind === 'VirtualMachineInstance' ? [Controllers.vmiKey(o.metadata!.namespace!, owner.name)] : [];
      },
    },
  ];

  const watch = new Watch(kc);
  let stopped = false;
  const aborts = new Set<AbortController>();
  const wakeups = new Set<() => void>();

  /**
   * One watch, forever: without a resourceVersion, so that each (re)connection starts with a synthetic ADDED event
   * per existing object (a full resync); the server ends it after timeoutSeconds and it is opened again.
   */
  const runWatch = async (spec: WatchSpec, onFirstConnect: () => void, onFirstFailure: (err: unknown) => void) => {
    let connectedOnce = false;
    let failures = 0;
    while (!stopped) {
      let finished!: (err: unknown) => void;
      const ended = new Promise<unknown>((resolve) => (finished = resolve));
      let doneErr: unknown = undefined;
      let doneCalled = false;
      let ctrl: AbortController | undefined;
      try {
        ctrl = await watch.watch(
          spec.path,
          { ...spec.params, timeoutSeconds: 15 + Math.floor(Math.random() * 10) },
          (type: string, obj: { metadata?: Partial<ObjectMeta> } | undefined) => {
            if (type === 'ERROR' || type === 'BOOKMARK' || !obj?.metadata?.name) return;
            for (const k of spec.keys(obj)) queue!.add(k);
          },
          (err: unknown) => {
            doneCalled = true;
            doneErr = err;
            finished(err);
          },
        );
        aborts.add(ctrl);
      } catch (err) {
        doneCalled = true;
        doneErr = err;
        finished(err);
      }
      if (!doneCalled || !doneErr) {
        failures = 0;
        if (!connectedOnce) {
          connectedOnce = true;
          onFirstConnect();
        }
      }
      const err = await ended;
      if (ctrl) aborts.delete(ctrl);
      if (stopped) return;
      if (err) {
        failures++;
        if (!connectedOnce && failures >= 5) {
          onFirstFailure(err);
          return;
        }
        log.debug({ watch: spec.what, err: err instanceof Error ? err.message : String(err) }, 'watch ended, reconnecting');
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, Math.min(5_000, 100 * 2 ** Math.min(failures, 6)));
          wakeups.add(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
    }
  };

  const loops: Promise<void>[] = [];
  await new Promise<void>((resolve, reject) => {
    let pending = specs.length;
    for (const spec of specs) {
      loops.push(
        runWatch(
          spec,
          () => {
            if (--pending === 0) resolve();
          },
          (err) => reject(new Error(`cannot watch ${spec.what}: ${err instanceof Error ? err.message : String(err)}`)),
        ),
      );
    }
  }).catch(async (err: unknown) => {
    stopped = true;
    for (const a of aborts) a.abort();
    await queue!.stop();
    throw err;
  });
  log.info({ namespace: ns ?? '(all)', vmiStatusSubresource: api.vmis.statusSubresource }, 'kubevirt stand-in started');

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const a of aborts) a.abort();
    for (const w of wakeups) w();
    await Promise.allSettled(loops);
    await queue!.stop();
    log.info('kubevirt stand-in stopped');
  };
  return new KubeVirtStandIn(api, stop);
}
