// Objects and checks the cases share: NADs, VMs, what a correct claim looks like (computed here from the spec, not
// with the controller's own functions), waits, and the bounded "nothing happens" window.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import { buildVM, podInterfaceName, type Vm, type Vmi, type VMNetworkRequest } from '../kubevirt/launcher-fixture.ts';
import { waitFor } from '../kubevirt/virtctl.ts';
import type { ControllerProcess, LogLine } from '../local/controller-process.ts';
import { SHARED_RESYNC_PERIOD_S, type CaseContext, type SuiteEnv } from './env.ts';
import { eventsFor, paths, WatchLog, type CoreEvent, type IPAMClaim, type KubeObject, type NetworkAttachmentDefinition } from './kube.ts';

/** Spec §3. Written out here (not imported from src/) so that the suite checks the controller against the spec. */
export const CLAIM_FINALIZER = 'kubevirt.io/persistent-ipam';
export const VM_LABEL = 'kubevirt.io/vm';
/** A finalizer of "someone else" (another controller, an admin): the controller must leave it alone. */
export const FOREIGN_FINALIZER = 'e2e.persistent-ips.test/hold';

export { podInterfaceName as expectedPodInterface };

/**
 * How long a case watches for something that must NOT happen (a write, a claim), after the controller had every
 * chance to see the change that would cause it. On this otherwise idle cluster the controller turns a watch event
 * into a write in well under a second (the cases that wait for a claim see it within a few hundred milliseconds),
 * and the shared controller also runs a full resync every SHARED_RESYNC_PERIOD_S = 2 s; 4 s is more than ten
 * reaction times and two resyncs, so a write that was going to happen would be seen. Longer only slows the suite.
 */
export const QUIET_WINDOW_MS = 4_000;

/** Deadline for things that must happen (claims created, finalizers released, GC): generous for 2 busy cores. */
export const EVENTUALLY_MS = 30_000;

export interface NadOptions {
  /** The CNI network name (`name` in the config): what a claim's spec.network must say. */
  network: string;
  topology?: string;
  subnets?: string;
  allowPersistentIPs?: boolean;
  role?: string;
}

/** An OVN-Kubernetes style CNI config, as the JSON text Multus stores in spec.config. */
export function nadConfig(namespace: string, nadName: string, o: NadOptions): string {
  return JSON.stringify({
    cniVersion: '0.4.0',
    name: o.network,
    type: 'ovn-k8s-cni-overlay',
    topology: o.topology ?? 'layer2',
    ...(o.topology === 'localnet' && o.subnets === undefined ? {} : { subnets: o.subnets ?? '10.200.0.0/24' }),
    netAttachDefName: `${namespace}/${nadName}`,
    ...(o.role ? { role: o.role } : {}),
    ...(o.allowPersistentIPs === false ? {} : { allowPersistentIPs: true }),
  });
}

/** Creates a NAD with `config` as its spec.config (a string, possibly invalid or empty, as users write them). */
export async function createNad(env: Pick<SuiteEnv, 'api'>, namespace: string, name: string, config: string): Promise<NetworkAttachmentDefinition> {
  return env.api.create<NetworkAttachmentDefinition>(paths.nads(namespace), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace },
    spec: { config },
  });
}

export async function createPersistentNad(env: Pick<SuiteEnv, 'api'>, namespace: string, name: string, o: NadOptions): Promise<NetworkAttachmentDefinition> {
  return createNad(env, namespace, name, nadConfig(namespace, name, o));
}

/** The persistent NADs most cases use, by network: nad-red (network red) and nad-blue (network blue, subnet of its own). */
const NADS = { red: { network: 'red' }, blue: { network: 'blue', subnets: '10.201.0.0/24' } } as const;
/** A VM's networks on those NADs. */
export const RED: VMNetworkRequest = { name: 'red', nadName: 'nad-red' };
export const BLUE: VMNetworkRequest = { name: 'blue', nadName: 'nad-blue' };

/** A fresh namespace for case `c` with the persistent NADs of `networks` (nad-red, nad-blue). */
export async function nadNamespace(c: CaseContext, slug: string, ...networks: (keyof typeof NADS)[]): Promise<string> {
  const ns = await c.namespace(slug);
  for (const n of networks) await createPersistentNad(c.world, ns, `nad-${n}`, NADS[n]);
  return ns;
}

/** Replaces a NAD's spec.config. */
export async function setNadConfig(env: SuiteEnv, namespace: string, name: string, config: string): Promise<void> {
  await env.api.mergePatch(paths.nads(namespace, name), { spec: { config } });
}

export async function createVM(env: SuiteEnv, namespace: string, name: string, networks: VMNetworkRequest[], running = true): Promise<Vm> {
  return env.kv.createVM(buildVM({ namespace, name, networks, running }));
}

/** Creates a VM and waits for its VMI to run in a launcher pod. */
export async function createRunningVM(env: SuiteEnv, namespace: string, name: string, networks: VMNetworkRequest[]): Promise<{ vm: Vm; vmi: Vmi; pod: V1Pod }> {
  const vm = await createVM(env, namespace, name, networks);
  const { vmi, pod } = await env.kv.waitForVMIRunning(namespace, name, { timeoutMs: EVENTUALLY_MS });
  return { vm, vmi, pod };
}

export interface ExpectedOwner {
  kind: 'VirtualMachine' | 'VirtualMachineInstance';
  name: string;
  uid: string;
}

export const ownerOf = (o: { kind?: string; metadata: { name: string; uid?: string } }, kind: ExpectedOwner['kind']): ExpectedOwner => ({
  kind,
  name: o.metadata.name,
  uid: o.metadata.uid!,
});

/**
 * A claim as spec §3 wants it: owned by `owner` (controller, blockOwnerDeletion, uid), our finalizer, the
 * `kubevirt.io/vm` label, spec.network = the NAD config's `name`, spec.interface = KubeVirt's pod interface name.
 */
export function assertClaim(claim: IPAMClaim | undefined, owner: ExpectedOwner, logicalNetwork: string, cniNetwork: string): asserts claim is IPAMClaim {
  assert.ok(claim, `claim of network ${logicalNetwork} exists`);
  const where = `IPAMClaim ${claim.metadata.namespace}/${claim.metadata.name}`;
  assert.equal(claim.metadata.name, `${owner.name}.${logicalNetwork}`, `${where}: name <vm>.<network>`);
  assert.deepEqual(
    claim.metadata.ownerReferences,
    [{ apiVersion: 'kubevirt.io/v1', kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: true }],
    `${where}: owner reference`,
  );
  assert.deepEqual(claim.metadata.finalizers, [CLAIM_FINALIZER], `${where}: finalizer`);
  assert.equal(claim.metadata.labels?.[VM_LABEL], owner.name, `${where}: label ${VM_LABEL}`);
  assert.deepEqual(claim.spec, { network: cniNetwork, interface: podInterfaceName(logicalNetwork) }, `${where}: spec`);
  assert.equal(claim.metadata.deletionTimestamp, undefined, `${where}: not terminating`);
}

/** Waits until every claim in `names` exists (not terminating) and returns them by name. */
export async function waitForClaims(
  env: Pick<SuiteEnv, 'api'>,
  namespace: string,
  names: string[],
  timeoutMs = EVENTUALLY_MS,
): Promise<Map<string, IPAMClaim>> {
  return waitFor(
    `IPAMClaims ${names.join(', ')} in ${namespace}`,
    async () => {
      const claims = new Map((await env.api.claims(namespace)).map((c) => [c.metadata.name, c]));
      return names.every((n) => claims.get(n) && !claims.get(n)!.metadata.deletionTimestamp) ? claims : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

export async function waitForClaimGone(env: SuiteEnv, namespace: string, name: string, timeoutMs = EVENTUALLY_MS): Promise<void> {
  await waitFor(`IPAMClaim ${namespace}/${name} to be gone`, async () => (await env.api.claim(namespace, name)) === undefined, { timeoutMs, intervalMs: 100 });
}

/** What the IPAM plugin does: records the addresses in status.ips, through the status subresource. */
export async function writeClaimIps(env: SuiteEnv, namespace: string, name: string, ips: string[]): Promise<IPAMClaim> {
  return env.api.mergePatch<IPAMClaim>(`${paths.claims(namespace, name)}/status`, { status: { ips } });
}

/** Waits for an Event with `reason` about the object `uid`, and returns all of them. */
export async function waitForEvent(env: SuiteEnv, namespace: string, uid: string, reason: string, timeoutMs = EVENTUALLY_MS): Promise<CoreEvent[]> {
  return waitFor(
    `a ${reason} Event on ${uid} in ${namespace}`,
    async () => {
      const events = await eventsFor(env.cp, namespace, uid, reason);
      return events.length > 0 ? events : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/**
 * Watches a collection for QUIET_WINDOW_MS (or `windowMs`) and fails if anything in it changed. `seen`: objects the
 * caller already read from the API; their changes up to that read may still be on their way through the watch (a
 * loaded machine delays it), so only later resourceVersions count.
 */
export async function assertQuiet<T extends KubeObject>(log: WatchLog<T>, what: string, windowMs = QUIET_WINDOW_MS, seen: KubeObject[] = []): Promise<void> {
  const before = log.events.length;
  const seenRv = Math.max(0, ...seen.map((o) => Number(o.metadata.resourceVersion ?? 0)));
  await sleep(windowMs); // a bounded observation window, see QUIET_WINDOW_MS
  log.check();
  const changes = log.events
    .slice(before)
    .filter((e) => e.rv > seenRv)
    .map((e) => `${e.type} ${e.obj.metadata.name} rv=${e.rv}`);
  assert.deepEqual(changes, [], `${what}: no change expected during ${windowMs} ms`);
}

export const hasOurFinalizer = (o: KubeObject): boolean => o.metadata.finalizers?.includes(CLAIM_FINALIZER) ?? false;

// The ordering checks over recorded events live in ordering.ts (pure, unit-tested); re-exported for the cases.
export { backgroundDeletionViolations, deletedRv, deletionStartRv, finalizerReleaseRv, firstRv, waitForDeletedEvents } from './ordering.ts';

/** Starts watch logs, and stops them when the case ends. */
export async function watchLog<T extends KubeObject>(c: CaseContext, path: string): Promise<WatchLog<T>> {
  const log = await WatchLog.start<T>(c.world.api, path);
  c.t.after(() => log.stop());
  return log;
}

/** Waits until `ctl` has logged `n` full resync passes after log index `from` (the shared controller: every 2 s). */
export async function waitForResyncs(ctl: ControllerProcess, n: number, from: number): Promise<void> {
  // the claims controller's resync line has no `component` (other components, e.g. the allocator, log their own)
  const isClaimsResync = (l: LogLine) => l.msg === 'resync' && l['component'] === undefined;
  await waitFor(`${n} resync passes of controller ${ctl.name}`, async () => ctl.logsMatching(isClaimsResync, from).length >= n, {
    timeoutMs: (n + 2) * SHARED_RESYNC_PERIOD_S * 1000 + 10_000,
    intervalMs: 100,
  });
}
