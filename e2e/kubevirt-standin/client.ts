// What a test does to VMs through the KubeVirt stand-in (test infrastructure, see standin.ts): the API-level
// equivalents of `virtctl start/stop/migrate` and of editing a VM for NIC hotplug, plus waits with deadlines.
//
// Every operation only writes what a user (or virtctl) would write: the VM spec, or a migration request on the
// VMI. The stand-in controllers, in this process or in another one (`main.ts`), do the rest; the `wait` option of
// each operation (on by default) waits for that to be done.
import type { V1Pod } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { MULTUS_NETWORKS_ANNOTATION } from '../../src/claims/constants.ts';
import type { VmInterface, VmNetwork } from '../../src/kube/types.ts';
import { networkOps, LAUNCHER_SELECTOR } from './controllers.ts';
import { KubeApi, isConflict, rvTest, type PropagationPolicy } from './kube.ts';
import {
  currentPod,
  isControlledBy,
  isMigrationInProgress,
  isTerminating,
  parseNetworksAnnotation,
  podInterfaceName,
  type MigrationState,
  type Vm,
  type Vmi,
} from './render.ts';

export interface WaitOptions {
  /** Give up after this long (default 30 s). */
  timeoutMs?: number;
  /** Time between two looks (default 100 ms). */
  intervalMs?: number;
}

export interface OpOptions extends WaitOptions {
  /** Wait until the stand-in has carried the operation out (default true). */
  wait?: boolean;
}

export interface MigrationResult {
  migrationUid: string;
  sourcePod: string | undefined;
  targetPod: string | undefined;
  vmi: Vmi;
}

export interface HotplugRequest {
  /** The logical network (and interface) name in the VM spec. */
  networkName: string;
  /** The NAD, `name` or `namespace/name` (KubeVirt's `multus.networkName`). */
  nadName: string;
  macAddress?: string;
}

/**
 * Calls `probe` until it returns something other than undefined/false, and returns it; throws with `what` and the
 * last error after the deadline. Polls the API server: a condition, not a fixed sleep.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, opts: WaitOptions = {}): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last})` : ''}`);
    await sleep(opts.intervalMs ?? 100);
  }
}

const CONFLICT_RETRIES = 20;

/** Re-reads and re-applies `attempt` while it loses a race. */
async function retryOnConflict<T>(attempt: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (!isConflict(err) || i >= CONFLICT_RETRIES) throw err;
    }
  }
}

export class KubeVirtStandInClient {
  readonly api: KubeApi;

  constructor(api: KubeApi) {
    this.api = api;
  }

  static fromKubeconfig(kubeconfigPath: string): KubeVirtStandInClient {
    return new KubeVirtStandInClient(KubeApi.fromFile(kubeconfigPath));
  }

  // -- reads ------------------------------------------------------------------------------------------------------

  getVM(ns: string, name: string): Promise<Vm | undefined> {
    return this.api.vms.get(ns, name) as Promise<Vm | undefined>;
  }

  getVMI(ns: string, name: string): Promise<Vmi | undefined> {
    return this.api.vmis.get(ns, name) as Promise<Vmi | undefined>;
  }

  /** The launcher pods of the VMI `vmiName` (controlled by its current UID), terminating ones included. */
  async listLauncherPods(ns: string, vmiName: string): Promise<V1Pod[]> {
    const vmi = await this.getVMI(ns, vmiName);
    if (!vmi) return [];
    return (await this.api.listPods(ns, LAUNCHER_SELECTOR)).filter((p) => isControlledBy(p.metadata, vmi.metadata.uid));
  }

  /** The launcher pod the VMI currently runs in (the migration target once a migration completed). */
  async currentLauncherPod(ns: string, vmiName: string): Promise<V1Pod | undefined> {
    const vmi = await this.getVMI(ns, vmiName);
    if (!vmi) return undefined;
    const pods = (await this.api.listPods(ns, LAUNCHER_SELECTOR)).filter((p) => isControlledBy(p.metadata, vmi.metadata.uid));
    return currentPod(vmi, pods);
  }

  // -- writes -----------------------------------------------------------------------------------------------------

  async createVM(vm: Vm): Promise<Vm> {
    return (await this.api.vms.create(vm.metadata.namespace!, vm)) as Vm;
  }

  /** Deletes a VM with the given propagation policy (`kubectl delete --cascade=foreground|background|orphan`). */
  async deleteVM(ns: string, name: string, opts: { propagationPolicy?: PropagationPolicy } = {}): Promise<boolean> {
    return this.api.vms.delete(ns, name, opts.propagationPolicy ? { propagationPolicy: opts.propagationPolicy } : {});
  }

  /**
   * `virtctl start`: runStrategy Always when the VM uses a runStrategy, else `running: true`. Waits (by default)
   * for a running VMI; returns it.
   */
  async startVM(ns: string, name: string, opts: OpOptions = {}): Promise<Vmi | undefined> {
    await this.#setRunning(ns, name, true);
    if (opts.wait === false) return undefined;
    return (await this.waitForVMIRunning(ns, name, opts)).vmi;
  }

  /** `virtctl stop`: runStrategy Halted, or `running: false`. Waits (by default) until the VMI is gone. */
  async stopVM(ns: string, name: string, opts: OpOptions = {}): Promise<void> {
    await this.#setRunning(ns, name, false);
    if (opts.wait === false) return;
    await this.waitForVMIGone(ns, name, opts);
  }

  async #setRunning(ns: string, name: string, run: boolean): Promise<void> {
    await retryOnConflict(async () => {
      const vm = await this.getVM(ns, name);
      if (!vm) throw new Error(`VM ${ns}/${name} not found`);
      const usesRunStrategy = vm.spec?.runStrategy !== undefined;
      if (usesRunStrategy) {
        const want = run ? 'Always' : 'Halted';
        if (vm.spec!.runStrategy === want) return;
        await this.api.vms.patch(ns, name, [...rvTest(vm), { op: 'replace', path: '/spec/runStrategy', value: want }]);
      } else {
        if (vm.spec?.running === run) return;
        await this.api.vms.patch(ns, name, [...rvTest(vm), { op: 'add', path: '/spec/running', value: run }]);
      }
    });
  }

  /**
   * A live migration (what a VirtualMachineInstanceMigration asks for): records the request in the VMI's
   * status.migrationState; the stand-in then creates a target launcher pod (same networks annotation, from the
   * VMI spec), lists both pods in activePods, deletes the source pod and ends with only the target in activePods.
   * Waits (by default) for completion.
   */
  async migrate(ns: string, name: string, opts: OpOptions = {}): Promise<MigrationResult> {
    const migrationUid = randomUUID();
    await this.api.discover(); // status writes go through the status subresource only where the CRD has one
    let requested: Vmi | undefined;
    await retryOnConflict(async () => {
      const vmi = await this.getVMI(ns, name);
      if (!vmi) throw new Error(`VMI ${ns}/${name} not found`);
      if (vmi.metadata.deletionTimestamp || vmi.status?.phase !== 'Running') {
        throw new Error(`VMI ${ns}/${name} cannot migrate: phase ${vmi.status?.phase ?? '(none)'}${vmi.metadata.deletionTimestamp ? ', terminating' : ''}`);
      }
      if (isMigrationInProgress(vmi.status?.migrationState)) {
        throw new Error(`VMI ${ns}/${name} is already migrating (${vmi.status!.migrationState!.migrationUid})`);
      }
      const request: MigrationState = { migrationUid, startTimestamp: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'), mode: 'PreCopy', completed: false };
      requested = (await this.api.vmis.patchStatus(ns, name, [...rvTest(vmi), { op: 'add', path: '/status/migrationState', value: request }])) as Vmi;
    });
    if (opts.wait === false) return { migrationUid, sourcePod: undefined, targetPod: undefined, vmi: requested! };
    const vmi = await this.waitForVMI(
      ns,
      name,
      (v) => v.status?.migrationState?.migrationUid === migrationUid && (v.status.migrationState.completed === true || v.status.migrationState.failed === true),
      { ...opts, what: `migration ${migrationUid} of VMI ${ns}/${name} to end` },
    );
    const ms = vmi.status!.migrationState!;
    if (ms.failed) throw new Error(`migration ${migrationUid} of VMI ${ns}/${name} failed`);
    return { migrationUid, sourcePod: ms.sourcePod, targetPod: ms.targetPod, vmi };
  }

  /**
   * NIC hotplug as a user does it: adds a Multus network and a bridge interface to the VM template. The stand-in
   * copies them to the running VMI and migrates it to a new launcher pod that carries the new network (KubeVirt's
   * migration-based hotplug). Waits (by default) until the VMI reports the interface; returns the VMI (undefined
   * for a stopped VM).
   */
  async hotplugInterface(ns: string, vmName: string, req: HotplugRequest, opts: OpOptions = {}): Promise<Vmi | undefined> {
    await retryOnConflict(async () => {
      const vm = await this.getVM(ns, vmName);
      if (!vm) throw new Error(`VM ${ns}/${vmName} not found`);
      const spec = vm.spec?.template?.spec;
      const ifaces = spec?.domain?.devices?.interfaces ?? [];
      const nets = spec?.networks ?? [];
      const existing = ifaces.find((i) => i.name === req.networkName);
      if (existing?.state === 'absent') throw new Error(`interface ${req.networkName} of VM ${ns}/${vmName} is being unplugged`);
      if (existing && nets.some((n) => n.name === req.networkName)) return; // already there
      const iface: VmInterface = { name: req.networkName, bridge: {}, ...(req.macAddress ? { macAddress: req.macAddress } : {}) };
      const net: VmNetwork = { name: req.networkName, multus: { networkName: req.nadName } };
      await this.api.vms.patch(ns, vmName, [
        ...rvTest(vm),
        ...networkOps(
          '/spec/template/spec',
          spec as Record<string, unknown> | undefined,
          nets.some((n) => n.name === net.name) ? nets : [...nets, net],
          existing ? ifaces : [...ifaces, iface],
        ),
      ]);
    });
    if (opts.wait === false) return undefined;
    const vmi = await this.getVMI(ns, vmName);
    if (!vmi || vmi.metadata.deletionTimestamp) return undefined;
    return this.waitForVMI(ns, vmName, (v) => !!v.status?.interfaces?.some((s) => s.name === req.networkName), {
      ...opts,
      what: `interface ${req.networkName} to be plugged into VMI ${ns}/${vmName}`,
    });
  }

  /**
   * NIC hot-unplug as a user does it: `state: absent` on the VM's interface. The stand-in copies the state to the
   * VMI, migrates it to a launcher pod without that network, then drops the interface and network from the VMI
   * spec and from the VM spec (KubeVirt's order). Waits (by default) for both; returns the VMI (undefined for a
   * stopped VM, where KubeVirt too only acts at the next start).
   */
  async hotUnplugInterface(ns: string, vmName: string, networkName: string, opts: OpOptions = {}): Promise<Vmi | undefined> {
    await retryOnConflict(async () => {
      const vm = await this.getVM(ns, vmName);
      if (!vm) throw new Error(`VM ${ns}/${vmName} not found`);
      const ifaces = vm.spec?.template?.spec?.domain?.devices?.interfaces ?? [];
      const idx = ifaces.findIndex((i) => i.name === networkName);
      if (idx < 0 || ifaces[idx]!.state === 'absent') return;
      await this.api.vms.patch(ns, vmName, [
        ...rvTest(vm),
        { op: 'add', path: `/spec/template/spec/domain/devices/interfaces/${idx}/state`, value: 'absent' },
      ]);
    });
    if (opts.wait === false) return undefined;
    const vmi = await this.getVMI(ns, vmName);
    if (!vmi || vmi.metadata.deletionTimestamp) return undefined;
    const w = { ...opts, what: `interface ${networkName} to be unplugged from VM ${ns}/${vmName}` };
    const gone = await this.waitForVMI(ns, vmName, (v) => !v.spec?.networks?.some((n) => n.name === networkName), w);
    await this.waitForVM(ns, vmName, (v) => !v.spec?.template?.spec?.networks?.some((n) => n.name === networkName), w);
    return gone;
  }

  // -- waits ------------------------------------------------------------------------------------------------------

  waitForVM(ns: string, name: string, pred: (vm: Vm) => boolean = () => true, opts: WaitOptions & { what?: string } = {}): Promise<Vm> {
    return waitFor(opts.what ?? `VM ${ns}/${name}`, async () => {
      const vm = await this.getVM(ns, name);
      return vm && pred(vm) ? vm : undefined;
    }, opts);
  }

  async waitForVMGone(ns: string, name: string, opts: WaitOptions = {}): Promise<void> {
    await waitFor(`VM ${ns}/${name} to be gone`, async () => (await this.getVM(ns, name)) === undefined, opts);
  }

  waitForVMI(ns: string, name: string, pred: (vmi: Vmi) => boolean = () => true, opts: WaitOptions & { what?: string } = {}): Promise<Vmi> {
    return waitFor(opts.what ?? `VMI ${ns}/${name}`, async () => {
      const vmi = await this.getVMI(ns, name);
      return vmi && pred(vmi) ? vmi : undefined;
    }, opts);
  }

  async waitForVMIGone(ns: string, name: string, opts: WaitOptions = {}): Promise<void> {
    await waitFor(`VMI ${ns}/${name} to be gone`, async () => (await this.getVMI(ns, name)) === undefined, opts);
  }

  /** A VMI in phase Running, not terminating, not migrating, with the launcher pod it runs in. */
  waitForVMIRunning(ns: string, name: string, opts: WaitOptions = {}): Promise<{ vmi: Vmi; pod: V1Pod }> {
    return waitFor(`VMI ${ns}/${name} to be running`, async () => {
      const vmi = await this.getVMI(ns, name);
      if (!vmi || vmi.metadata.deletionTimestamp || vmi.status?.phase !== 'Running' || isMigrationInProgress(vmi.status.migrationState)) return undefined;
      const pods = (await this.api.listPods(ns, LAUNCHER_SELECTOR)).filter((p) => isControlledBy(p.metadata, vmi.metadata.uid));
      const pod = currentPod(vmi, pods);
      return pod && vmi.status.activePods?.[pod.metadata!.uid!] !== undefined ? { vmi, pod } : undefined;
    }, opts);
  }

  /** The VMI's launcher pods once `pred` holds for them (e.g. `(pods) => pods.length === 1`). */
  waitForLauncherPods(ns: string, vmiName: string, pred: (pods: V1Pod[]) => boolean, opts: WaitOptions & { what?: string } = {}): Promise<V1Pod[]> {
    return waitFor(opts.what ?? `launcher pods of VMI ${ns}/${vmiName}`, async () => {
      const pods = await this.listLauncherPods(ns, vmiName);
      return pred(pods) ? pods : undefined;
    }, opts);
  }

  async waitForPodGone(ns: string, name: string, opts: WaitOptions = {}): Promise<void> {
    await waitFor(`pod ${ns}/${name} to be gone`, async () => (await this.api.getPod(ns, name)) === undefined, opts);
  }
}

/** The pod interface names in a launcher pod's networks annotation (as it is after admission). */
export function podNetworkInterfaces(pod: V1Pod): string[] {
  return (parseNetworksAnnotation(pod.metadata?.annotations?.[MULTUS_NETWORKS_ANNOTATION]) ?? []).map((e) => e.interface ?? '');
}

/** Whether a launcher pod is live and carries the pod interface of `networkName`. */
export function podHasNetwork(pod: V1Pod, networkName: string): boolean {
  return !isTerminating(pod) && podNetworkInterfaces(pod).includes(podInterfaceName(networkName));
}
