// `persistent-ips status`: per namespace (or one VM), each VM's networks with their claim, addresses, condition and
// owner, as a table a person reads at a glance, or JSON for scripts. Read-only: four list calls, no cache, no
// controller needed (it shows what the cluster holds, whoever wrote it).
//
// The joining rules are pure (buildStatus), so they are tested without a cluster.

import { keyString } from '../kube/key.ts';
import { allocatorServes } from '../claims/nad-config.ts';
import { CONDITION_TYPE } from '../allocator/plan.ts';
import { trimNetworkAttachmentDefinition } from '../sources/trim.ts';
import { persistentNetworks } from '../claims/decide.ts';
import { controllerRef, kubevirtOwner, nadKeyOfNetworkName, type NetworkVerdict } from '../claims/index.ts';
import { KubeClient } from '../kube/client.ts';
import { ClusterUnreachableError } from '../kube/load-kubeconfig.ts';
import { KubeApiError, isForbidden, isUnauthorized } from '../kube/errors.ts';
import { resources } from '../kube/resources.ts';
import type { IPAMClaim, KubeVirtCR, NetworkAttachmentDefinition, VirtualMachine, VirtualMachineInstance, VmiSpecLike } from '../kube/types.ts';
import type { KubeObject, VmNetwork } from '../kube/types.ts';
import { trimIPAMClaim, trimKubeVirt, trimVirtualMachine, trimVirtualMachineInstance } from '../sources/trim.ts';
import { describeGate, resolveGate, type GateState } from '../controller/feature-gate.ts';
import { NAD_PERSISTENT_IPS_ANNOTATION } from '../claims/constants.ts';
import { CliError, EXIT } from './exit-codes.ts';
import { loadKubeConfigOrExplain } from './kubeconfig.ts';
import { networksOf, renderNetworks, renderNetworksJson } from './status-networks.ts';
import { textTable } from './table.ts';

export interface StatusRow {
  namespace: string;
  /** The VM (or standalone VMI) name; empty for a claim no VM or VMI uses. */
  vm: string;
  kind: 'VirtualMachine' | 'VirtualMachineInstance' | '';
  /** VM printableStatus, or the standalone VMI's phase. */
  vmStatus: string;
  /** The logical network (VM network `name`); empty for an unused claim. */
  network: string;
  /** `namespace/name` of the NAD, or `(pod network)`. */
  nad: string;
  /** The built-in allocator serves the NAD (it opts in and is not OVN-Kubernetes', which the allocator refuses). */
  allocator: boolean;
  persistent: boolean;
  claim?: string;
  ips: string[];
  condition?: { status: string; reason?: string; message?: string };
  /** The pod the IPAM plugin allocated the addresses for (the claim's `status.ownerPod`, as OVN-Kubernetes writes it). */
  ownerPod?: string;
  /** What blocks persistence, or what is odd about the claim. */
  problem?: { reason: string; message: string };
  /** The claim's owner, e.g. `VirtualMachine vm1`. */
  owner?: string;
  /** The owner is this VM (same uid). */
  ownerMatches?: boolean;
}

export interface StatusInput {
  /** The KubeVirt CRs, for the PersistentIPs gate; undefined when they could not be read. */
  kubeVirts?: readonly KubeVirtCR[] | undefined;
  vms: readonly VirtualMachine[];
  vmis: readonly VirtualMachineInstance[];
  nads: readonly NetworkAttachmentDefinition[];
  claims: readonly IPAMClaim[];
}

/**
 * The PersistentIPs gate as the controller sees it without a --feature-gates override (which status cannot see):
 * undefined when the KubeVirt CRs could not be read.
 */
export function gateOf(input: Pick<StatusInput, 'kubeVirts'>): GateState | undefined {
  return input.kubeVirts === undefined ? undefined : resolveGate(undefined, input.kubeVirts);
}

/** One row per network of every VM and standalone VMI, plus one per claim that none of them uses. Sorted. */
export function buildStatus(input: StatusInput, filter: { vm?: string } = {}): StatusRow[] {
  const joined: Joined = { gate: gateOf(input), nads: byKey(input.nads), claims: byKey(input.claims), used: new Set<string>() };
  const rows = ownersOf(input, byKey(input.vmis))
    .filter((o) => filter.vm === undefined || o.name === filter.vm)
    .flatMap((o) => networkRows(o, joined));
  // After the networks: only then is it known which claims they use.
  rows.push(...unusedClaimRows(joined, filter));
  return rows.sort(
    (a, b) =>
      cmp(a.namespace, b.namespace) ||
      cmp(a.vm === '' ? '\uffff' : a.vm, b.vm === '' ? '\uffff' : b.vm) ||
      cmp(a.network, b.network) ||
      cmp(a.claim ?? '', b.claim ?? ''),
  );
}

/** What the rows are joined from: NADs and claims by `namespace/name`, and the claims some network uses. */
interface Joined {
  gate: GateState | undefined;
  nads: Map<string, NetworkAttachmentDefinition>;
  claims: Map<string, IPAMClaim>;
  used: Set<string>;
}

const byKey = <T extends KubeObject>(objects: readonly T[]): Map<string, T> => new Map(objects.map((o) => [keyString(o.metadata), o]));

/** What a row's networks belong to: a VM, or a VMI no VM controls. */
interface Owner {
  namespace: string;
  name: string;
  kind: StatusRow['kind'];
  uid: string | undefined;
  status: string;
  spec: VmiSpecLike | undefined;
}

function ownersOf(input: StatusInput, vmis: Map<string, VirtualMachineInstance>): Owner[] {
  const owner = (o: KubeObject, kind: Owner['kind'], status: string, spec: VmiSpecLike | undefined): Owner => {
    return { namespace: o.metadata.namespace ?? '', name: o.metadata.name, kind, uid: o.metadata.uid, status, spec };
  };
  const vmStatus = (vm: VirtualMachine): string => {
    const vmi = vmis.get(keyString({ namespace: vm.metadata.namespace ?? '', name: vm.metadata.name }));
    return vm.metadata.deletionTimestamp ? 'Terminating' : (vm.status?.printableStatus ?? (vmi ? (vmi.status?.phase ?? 'Pending') : 'Stopped'));
  };
  return [
    ...input.vms.map((vm) => owner(vm, 'VirtualMachine', vmStatus(vm), vm.spec?.template?.spec)),
    // A VMI no VM controls is an owner of its own.
    ...input.vmis
      .filter((vmi) => !controllerRef(vmi, 'VirtualMachine'))
      .map((vmi) => owner(vmi, 'VirtualMachineInstance', vmi.status?.phase ?? 'Pending', vmi.spec)),
  ];
}

/** The rows of one owner's networks, but the cluster default network when it is not kept persistent. */
function networkRows(o: Owner, joined: Joined): StatusRow[] {
  const { nads, claims } = joined;
  const claimNamed = (name: string) => claims.get(keyString({ namespace: o.namespace, name }));
  const verdicts = new Map(persistentNetworks({ namespace: o.namespace, name: o.name }, o.spec, nads, claimNamed).map((v) => [v.network, v]));
  const rows: StatusRow[] = [];
  for (const net of o.spec?.networks ?? []) {
    if (!net || typeof net.name !== 'string') continue;
    const verdict = verdicts.get(net.name);
    if (net.pod !== undefined && !verdict) continue; // the cluster default network: not ours to keep
    rows.push(networkRow(o, net, verdict, joined));
  }
  return rows;
}

function networkRow(o: Owner, net: VmNetwork, verdict: NetworkVerdict | undefined, joined: Joined): StatusRow {
  const { nads, claims } = joined;
  const ref = net.multus ? (nadKeyOfNetworkName(net.multus.networkName, o.namespace) ?? net.multus.networkName) : undefined;
  const row: StatusRow = {
    namespace: o.namespace,
    vm: o.name,
    kind: o.kind,
    vmStatus: o.status,
    network: net.name,
    nad: ref ?? '(pod network)',
    allocator: ref !== undefined && allocatorServes(nads.get(ref)),
    persistent: verdict?.claimSpec !== undefined,
    ips: [],
  };
  if (verdict?.problem) row.problem = { reason: verdict.problem.reason, message: verdict.problem.message };
  if (verdict) {
    row.claim = verdict.claim;
    const claimKey = keyString({ namespace: o.namespace, name: verdict.claim });
    const claim = claims.get(claimKey);
    if (claim) {
      joined.used.add(claimKey);
      describeClaim(row, claim, o.uid);
    } else if (!row.problem) {
      row.problem = missingClaim(verdict.claim, joined.gate);
    }
  } else if (ref !== undefined) {
    const nad = nads.get(ref);
    row.problem = nad
      ? {
          reason: 'NadNotPersistent',
          message: `NetworkAttachmentDefinition ${ref} does not allow persistent IPs ("allowPersistentIPs": true in its config, or the annotation ${NAD_PERSISTENT_IPS_ANNOTATION}: "true"): an ordinary network, no claim`,
        }
      : { reason: 'NetworkAttachmentDefinitionNotFound', message: `NetworkAttachmentDefinition ${ref} does not exist` };
  }
  return row;
}

/** A row for every claim no network uses (of the VM the filter names, when it names one). */
function unusedClaimRows(joined: Joined, filter: { vm?: string }): StatusRow[] {
  const rows: StatusRow[] = [];
  for (const [key, claim] of joined.claims) {
    if (joined.used.has(key)) continue;
    const ref = kubevirtOwner(claim);
    if (filter.vm !== undefined && ref?.name !== filter.vm) continue;
    const row: StatusRow = {
      namespace: claim.metadata.namespace ?? '',
      vm: '',
      kind: '',
      vmStatus: '',
      network: '',
      nad: claim.spec?.network ? `(network ${claim.spec.network})` : '',
      allocator: false,
      persistent: true,
      claim: claim.metadata.name,
      ips: [],
      problem: {
        reason: 'ClaimNotInUse',
        message: ref
          ? `no network of ${ref.kind} ${ref.name} uses this claim (left over, being deleted, or waiting for garbage collection)`
          : 'no VM or VMI owns this claim (made by hand?)',
      },
    };
    describeClaim(row, claim, undefined);
    rows.push(row);
  }
  return rows;
}

/** Why a claim that should exist does not: the gate first, because with it off nothing is created at all. */
function missingClaim(claim: string, gate: GateState | undefined): { reason: string; message: string } {
  if (gate && !gate.enabled) {
    return { reason: 'FeatureGateDisabled', message: `no IPAMClaim ${claim}: ${describeGate(gate)}` };
  }
  const gateNote = gate ? '' : ' (the KubeVirt CR could not be read: if the PersistentIPs gate is off, no claim is created)';
  return {
    reason: 'ClaimNotCreated',
    message: `IPAMClaim ${claim} does not exist yet: is the controller running and leading? Its log and the VM's Events say why${gateNote}`,
  };
}

function describeClaim(row: StatusRow, claim: IPAMClaim, ownerUid: string | undefined): void {
  row.ips = [...(claim.status?.ips ?? [])];
  const cond = claim.status?.conditions?.find((c) => c.type === CONDITION_TYPE);
  if (cond) {
    row.condition = { status: cond.status, ...(cond.reason ? { reason: cond.reason } : {}), ...(cond.message ? { message: cond.message } : {}) };
  }
  if (claim.status?.ownerPod?.name) row.ownerPod = claim.status.ownerPod.name;
  const ref = kubevirtOwner(claim);
  if (ref) {
    row.owner = `${ref.kind} ${ref.name}`;
    if (ownerUid !== undefined) row.ownerMatches = ref.uid === ownerUid;
  }
  if (claim.metadata.deletionTimestamp && !row.problem) row.problem = { reason: 'ClaimTerminating', message: 'the claim is being deleted' };
  if (!ref && row.vm !== '' && !row.problem) {
    row.problem = {
      reason: 'ClaimNotOwned',
      message: `IPAMClaim ${claim.metadata.name} exists without a VM or VMI owner (made by hand?); the controller never adopts it`,
    };
  }
  if (row.ownerMatches === false && !row.problem) {
    row.problem = {
      reason: 'ClaimOwnedByAnotherObject',
      message: `the claim belongs to another ${ref?.kind ?? 'object'} ${ref?.name ?? ''} (uid ${ref?.uid ?? '?'})`,
    };
  }
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** What the CONDITION column says, in a few words. */
export function stateOf(row: StatusRow): string {
  if (row.problem?.reason === 'NadNotPersistent') return 'not persistent';
  if (row.problem && !row.condition) return row.problem.reason;
  if (row.condition) {
    const word = row.condition.status === 'True' ? 'Allocated' : row.condition.status === 'False' ? 'NotAllocated' : 'Unknown';
    return row.condition.reason && row.condition.reason !== 'SuccessfulAllocation' ? `${word}: ${row.condition.reason}` : word;
  }
  if (!row.persistent) return 'not persistent';
  if (!row.claim) return '';
  if (row.ips.length > 0) return 'Recorded';
  return row.allocator ? 'Waiting for the allocator' : 'Waiting for the IPAM plugin';
}

/** The table, and below it the messages behind every row that is not fine. */
export function renderTable(rows: readonly StatusRow[], options: { showNamespace: boolean; gate?: GateState | undefined }): string {
  // First the gate, because with it off every other line is moot.
  const gate = options.gate ? describeGate(options.gate) : 'unknown (the KubeVirt CR could not be read)';
  const header = 'gate' in options ? `PersistentIPs feature gate: ${gate}\n\n` : '';
  if (rows.length === 0) return `${header}No VMs, VMIs or IPAMClaims found.\n`;
  const headers = [...(options.showNamespace ? ['NAMESPACE'] : []), 'VM', 'STATUS', 'NETWORK', 'NAD', 'CLAIM', 'ADDRESSES', 'CONDITION', 'OWNER'];
  const notes: string[] = [];
  let noted = 0;
  const lines = rows.map((row) => {
    const messages = [row.problem?.message, row.condition?.status === 'False' ? row.condition.message : undefined].filter((m): m is string => !!m);
    let state = stateOf(row);
    if (messages.length > 0) {
      noted++;
      const about = row.claim ? `IPAMClaim ${row.namespace}/${row.claim}` : `${row.kind} ${row.namespace}/${row.vm}`;
      notes.push(`[${noted}] ${about}: ${messages.join('; ')}`);
      state = `${state} [${noted}]`;
    }
    const owner = row.owner
      ? `${row.owner}${row.ownerMatches === false ? ' (another uid!)' : ''}`
      : row.claim && row.ips.length + (row.condition ? 1 : 0) > 0
        ? '(none)'
        : '';
    return [
      ...(options.showNamespace ? [row.namespace] : []),
      row.vm || '-',
      row.vmStatus || '-',
      row.network || '-',
      `${row.nad.startsWith(`${row.namespace}/`) ? row.nad.slice(row.namespace.length + 1) : row.nad}${row.allocator ? ' (allocator)' : ''}`,
      row.claim ?? '-',
      row.ips.length > 0 ? row.ips.join(',') : '-',
      state || '-',
      owner || '-',
    ];
  });
  return header + textTable(headers, lines, notes);
}

export function renderJson(rows: readonly StatusRow[], gate?: GateState): string {
  const featureGate = gate ? { name: 'PersistentIPs', enabled: gate.enabled, source: gate.source } : undefined;
  return `${JSON.stringify({ apiVersion: 'persistent-ips.kubevirt.io/v1', kind: 'StatusList', ...(featureGate ? { featureGate } : {}), items: rows }, null, 2)}\n`;
}

export interface StatusOptions {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  allNamespaces: boolean;
  vm?: string;
  /** One line per persistent network with its address space instead of one per VM network (status-networks.ts). */
  networks?: boolean;
  output: 'table' | 'json';
}

/** Lists what it needs and prints; resolves with the exit code. */
export async function status(options: StatusOptions, out: { write(text: string): unknown }): Promise<number> {
  const loaded = loadKubeConfigOrExplain(options, 'Tell persistent-ips which cluster to use: --kubeconfig PATH, or set KUBECONFIG.');
  const client = KubeClient.fromKubeConfig(loaded.connection, { timeoutMs: 30_000 });
  const namespace = options.allNamespaces ? undefined : (options.namespace ?? loaded.namespace ?? 'default');
  const list: Lister = async (r, trim, scope = namespace) => {
    try {
      const { items } = await client.listAll<unknown>(r, scope ? { namespace: scope } : {});
      return items.map(trim);
    } catch (err) {
      if (err instanceof KubeApiError && err.code === 404) return []; // e.g. KubeVirt not installed
      if (isUnauthorized(err)) throw new CliError(`the API server at ${loaded.server} rejected our credentials (401)`, EXIT.notAuthorized, { cause: err });
      if (isForbidden(err))
        throw new CliError(`not allowed to list ${r.plural}${scope ? ` in ${scope}` : ''}: ${(err as Error).message}`, EXIT.notAuthorized, {
          cause: err,
        });
      if (err instanceof KubeApiError && err.code === undefined)
        throw new CliError(new ClusterUnreachableError(loaded.server, { cause: err }).message, EXIT.clusterUnreachable, { cause: err });
      throw err;
    }
  };
  if (options.networks) return printNetworks(options.output, namespace, list, out);
  // The KubeVirt CR may live in a namespace the user cannot read: then the gate is shown as unknown.
  const kubeVirts = client.listAll<unknown>(resources.kubeVirts, {}).then(
    ({ items }) => items.map(trimKubeVirt),
    () => undefined,
  );
  const [vms, vmis, nads, claims] = await Promise.all([
    list(resources.virtualMachines, trimVirtualMachine),
    list(resources.virtualMachineInstances, trimVirtualMachineInstance),
    list(resources.networkAttachmentDefinitions, trimNetworkAttachmentDefinition),
    list(resources.ipamClaims, trimIPAMClaim),
  ]);
  const input: StatusInput = { kubeVirts: await kubeVirts, vms, vmis, nads, claims };
  const gate = gateOf(input);
  const rows = buildStatus(input, options.vm !== undefined ? { vm: options.vm } : {});
  if (options.output === 'json') out.write(renderJson(rows, gate));
  else {
    if (rows.length === 0 && options.vm !== undefined) {
      out.write(`No VM or VMI named ${options.vm}${namespace ? ` in namespace ${namespace}` : ''}.\n`);
      return EXIT.failure;
    }
    out.write(renderTable(rows, { showNamespace: namespace === undefined, gate }));
  }
  return EXIT.ok;
}

type Lister = <T>(r: (typeof resources)[keyof typeof resources], trim: (raw: unknown) => T, scope?: string) => Promise<T[]>;

/**
 * A network and its pool span namespaces (its NADs share one name), so its claims are listed in every namespace; a
 * user who may list them only in their own namespace sees that namespace's claims, and is told so.
 */
async function printNetworks(
  output: StatusOptions['output'],
  namespace: string | undefined,
  list: Lister,
  out: { write(text: string): unknown },
): Promise<number> {
  const notes: string[] = [];
  const everywhere: Lister = async (r, trim) => {
    try {
      return await list(r, trim, '');
    } catch (err) {
      // Only a refusal to list (403) narrows the view; rejected credentials (401) fail here as everywhere.
      if (namespace === undefined || !(err instanceof CliError) || !isForbidden(err.cause)) throw err;
      notes.push(`not allowed to list ${r.plural} in every namespace: the figures count only those of namespace ${namespace}`);
      return list(r, trim, namespace);
    }
  };
  const [nads, claims] = await Promise.all([
    everywhere(resources.networkAttachmentDefinitions, trimNetworkAttachmentDefinition),
    everywhere(resources.ipamClaims, trimIPAMClaim),
  ]);
  const figures = networksOf(nads, claims, namespace);
  out.write(output === 'json' ? renderNetworksJson(figures, notes) : renderNetworks(figures, notes));
  return EXIT.ok;
}
