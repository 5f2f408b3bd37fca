// What a test does to VMs on real KubeVirt, and its waits: the API-level equivalents of `virtctl start/stop/migrate`,
// of deleting a VM, and of editing a VM for NIC hotplug and unplug. Every operation writes only what a user or
// virtctl writes (the VM spec, a VirtualMachineInstanceMigration); virt-controller (kubevirt.ts) and the node
// stand-in (node-standin.ts) do the rest, and the `wait` option (on by default) waits for that.
import type { V1Pod } from '@kubernetes/client-node';
import { poll } from '../harness/index.ts';
import { type Api, type JsonPatch, paths } from '../suite/kube.ts';
import { isControlledBy, isMigrationInProgress, LAUNCHER_SELECTOR, MIGRATION_JOB_LABEL, type Vm, type Vmi } from './launcher-fixture.ts';

export interface WaitOptions {
  /** Give up after this long (default 30 s). */
  timeoutMs?: number;
  /** Time between two looks (default 100 ms). */
  intervalMs?: number;
}

export interface OpOptions extends WaitOptions {
  /** Wait until KubeVirt has carried the operation out (default true). */
  wait?: boolean;
}

export interface MigrationResult {
  /** The VirtualMachineInstanceMigration's name and uid (the target pod's `kubevirt.io/migrationJobUID`). */
  migration: string;
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

/** Calls `probe` until it returns something other than undefined/false, and returns it (the harness's poll). */
export function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, opts: WaitOptions = {}): Promise<T> {
  return poll(
    what,
    opts.timeoutMs ?? 30_000,
    async () => {
      const v = await probe();
      return v === false ? undefined : v;
    },
    { intervalMs: opts.intervalMs ?? 100 },
  );
}

const migrationsPath = (ns: string, name?: string) =>
  `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(ns)}/virtualmachineinstancemigrations${name ? `/${encodeURIComponent(name)}` : ''}`;

interface Migration {
  metadata: { name: string; uid?: string };
  status?: { phase?: string };
}

export class VirtCtl {
  readonly api: Api;

  constructor(api: Api) {
    this.api = api;
  }

  // -- reads ------------------------------------------------------------------------------------------------------

  getVM(ns: string, name: string): Promise<Vm | undefined> {
    return this.api.get<Vm>(paths.vms(ns, name));
  }

  getVMI(ns: string, name: string): Promise<Vmi | undefined> {
    return this.api.get<Vmi>(paths.vmis(ns, name));
  }

  /** The launcher pods of the VMI `vmiName` (controlled by its current UID): terminating and completed ones too. */
  async listLauncherPods(ns: string, vmiName: string): Promise<V1Pod[]> {
    const vmi = await this.getVMI(ns, vmiName);
    return vmi ? this.launcherPodsOf(vmi) : [];
  }

  /** The launcher pods `vmi` (that UID) controls: terminating and completed ones too. */
  async launcherPodsOf(vmi: Vmi): Promise<V1Pod[]> {
    const pods = await this.api.list<V1Pod>(`${paths.pods(vmi.metadata.namespace!)}?labelSelector=${encodeURIComponent(LAUNCHER_SELECTOR)}`);
    return pods.items.filter((p) => isControlledBy(p.metadata, vmi.metadata.uid));
  }

  /** The launcher pod the VMI runs in: the running one on the VMI's node (the target once a migration completed). */
  async currentLauncherPod(ns: string, vmiName: string): Promise<V1Pod | undefined> {
    const vmi = await this.getVMI(ns, vmiName);
    if (!vmi?.status?.nodeName) return undefined;
    return currentPod(vmi, await this.listLauncherPods(ns, vmiName));
  }

  // -- writes -----------------------------------------------------------------------------------------------------

  createVM(vm: Vm): Promise<Vm> {
    return this.api.create<Vm>(paths.vms(vm.metadata.namespace!), vm);
  }

  /** Deletes a VM with the given propagation policy (`kubectl delete --cascade=foreground|background|orphan`). */
  deleteVM(ns: string, name: string, opts: { propagationPolicy?: 'Foreground' | 'Background' | 'Orphan' } = {}): Promise<boolean> {
    return this.api.delete(paths.vms(ns, name), opts);
  }

  /** `virtctl start` (runStrategy Always). Waits (by default) for a running VMI; returns it. */
  async startVM(ns: string, name: string, opts: OpOptions = {}): Promise<Vmi | undefined> {
    await this.api.mergePatch(paths.vms(ns, name), { spec: { runStrategy: 'Always' } });
    if (opts.wait === false) return undefined;
    return (await this.waitForVMIRunning(ns, name, opts)).vmi;
  }

  /** `virtctl stop` (runStrategy Halted). Waits (by default) until the VMI is gone. */
  async stopVM(ns: string, name: string, opts: OpOptions = {}): Promise<void> {
    await this.api.mergePatch(paths.vms(ns, name), { spec: { runStrategy: 'Halted' } });
    if (opts.wait === false) return;
    await this.waitForVMIGone(ns, name, opts);
  }

  /**
   * `virtctl migrate`: a VirtualMachineInstanceMigration for the VMI. virt-controller creates the target pod, the
   * node stand-in plays both virt-handlers; KubeVirt keeps the (completed) source pod until the VMI goes. Waits for
   * the migration to succeed; throws when it failed.
   */
  async migrate(ns: string, name: string, opts: WaitOptions = {}): Promise<MigrationResult> {
    const source = await this.currentLauncherPod(ns, name);
    const m = await this.startMigration(ns, name);
    if ((await this.migrationEnd(ns, m.metadata.name, opts)) === 'Failed') throw new Error(`migration ${ns}/${m.metadata.name} of VMI ${name} failed`);
    const vmi = (await this.getVMI(ns, name))!;
    const target = await this.migrationTarget(vmi, m.metadata.uid!);
    return { migration: m.metadata.name, migrationUid: m.metadata.uid!, sourcePod: source?.metadata?.name, targetPod: target?.metadata?.name, vmi };
  }

  /** The VirtualMachineInstanceMigration of `migrate`, created without waiting for anything. */
  startMigration(ns: string, name: string): Promise<Migration> {
    return this.api.create<Migration>(migrationsPath(ns), {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstanceMigration',
      metadata: { generateName: `${name}-migration-`, namespace: ns },
      spec: { vmiName: name },
    });
  }

  /** Waits until the migration has ended; returns its final phase, Succeeded or Failed. */
  migrationEnd(ns: string, migration: string, opts: WaitOptions = {}): Promise<string> {
    const phase = async () => (await this.api.get<Migration>(migrationsPath(ns, migration)))?.status?.phase;
    return this.#until(`migration ${ns}/${migration} to end`, phase, (p) => p === 'Succeeded' || p === 'Failed', opts);
  }

  /** The target pod virt-controller made for the migration with this uid, among `vmi`'s launcher pods. */
  async migrationTarget(vmi: Vmi, migrationUid: string): Promise<V1Pod | undefined> {
    return (await this.launcherPodsOf(vmi)).find((p) => p.metadata?.labels?.[MIGRATION_JOB_LABEL] === migrationUid);
  }

  /**
   * NIC hotplug as a user does it: a Multus network and a bridge interface added to the VM template. virt-controller
   * copies them to the running VMI (LiveUpdate); without Multus's dynamic-networks controller the interface reaches
   * the domain through a migration (KubeVirt's 15 s grace period, then the workload updater). Waits (by default)
   * until the domain has it; returns the VMI (undefined for a stopped VM).
   */
  async hotplugInterface(ns: string, vmName: string, req: HotplugRequest, opts: OpOptions = {}): Promise<Vmi | undefined> {
    await this.#settled(ns, vmName, opts);
    await this.#editVM(ns, vmName, (vm) => {
      const spec = vm.spec?.template?.spec;
      const ifaces = spec?.domain?.devices?.interfaces ?? [];
      const nets = spec?.networks ?? [];
      if (ifaces.some((i) => i.name === req.networkName)) return [];
      return [
        { op: 'replace', path: '/spec/template/spec/networks', value: [...nets, { name: req.networkName, multus: { networkName: req.nadName } }] },
        {
          op: 'replace',
          path: '/spec/template/spec/domain/devices/interfaces',
          value: [...ifaces, { name: req.networkName, bridge: {}, ...(req.macAddress ? { macAddress: req.macAddress } : {}) }],
        },
      ];
    });
    const plugged = (v: Vmi) => !!v.status?.interfaces?.some((s) => s.name === req.networkName && (s.infoSource ?? '').includes('domain'));
    return this.#nicChanged(ns, vmName, opts, `interface ${req.networkName} to be plugged into the domain of VMI ${ns}/${vmName}`, plugged);
  }

  /**
   * NIC hot-unplug as a user does it: `state: absent` on the VM's interface. virt-controller copies it to the VMI,
   * drops the element from the running pod, migrates the VMI to a pod without it, then removes the interface and its
   * network from the VMI spec. Several interfaces at once take one VM edit (and one migration). Waits (by default)
   * for that last step; returns the VMI (undefined for a stopped VM).
   */
  async hotUnplugInterface(ns: string, vmName: string, networkName: string | string[], opts: OpOptions = {}): Promise<Vmi | undefined> {
    const names = typeof networkName === 'string' ? [networkName] : networkName;
    await this.#settled(ns, vmName, opts);
    await this.#editVM(ns, vmName, (vm) =>
      (vm.spec?.template?.spec?.domain?.devices?.interfaces ?? []).flatMap((iface, idx) =>
        names.includes(iface.name) && iface.state !== 'absent'
          ? [{ op: 'add' as const, path: `/spec/template/spec/domain/devices/interfaces/${idx}/state`, value: 'absent' }]
          : [],
      ),
    );
    const unplugged = (v: Vmi) => !v.spec?.networks?.some((n) => names.includes(n.name));
    return this.#nicChanged(ns, vmName, opts, `interfaces ${names.join(', ')} to leave the spec of VMI ${ns}/${vmName}`, unplugged);
  }

  /** After a NIC edit: waits (by default, and when the VM runs) until `pred` holds for its VMI, and returns it. */
  async #nicChanged(ns: string, vmName: string, opts: OpOptions, what: string, pred: (v: Vmi) => boolean): Promise<Vmi | undefined> {
    if (opts.wait === false) return undefined;
    const vmi = await this.getVMI(ns, vmName);
    if (!vmi || vmi.metadata.deletionTimestamp) return undefined;
    return this.waitForVMI(ns, vmName, pred, { ...opts, timeoutMs: Math.max(opts.timeoutMs ?? 0, 120_000), what });
  }

  /**
   * Edits the VM as `kubectl edit` does: the patch applies only to the object it was computed from (a `test` of the
   * resourceVersion), and when someone wrote it in between (virt-controller updates the VM's status at any time; the
   * failed test is HTTP 422), it is read and computed again.
   */
  async #editVM(ns: string, vmName: string, opsOf: (vm: Vm) => JsonPatch): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const vm = await this.getVM(ns, vmName);
      if (!vm) throw new Error(`VM ${ns}/${vmName} not found`);
      const ops = opsOf(vm);
      if (ops.length === 0) return;
      const test = { op: 'test' as const, path: '/metadata/resourceVersion', value: vm.metadata.resourceVersion };
      const res = await this.api.http.request('PATCH', paths.vms(ns, vmName), [test, ...ops], 'application/json-patch+json');
      if (res.status === 200) return;
      if (res.status !== 422 || attempt === 5) throw new Error(`PATCH ${paths.vms(ns, vmName)}: HTTP ${res.status}: ${res.body.slice(0, 400)}`);
    }
  }

  /**
   * Waits until a running VMI has no migration in progress and no MigrationRequired condition: a NIC change issued
   * while an earlier one's migration is still pending was seen to wait for a migration KubeVirt never started.
   */
  async #settled(ns: string, vmName: string, opts: WaitOptions): Promise<void> {
    if (!(await this.getVMI(ns, vmName))) return;
    await waitFor(
      `VMI ${ns}/${vmName} to settle (no migration in progress or required)`,
      async () => {
        const v = await this.getVMI(ns, vmName);
        if (!v) return true;
        const required = v.status?.conditions?.some((c) => c.type === 'MigrationRequired' && c.status === 'True');
        return !isMigrationInProgress(v.status?.migrationState) && !required;
      },
      { ...opts, timeoutMs: Math.max(opts.timeoutMs ?? 0, 120_000) },
    );
  }

  // -- waits ------------------------------------------------------------------------------------------------------

  waitForVM(ns: string, name: string, pred: (vm: Vm) => boolean = () => true, opts: WaitOptions & { what?: string } = {}): Promise<Vm> {
    return this.#until(opts.what ?? `VM ${ns}/${name}`, () => this.getVM(ns, name), pred, opts);
  }

  waitForVMGone(ns: string, name: string, opts: WaitOptions = {}): Promise<void> {
    return this.#gone(`VM ${ns}/${name}`, () => this.getVM(ns, name), opts);
  }

  waitForVMI(ns: string, name: string, pred: (vmi: Vmi) => boolean = () => true, opts: WaitOptions & { what?: string } = {}): Promise<Vmi> {
    return this.#until(opts.what ?? `VMI ${ns}/${name}`, () => this.getVMI(ns, name), pred, opts);
  }

  waitForVMIGone(ns: string, name: string, opts: WaitOptions = {}): Promise<void> {
    return this.#gone(`VMI ${ns}/${name}`, () => this.getVMI(ns, name), opts);
  }

  /**
   * A VMI in phase Running, not terminating, not migrating, with the launcher pod it runs in (listed in its
   * activePods), both as `pred` wants them.
   */
  waitForVMIRunning(ns: string, name: string, opts: WaitOptions & { pred?: (vmi: Vmi, pod: V1Pod) => boolean } = {}): Promise<{ vmi: Vmi; pod: V1Pod }> {
    const { pred = () => true } = opts;
    return waitFor(
      `VMI ${ns}/${name} to be running`,
      async () => {
        const vmi = await this.getVMI(ns, name);
        if (!vmi || vmi.metadata.deletionTimestamp || vmi.status?.phase !== 'Running' || isMigrationInProgress(vmi.status.migrationState)) return undefined;
        const pod = currentPod(vmi, await this.listLauncherPods(ns, name));
        return pod && vmi.status.activePods?.[pod.metadata!.uid!] !== undefined && pred(vmi, pod) ? { vmi, pod } : undefined;
      },
      opts,
    );
  }

  waitForPodGone(ns: string, name: string, opts: WaitOptions = {}): Promise<void> {
    return this.#gone(`pod ${ns}/${name}`, () => this.api.get(paths.pods(ns, name)), opts);
  }

  /** Waits for the pod to have finished (phase Succeeded or Failed): the source pod of a completed migration. */
  waitForPodCompleted(ns: string, name: string, opts: WaitOptions = {}): Promise<V1Pod> {
    const get = () => this.api.get<V1Pod>(paths.pods(ns, name));
    return this.#until(`pod ${ns}/${name} to complete`, get, (p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed', opts);
  }

  /** Waits until `get` returns an object `pred` holds for, and returns it. */
  #until<T>(what: string, get: () => Promise<T | undefined>, pred: (o: T) => boolean, opts: WaitOptions): Promise<T> {
    return waitFor(
      what,
      async () => {
        const o = await get();
        return o && pred(o) ? o : undefined;
      },
      opts,
    );
  }

  async #gone(what: string, get: () => Promise<unknown>, opts: WaitOptions): Promise<void> {
    await waitFor(`${what} to be gone`, async () => (await get()) === undefined, opts);
  }
}

/** The running, live launcher pod on the VMI's node. */
function currentPod(vmi: Vmi, pods: V1Pod[]): V1Pod | undefined {
  return pods.find((p) => p.spec?.nodeName === vmi.status?.nodeName && p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp);
}
