// The reconcilers of the KubeVirt stand-in (test infrastructure, see standin.ts): one for VirtualMachines (what
// virt-controller's VM controller does) and one for VirtualMachineInstances (what its VMI controller, the
// migration controller and virt-handler do, reduced to the API objects). Level-triggered: each pass reads the
// object, its VMI or pods afresh from the API server, takes at most one step, writes it with a precondition and
// asks to be run again; a pass that finds nothing to do writes nothing.
import { randomUUID } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { LAUNCHER_LABEL, LAUNCHER_LABEL_VALUE } from '../../src/claims/constants.ts';
import type { VmInterface, VmNetwork } from '../../src/kube/types.ts';
import { apiError, isAlreadyExists, isConflict, isNotFound, rvTest, type JsonPatchOp, type KubeApi } from './kube.ts';
import {
  FAKE_NODES,
  LEGACY_VMI_FINALIZER,
  VMI_FINALIZER,
  VM_CONTROLLER_FINALIZER,
  activePodsOf,
  controllerOf,
  currentPod,
  interfaceStatuses,
  isControlledBy,
  isFinalPhase,
  isMigrationInProgress,
  isTerminating,
  launcherPodName,
  needsPodReplacement,
  otherNode,
  podNode,
  renderLauncherPod,
  renderVmiFromVm,
  shouldRun,
  syncNetworks,
  vmStatus,
  type MigrationState,
  type Vm,
  type Vmi,
  type VmiCondition,
  type VmiStatus,
} from './render.ts';

export const LAUNCHER_SELECTOR = `${LAUNCHER_LABEL}=${LAUNCHER_LABEL_VALUE}`;
const ORPHAN_FINALIZER = 'orphan';

export interface ControllerOptions {
  /** Replace the launcher pod (a migration) when the VMI's interfaces change, as KubeVirt does for NIC hotplug. */
  migrateOnInterfaceChange: boolean;
}

/** Thrown by a step to say "the world moved, run me again" (retried like a conflict). */
export class Requeue extends Error {}

/** Errors that are part of normal operation (lost races): retried quietly. */
export const isExpectedRace = (err: unknown): boolean => err instanceof Requeue || isConflict(err);

export class Controllers {
  readonly #api: KubeApi;
  readonly #log: Logger;
  readonly #opts: ControllerOptions;
  readonly #requeue: (key: string) => void;

  constructor(api: KubeApi, log: Logger, opts: ControllerOptions, requeue: (key: string) => void) {
    this.#api = api;
    this.#log = log;
    this.#opts = opts;
    this.#requeue = requeue;
  }

  static vmKey = (ns: string, name: string): string => `vm/${ns}/${name}`;
  static vmiKey = (ns: string, name: string): string => `vmi/${ns}/${name}`;

  /** Runs one pass for a queue key (`vm/<ns>/<name>` or `vmi/<ns>/<name>`). */
  async reconcile(key: string): Promise<void> {
    const [kind, ns, name] = key.split('/') as [string, string, string];
    if (kind === 'vm') await this.#reconcileVM(ns, name);
    else if (kind === 'vmi') await this.#reconcileVMI(ns, name);
  }

  // -------------------------------------------------------------------------------------------------------------
  // VirtualMachine

  async #reconcileVM(ns: string, name: string): Promise<void> {
    let vm = (await this.#api.vms.get(ns, name)) as Vm | undefined;
    if (!vm) return;
    const log = this.#log.child({ vm: `${ns}/${name}` });
    const found = (await this.#api.vmis.get(ns, name)) as Vmi | undefined;
    const vmi = found && isControlledBy(found.metadata, vm.metadata.uid) ? found : undefined;
    if (found && !vmi) {
      // A VMI of this name that this VM does not control: an earlier VM's on its way out, or a standalone VMI.
      // KubeVirt would adopt an orphan; the stand-in only waits for it to go.
      log.debug({ vmiUid: found.metadata.uid }, 'a VMI of the same name is not controlled by this VM; waiting');
    }

    if (vm.metadata.deletionTimestamp) {
      if (vmi) {
        const orphaning = vm.metadata.finalizers?.includes(ORPHAN_FINALIZER) ?? false;
        if (!orphaning && !vmi.metadata.deletionTimestamp) {
          log.info('VM is being deleted: deleting its VMI');
          await this.#api.vmis.delete(ns, name, { uid: vmi.metadata.uid! });
        }
        if (isFinalPhase(vmi.status?.phase)) await this.#removeFinalizers('vmi', vmi, [VM_CONTROLLER_FINALIZER]);
        await this.#writeVmStatus(vm, vmi);
        return; // the VMI's own events bring us back
      }
      await this.#writeVmStatus(vm, undefined);
      if (vm.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER)) {
        log.info('VMI is gone: removing the VM finalizer');
        await this.#removeFinalizers('vm', vm, [VM_CONTROLLER_FINALIZER]);
      }
      return;
    }

    if (!vm.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER)) {
      vm = await this.#api.vms.patch(ns, name, [
        ...rvTest(vm),
        { op: 'add', path: '/metadata/finalizers', value: [...(vm.metadata.finalizers ?? []), VM_CONTROLLER_FINALIZER] },
      ]) as Vm;
    }

    const run = shouldRun(vm, vmi);
    if (vmi) {
      const final = isFinalPhase(vmi.status?.phase);
      // virt-controller lets go of a VMI that is final, once it recorded what it needs from it
      if (final) await this.#removeFinalizers('vmi', vmi, [VM_CONTROLLER_FINALIZER]);
      if (!vmi.metadata.deletionTimestamp) {
        if (run === false) {
          log.info('VM should not run: deleting its VMI');
          await this.#api.vmis.delete(ns, name, { uid: vmi.metadata.uid! });
        } else if (run === true && final) {
          log.info({ phase: vmi.status?.phase }, 'VMI is final and the VM should run: deleting it to start a new one');
          await this.#api.vmis.delete(ns, name, { uid: vmi.metadata.uid! });
        } else if (!final) {
          vm = await this.#syncNetworks(vm, vmi, log);
        }
      }
    } else if (!found && run === true) {
      log.info('VM should run: creating its VMI');
      try {
        await this.#api.vmis.create(ns, renderVmiFromVm(vm));
      } catch (err) {
        if (isAlreadyExists(err)) throw new Requeue('VMI appeared meanwhile');
        throw err;
      }
      this.#requeue(Controllers.vmKey(ns, name));
    }
    await this.#writeVmStatus(vm, vmi);
  }

  /** NIC hotplug / hot-unplug: VM template → VMI spec, and detached absent interfaces out of both. */
  async #syncNetworks(vm: Vm, vmi: Vmi, log: Logger): Promise<Vm> {
    const change = syncNetworks(vm, vmi);
    if (change.vmi) {
      log.info({ networks: change.vmi.networks.map((n) => n.name) }, 'updating the VMI networks from the VM');
      await this.#api.vmis.patch(vmi.metadata.namespace!, vmi.metadata.name, [
        ...rvTest(vmi),
        ...networkOps('/spec', vmi.spec as Record<string, unknown> | undefined, change.vmi.networks, change.vmi.interfaces),
      ]);
    }
    if (change.vm) {
      log.info({ networks: change.vm.networks.map((n) => n.name) }, 'removing unplugged interfaces from the VM');
      return (await this.#api.vms.patch(vm.metadata.namespace!, vm.metadata.name, [
        ...rvTest(vm),
        ...networkOps('/spec/template/spec', vm.spec?.template?.spec as Record<string, unknown> | undefined, change.vm.networks, change.vm.interfaces),
      ])) as Vm;
    }
    return vm;
  }

  async #writeVmStatus(vm: Vm, vmi: Vmi | undefined): Promise<void> {
    const want = vmStatus(vm, vmi);
    const have = vm.status ?? {};
    if (want.printableStatus === have.printableStatus && want.ready === have.ready && want.created === have.created) return;
    const ops: JsonPatchOp[] = vm.status
      ? [
          { op: 'add', path: '/status/printableStatus', value: want.printableStatus },
          { op: 'add', path: '/status/ready', value: want.ready },
          { op: 'add', path: '/status/created', value: want.created },
        ]
      : [{ op: 'add', path: '/status', value: want }];
    try {
      await this.#api.vms.patchStatus(vm.metadata.namespace!, vm.metadata.name, ops);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // VirtualMachineInstance

  async #reconcileVMI(ns: string, name: string): Promise<void> {
    let vmi = (await this.#api.vmis.get(ns, name)) as Vmi | undefined;
    if (!vmi) return;
    const key = Controllers.vmiKey(ns, name);
    const log = this.#log.child({ vmi: `${ns}/${name}` });
    const pods = (await this.#api.listPods(ns, LAUNCHER_SELECTOR)).filter((p) => isControlledBy(p.metadata, vmi!.metadata.uid));
    const phase = vmi.status?.phase ?? '';

    if (vmi.metadata.deletionTimestamp || isFinalPhase(phase)) {
      await this.#finalizeVMI(vmi, pods, log);
      return;
    }

    if (!vmi.metadata.finalizers?.some((f) => f === VMI_FINALIZER || f === LEGACY_VMI_FINALIZER)) {
      // KubeVirt's admission webhook puts it on every VMI at creation; standalone VMIs made by tests get it here
      vmi = (await this.#api.vmis.patch(ns, name, [
        ...rvTest(vmi),
        { op: 'add', path: '/metadata/finalizers', value: [...(vmi.metadata.finalizers ?? []), VMI_FINALIZER] },
      ])) as Vmi;
    }

    const live = pods.filter((p) => !isTerminating(p));
    if (phase === '' || phase === 'Pending' || phase === 'Scheduling') {
      if (live.length === 0) {
        if (phase === 'Scheduling' && Object.keys(vmi.status?.activePods ?? {}).length > 0) {
          log.warn('launcher pod disappeared while scheduling: VMI failed');
          await this.#writeVmiStatus(vmi, { phase: 'Failed', activePods: activePodsOf(pods) }, key);
          return;
        }
        const pod = await this.#createLauncherPod(vmi, 'launcher', FAKE_NODES[0], undefined, log);
        await this.#writeVmiStatus(vmi, { phase: 'Scheduling', activePods: activePodsOf([...pods, pod]) }, key);
        return;
      }
      if (phase !== 'Scheduling') {
        await this.#writeVmiStatus(vmi, { phase: 'Scheduling', activePods: activePodsOf(pods) }, key);
        return;
      }
      const pod = currentPod(vmi, pods)!;
      log.info({ pod: pod.metadata?.name }, 'launcher pod is up: VMI running');
      await this.#writeVmiStatus(vmi, this.#runningStatus(vmi, pods, pod), key);
      return;
    }

    const ms = vmi.status?.migrationState;
    if (isMigrationInProgress(ms)) {
      await this.#migrationStep(vmi, pods, ms!, log);
      return;
    }
    const pod = currentPod(vmi, pods);
    if (!pod) {
      log.warn('launcher pod disappeared: VMI failed');
      await this.#writeVmiStatus(vmi, { phase: 'Failed', activePods: activePodsOf(pods), conditions: readyCondition(vmi, false) }, key);
      return;
    }
    if (this.#opts.migrateOnInterfaceChange && needsPodReplacement(vmi, pod)) {
      const migrationUid = randomUUID();
      log.info({ migrationUid }, 'VMI interfaces changed: migrating to a new launcher pod');
      await this.#writeVmiStatus(vmi, { migrationState: { migrationUid, startTimestamp: now(), mode: 'PreCopy', completed: false } }, key);
      return;
    }
    await this.#writeVmiStatus(vmi, this.#runningStatus(vmi, pods, pod), key);
  }

  #runningStatus(vmi: Vmi, pods: V1Pod[], pod: V1Pod): VmiStatus {
    return {
      phase: 'Running',
      activePods: activePodsOf(pods),
      nodeName: podNode(pod),
      interfaces: interfaceStatuses(vmi, pod),
      conditions: readyCondition(vmi, true),
    };
  }

  /**
   * One step of a live migration, as seen at the API level: make the target pod (same networks annotation, from
   * the VMI spec as it is now); once activePods lists both pods, delete the source; once the source is gone, mark
   * the migration completed with only the target in activePods.
   */
  async #migrationStep(vmi: Vmi, pods: V1Pod[], ms: MigrationState, log: Logger): Promise<void> {
    const key = Controllers.vmiKey(vmi.metadata.namespace!, vmi.metadata.name);
    const targetName = launcherPodName(vmi.metadata.name, vmi.metadata.uid!, `migration/${ms.migrationUid}`);
    const target = pods.find((p) => p.metadata?.name === targetName);
    const source = ms.sourcePod
      ? pods.find((p) => p.metadata?.name === ms.sourcePod)
      : currentPod(vmi, pods.filter((p) => p.metadata?.name !== targetName));
    const state: MigrationState = {
      ...ms,
      sourcePod: ms.sourcePod ?? source?.metadata?.name,
      sourceNode: ms.sourceNode ?? (source ? podNode(source) : undefined),
    };
    state.targetNode = ms.targetNode ?? otherNode(state.sourceNode);
    if (!target || isTerminating(target)) {
      if (ms.targetPod) {
        log.warn({ migrationUid: ms.migrationUid, targetPod: targetName }, 'migration target pod is gone: migration failed');
        await this.#writeVmiStatus(vmi, { activePods: activePodsOf(pods), migrationState: { ...state, failed: true, endTimestamp: now() } }, key);
        return;
      }
      log.info({ migrationUid: ms.migrationUid, sourcePod: state.sourcePod, targetPod: targetName }, 'migration: creating the target pod');
      const created = await this.#createLauncherPod(vmi, `migration/${ms.migrationUid}`, state.targetNode, ms.migrationUid, log);
      await this.#writeVmiStatus(vmi, { activePods: activePodsOf([...pods, created]), migrationState: { ...state, targetPod: targetName } }, key);
      return;
    }
    const targetUid = target.metadata!.uid!;
    if (vmi.status?.activePods?.[targetUid] === undefined || ms.targetPod !== targetName) {
      await this.#writeVmiStatus(vmi, { activePods: activePodsOf(pods), migrationState: { ...state, targetPod: targetName } }, key);
      return;
    }
    const others = pods.filter((p) => p.metadata?.uid !== targetUid);
    if (others.length > 0) {
      for (const p of others) {
        if (isTerminating(p)) continue;
        log.info({ migrationUid: ms.migrationUid, pod: p.metadata?.name }, 'migration: target is up, deleting the source pod');
        await this.#api.deletePod(p.metadata!.namespace!, p.metadata!.name!, p.metadata!.uid!);
      }
      await this.#writeVmiStatus(vmi, { activePods: activePodsOf(pods) }, key);
      return; // the pods' deletion events bring us back
    }
    log.info({ migrationUid: ms.migrationUid, targetPod: targetName }, 'migration completed');
    await this.#writeVmiStatus(
      vmi,
      {
        ...this.#runningStatus(vmi, [target], target),
        migrationState: { ...state, targetPod: targetName, completed: true, endTimestamp: now() },
      },
      key,
    );
  }

  /**
   * A VMI being deleted, or final: its pods are deleted; activePods keeps every pod until it is gone from the API;
   * then the phase is final (Succeeded for a deletion) with no active pods, and only after that status is written
   * do the finalizers go (KubeVirt's order: the VMI finalizer once final and pod-less; the VM controller's once the
   * VMI is final, here too when there is no owning VM any more).
   */
  async #finalizeVMI(vmi: Vmi, pods: V1Pod[], log: Logger): Promise<void> {
    const key = Controllers.vmiKey(vmi.metadata.namespace!, vmi.metadata.name);
    if (pods.length > 0) {
      for (const p of pods) {
        if (isTerminating(p)) continue;
        log.info({ pod: p.metadata?.name }, 'VMI is going away: deleting its launcher pod');
        await this.#api.deletePod(p.metadata!.namespace!, p.metadata!.name!, p.metadata!.uid!);
      }
      await this.#writeVmiStatus(vmi, { activePods: activePodsOf(pods) }, key);
      return; // the pods' deletion events bring us back
    }
    const phase = isFinalPhase(vmi.status?.phase) ? vmi.status!.phase! : 'Succeeded';
    const status: VmiStatus = { phase, conditions: readyCondition(vmi, false) };
    if (vmi.status?.activePods !== undefined) status.activePods = {};
    if (await this.#writeVmiStatus(vmi, status, key)) return; // finalizers on the next pass, once this is visible

    const remove = [VMI_FINALIZER, LEGACY_VMI_FINALIZER];
    const owner = controllerOf(vmi.metadata);
    if (vmi.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER)) {
      let ownerVmExists = false;
      if (owner?.kind === 'VirtualMachine') {
        const vm = await this.#api.vms.get(vmi.metadata.namespace!, owner.name);
        ownerVmExists = !!vm && vm.metadata.uid === owner.uid;
      }
      if (!ownerVmExists) remove.push(VM_CONTROLLER_FINALIZER);
    }
    if (remove.some((f) => vmi.metadata.finalizers?.includes(f))) {
      log.info({ phase }, 'VMI is final and has no pods: removing its finalizers');
      await this.#removeFinalizers('vmi', vmi, remove);
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Writes

  async #createLauncherPod(vmi: Vmi, purpose: string, node: string, migrationUid: string | undefined, log: Logger): Promise<V1Pod> {
    const name = launcherPodName(vmi.metadata.name, vmi.metadata.uid!, purpose);
    const ns = vmi.metadata.namespace!;
    try {
      const pod = await this.#api.createPod(ns, renderLauncherPod(vmi, { name, node, ...(migrationUid ? { migrationUid } : {}) }));
      log.info({ pod: name, node }, 'launcher pod created');
      return pod;
    } catch (err) {
      if (isAlreadyExists(err)) {
        const existing = await this.#api.getPod(ns, name);
        if (existing && isControlledBy(existing.metadata, vmi.metadata.uid)) return existing;
        throw new Requeue(`pod ${name} exists but is not this VMI's`);
      }
      const e = apiError(err);
      throw new Error(`creating launcher pod ${ns}/${name}: HTTP ${e.code} ${e.reason}: ${e.message}`);
    }
  }

  /**
   * Merges `patch` into the VMI's status and writes it when it changes anything, conditional on the VMI's
   * resourceVersion. Returns whether it wrote (and then asks for another pass).
   */
  async #writeVmiStatus(vmi: Vmi, patch: VmiStatus, key: string): Promise<boolean> {
    const next: VmiStatus = { ...(vmi.status ?? {}), ...patch };
    for (const k of Object.keys(next)) if (next[k] === undefined) delete next[k];
    if (canonicalJson(next) === canonicalJson(vmi.status ?? {})) return false;
    await this.#api.vmis.patchStatus(vmi.metadata.namespace!, vmi.metadata.name, [...rvTest(vmi), { op: 'add', path: '/status', value: next }]);
    this.#requeue(key);
    return true;
  }

  async #removeFinalizers(kind: 'vm' | 'vmi', obj: Vm | Vmi, finalizers: string[]): Promise<void> {
    const current = obj.metadata.finalizers ?? [];
    const kept = current.filter((f) => !finalizers.includes(f));
    if (kept.length === current.length) return;
    const client = kind === 'vm' ? this.#api.vms : this.#api.vmis;
    try {
      await client.patch(obj.metadata.namespace!, obj.metadata.name, [...rvTest(obj), { op: 'replace', path: '/metadata/finalizers', value: kept }]);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}

const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

/**
 * JSON with object keys sorted. The API server returns custom resources with their keys sorted, so comparing what
 * was read with what the stand-in computes must not depend on key order: otherwise every pass writes a status
 * that changes nothing and asks for another pass, for ever, for every running VMI.
 */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** The VMI's Ready condition, keeping its transition time when the status does not change. */
function readyCondition(vmi: Vmi, ready: boolean): VmiCondition[] {
  const others = (vmi.status?.conditions ?? []).filter((c) => c.type !== 'Ready');
  const prev = vmi.status?.conditions?.find((c) => c.type === 'Ready');
  const status = ready ? 'True' : 'False';
  const cond: VmiCondition =
    prev && prev.status === status ? prev : { type: 'Ready', status, lastProbeTime: null, lastTransitionTime: now() };
  return [...others, cond];
}

/**
 * JSON-patch operations that set `networks` and `domain.devices.interfaces` under `prefix` (a VMI spec or a VM
 * template spec), creating the parents that are missing.
 */
export function networkOps(prefix: string, spec: Record<string, unknown> | undefined, networks: VmNetwork[], interfaces: VmInterface[]): JsonPatchOp[] {
  if (!spec) return [{ op: 'add', path: prefix, value: { networks, domain: { devices: { interfaces } } } }];
  const ops: JsonPatchOp[] = [{ op: 'add', path: `${prefix}/networks`, value: networks }];
  const domain = spec['domain'] as Record<string, unknown> | undefined;
  if (!domain) ops.push({ op: 'add', path: `${prefix}/domain`, value: { devices: { interfaces } } });
  else if (!domain['devices']) ops.push({ op: 'add', path: `${prefix}/domain/devices`, value: { interfaces } });
  else ops.push({ op: 'add', path: `${prefix}/domain/devices/interfaces`, value: interfaces });
  return ops;
}
