// NODE STAND-IN: TEST INFRASTRUCTURE, NOT KUBEVIRT, NOT A KUBELET.
//
// The harness's control plane has no nodes. With real virt-controller creating VMIs and launcher pods, something
// must do what the node side of a KubeVirt cluster does, and only that; every VM- and VMI-level decision (which
// VMI, which pod with which annotations, when to delete, activePods, the phases virt-controller owns, migrations and
// their target pods, hotplug conditions) comes from the real virt-controller. What this does, each as the named
// component does it in a real cluster:
// - Nodes: two Node objects, Ready, labelled `kubevirt.io/schedulable=true`, with virt-handler's heartbeat
//   annotation `kubevirt.io/heartbeat` kept fresh (virt-controller's node controller fails the VMIs of a node whose
//   heartbeat is older than 5 minutes).
// - kube-scheduler: binds a pending launcher pod to a node (pods/binding); a migration target pod (label
//   `kubevirt.io/migrationJobUID`) to a node other than its VMI's.
// - kubelet: a bound launcher pod becomes Running with every container running and ready (virt-controller moves the
//   VMI to Scheduled once the `compute` container runs); a pod being deleted is stopped and removed (DELETE with
//   grace 0, as the kubelet does once the containers are gone); the source pod of a finished migration has its
//   containers exit (phase Succeeded; it stays, as in KubeVirt, until its VMI goes).
// - Multus: the `k8s.v1.cni.cncf.io/network-status` annotation of a running pod, one entry per element of its
//   `k8s.v1.cni.cncf.io/networks` annotation as admitted (the pod interface names come from there), plus the cluster
//   default network on eth0. virt-controller derives the `multus-status` part of the VMI's status.interfaces from it.
// - IPAM: with `ipam: 'ovn-kubernetes'` (the real-KubeVirt suite, where OVN-Kubernetes' cluster manager runs, see
//   ../ovn-kubernetes/cluster-manager.ts) the addresses are OVN-K's: the pod starts only once the cluster manager
//   has written the pod's `k8s.ovn.org/pod-networks` entry of every element whose network it allocates for (layer2,
//   localnet with subnets) and of the namespace's primary user-defined network (layer2, in a namespace labelled
//   `k8s.ovn.org/primary-user-defined-network`), as OVN-K's CNI waits for them, and network-status reports the
//   elements' addresses and MACs;
//   claims are never written here. With `ipam: 'standin'` it plays the IPAM plugin itself: for an element with
//   `ipam-claim-reference`, the claim's status.ips when set, else a new address written to the claim's status.
// - virt-handler: a Scheduled VMI on a node becomes Running with the LiveMigratable condition and the `domain` info
//   source on the interfaces its current pod carries (a hot-plugged interface reaches the domain only in a new pod,
//   an unplugged one leaves it at once); a VMI being deleted, or whose current pod is going away, is shut down
//   (phase Succeeded); migrations: the target side reports its domain (targetNodeAddress, targetNodeDomainDetected,
//   targetNodeDomainReadyTimestamp) and the source side migrates once virt-controller has set the target up
//   (startTimestamp, then completed, nodeName → target node).
// Like those components, it is driven by watches (launcher pods, VMIs, claims): a pass runs when one changes, and at
// least every idleMs for what no watch reports.
// Not done: anything a real node does beyond these objects (no containers, no guest, no CNI configuration).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from '../harness/index.ts';
import type { WatchHandle } from '../harness/kubehttp.ts';
import { OVN_PRIMARY_UDN_NAMESPACE_LABEL, ovnPodNetworks, type OvnPodNetwork } from '../ovn-kubernetes/cluster-manager.ts';
import type { NetworkSelectionElement, ObjectMeta } from '../../src/kube/types.ts';
import { Api, paths, type IPAMClaim } from '../suite/kube.ts';
import { isControlledBy, MIGRATION_JOB_LABEL, type MigrationState, type Vmi, type VmiInterfaceStatus } from './launcher-fixture.ts';

export const STANDIN_NODES = ['node-standin-1', 'node-standin-2'] as const;
// Multus' names written out, not imported from src/: the stand-in plays Multus, so a wrong name in src/ must not be
// agreed with here.
const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';
const DEFAULT_NETWORK_ANNOTATION = 'v1.multus-cni.io/default-network';
const HEARTBEAT_ANNOTATION = 'kubevirt.io/heartbeat';
/** What each stand-in node offers: enough for every VM a test makes, with the device plugins virt-handler would register. */
const NODE_RESOURCES = {
  cpu: '64',
  memory: '256Gi',
  pods: '1000',
  'devices.kubevirt.io/kvm': '1000',
  'devices.kubevirt.io/tun': '1000',
  'devices.kubevirt.io/vhost-net': '1000',
};
const NODE_NAME_LABEL = 'kubevirt.io/nodeName';

interface Pod {
  metadata: ObjectMeta;
  spec: { nodeName?: string; containers: { name: string; image: string }[]; initContainers?: { name: string; image: string }[] };
  status?: { phase?: string; podIP?: string };
}

type Element = NetworkSelectionElement;

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

function parseElements(value: string | undefined): Element[] {
  if (!value) return [];
  try {
    const parsed = JSON.parse(value) as unknown;
    return Array.isArray(parsed) ? (parsed as Element[]) : [];
  } catch {
    return [];
  }
}

/** Deterministic MAC for a pod interface (what a CNI would assign). */
function macFor(seed: string): string {
  let h = 0;
  for (const ch of seed) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  const b = [0x02, 0x00, (h >>> 24) & 255, (h >>> 16) & 255, (h >>> 8) & 255, h & 255];
  return b.map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/**
 * What a pass reacts to, watched as the kubelet and virt-handler watch their objects: a pass runs when one of them
 * changes, not on a timer, so an idle world costs the API server no LISTs.
 */
const WATCHED = [
  '/api/v1/pods?watch=true&labelSelector=kubevirt.io%3Dvirt-launcher',
  '/apis/kubevirt.io/v1/virtualmachineinstances?watch=true',
  '/apis/k8s.cni.cncf.io/v1alpha1/ipamclaims?watch=true',
];

export interface NodeStandInOptions {
  /** Log lines (what it did), for the kept work dir. */
  log?: (line: string) => void;
  /** The least time between two passes: the changes of a burst are handled together. */
  intervalMs?: number;
  /**
   * The most time between two passes, changes or not: for what no watch reports (a NAD or a namespace label a pod
   * waits for, the nodes' heartbeat, a failed pass, a watch being reopened).
   */
  idleMs?: number;
  /**
   * Who hands out secondary-network addresses: OVN-Kubernetes' cluster manager (read from the pod's
   * `k8s.ovn.org/pod-networks`), this stand-in (written to the claims), or the pod's element itself (`element`: the
   * addresses its `ips` asks for, as static IPAM gives them; the built-in allocator's networks). Default: the stand-in.
   */
  ipam?: 'ovn-kubernetes' | 'standin' | 'element';
}

interface NadObject {
  metadata?: { name?: string };
  spec?: { config?: string };
}

/** The NAD's CNI config, the fields OVN-K decides by; undefined when there is none or it is not JSON. */
function ovnkConfig(nad: NadObject | undefined): { type?: string; topology?: string; subnets?: string; role?: string } | undefined {
  try {
    return JSON.parse(nad?.spec?.config ?? '') as { type?: string; topology?: string; subnets?: string; role?: string };
  } catch {
    return undefined;
  }
}

/** Runs the node stand-in against `cluster` until stop(). */
export class NodeStandIn {
  readonly #api: Api;
  readonly #log: (line: string) => void;
  readonly #intervalMs: number;
  readonly #idleMs: number;
  /** A watched object changed since the current pass began: the next pass starts without waiting for idleMs. */
  #changed = true;
  #wake: (() => void) | undefined;
  readonly #watches = new Set<WatchHandle>();
  #watchLoops: Promise<void>[] = [];
  readonly #ipam: 'ovn-kubernetes' | 'standin' | 'element';
  /** Pods already logged as waiting for OVN-K's addresses (one line per pod, not one per pass). */
  readonly #waitingLogged = new Set<string>();
  #running = true;
  #loop: Promise<void> | undefined;
  #lastHeartbeat = 0;
  #nextAddress = 10;
  /** Errors of the last pass (kept for diagnostics; the loop goes on, as controllers do). */
  lastError: string | undefined;

  constructor(cluster: Cluster, opts: NodeStandInOptions = {}) {
    this.#api = new Api(cluster.http);
    this.#log = opts.log ?? (() => {});
    this.#intervalMs = opts.intervalMs ?? 100;
    this.#idleMs = opts.idleMs ?? 2000;
    this.#ipam = opts.ipam ?? 'standin';
  }

  async start(): Promise<void> {
    for (const name of STANDIN_NODES) {
      if (await this.#api.get(`/api/v1/nodes/${name}`)) continue;
      await this.#api.create('/api/v1/nodes', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubevirt.io/schedulable': 'true' }, annotations: { [HEARTBEAT_ANNOTATION]: now() } },
      });
    }
    await this.#heartbeat();
    this.#watchLoops = WATCHED.map((path) => this.#watch(path));
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    for (const w of this.#watches) w.stop();
    this.#wake?.();
    await this.#loop;
    await Promise.all(this.#watchLoops);
  }

  readonly #changedNow = (): void => {
    this.#changed = true;
    this.#wake?.();
  };

  /** Keeps a watch on `path` open while running; every event, and every reopening, asks for a pass. */
  async #watch(path: string): Promise<void> {
    while (this.#running) {
      try {
        const w = await this.#api.http.watch(path, this.#changedNow);
        this.#watches.add(w);
        if (!this.#running) w.stop();
        await w.done;
        this.#watches.delete(w);
      } catch (err) {
        this.#log(`watch ${path} failed (passes still run every ${this.#idleMs} ms): ${String(err)}`);
      }
      this.#changedNow();
      if (this.#running) await sleep(this.#idleMs);
    }
  }

  async #run(): Promise<void> {
    while (this.#running) {
      this.#changed = false;
      try {
        await this.pass();
        this.lastError = undefined;
      } catch (err) {
        this.lastError = String(err);
        this.#log(`pass failed (retrying): ${String(err)}`);
        this.#changed = true;
      }
      await sleep(this.#intervalMs);
      if (this.#changed || !this.#running) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#idleMs - this.#intervalMs);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  async #heartbeat(): Promise<void> {
    this.#lastHeartbeat = Date.now();
    for (const name of STANDIN_NODES) {
      await this.#api.mergePatch(`/api/v1/nodes/${name}`, { metadata: { annotations: { [HEARTBEAT_ANNOTATION]: now() } } });
      await this.#api.mergePatch(`/api/v1/nodes/${name}/status`, {
        status: {
          conditions: [
            { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'node stand-in', lastHeartbeatTime: now(), lastTransitionTime: now() },
          ],
          capacity: NODE_RESOURCES,
          allocatable: NODE_RESOURCES,
          addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
        },
      });
    }
  }

  /** One pass over every launcher pod and VMI. Public for tests that want to step it. */
  async pass(): Promise<void> {
    if (Date.now() - this.#lastHeartbeat > 30_000) await this.#heartbeat();
    const pods = (await this.#api.list<Pod>('/api/v1/pods?labelSelector=kubevirt.io%3Dvirt-launcher')).items;
    const vmis = (await this.#api.list<Vmi>('/apis/kubevirt.io/v1/virtualmachineinstances')).items;
    for (const pod of pods) {
      // a kubelet runs only its own node's pods: a pod bound elsewhere (a case's node without a kubelet) is left alone
      if (pod.spec.nodeName && !(STANDIN_NODES as readonly string[]).includes(pod.spec.nodeName)) continue;
      const vmi = vmis.find((v) => isControlledBy(pod.metadata, v.metadata.uid));
      if (pod.metadata.deletionTimestamp) await this.#podGoing(pod, vmi);
      else if (!pod.spec.nodeName) await this.#schedule(pod, vmi);
      else if (pod.status?.phase === 'Pending') await this.#podStarts(pod);
    }
    for (const vmi of vmis) await this.#virtHandler(vmi, pods);
  }

  // -- kube-scheduler ---------------------------------------------------------------------------------------------

  async #schedule(pod: Pod, vmi: Vmi | undefined): Promise<void> {
    const migrationTarget = pod.metadata.labels?.[MIGRATION_JOB_LABEL] !== undefined;
    const node = migrationTarget ? (STANDIN_NODES.find((n) => n !== vmi?.status?.nodeName) ?? STANDIN_NODES[1]) : STANDIN_NODES[0];
    const ns = pod.metadata.namespace!;
    await this.#api.create(`${paths.pods(ns, pod.metadata.name)}/binding`, {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: pod.metadata.name, namespace: ns, uid: pod.metadata.uid },
      target: { apiVersion: 'v1', kind: 'Node', name: node },
    });
    this.#log(`scheduler: bound ${ns}/${pod.metadata.name} to ${node}`);
  }

  // -- kubelet, Multus and the IPAM plugin ------------------------------------------------------------------------

  async #podStarts(pod: Pod): Promise<void> {
    const ns = pod.metadata.namespace!;
    const elements = parseElements(pod.metadata.annotations?.[NETWORKS_ANNOTATION]);
    const defaultElement = parseElements(pod.metadata.annotations?.[DEFAULT_NETWORK_ANNOTATION])[0];
    // OVN-K's CNI answers for an interface only once the cluster manager has written its entry: until every
    // element it allocates for has one, the pod's sandbox is not up (the pod stays Pending; next pass looks again)
    const fromOvnk = this.#ipam === 'ovn-kubernetes' ? await this.#ovnkEntries(pod, elements) : new Map<Element, OvnPodNetwork>();
    if (fromOvnk === undefined) return;
    const podIP = `10.244.${STANDIN_NODES.indexOf(pod.spec.nodeName as (typeof STANDIN_NODES)[number]) + 1}.${this.#nextAddress++ % 250}`;
    const status: Record<string, unknown>[] = [
      {
        name: defaultElement ? `${defaultElement.namespace ?? ns}/${defaultElement.name}` : 'ovn-kubernetes',
        interface: 'eth0',
        ips: defaultElement && this.#ipam === 'standin' ? await this.#ipsFor(ns, defaultElement, podIP) : [podIP],
        mac: macFor(`${pod.metadata.uid}/eth0`),
        default: true,
        dns: {},
      },
    ];
    for (const e of elements) {
      const ovnk = fromOvnk.get(e);
      status.push({
        name: `${e.namespace ?? ns}/${e.name}`,
        interface: e.interface,
        ips: ovnk ? (ovnk.ip_addresses ?? []) : this.#ipam === 'standin' ? await this.#ipsFor(ns, e) : (e.ips ?? []),
        mac: ovnk?.mac_address ?? e.mac ?? macFor(`${pod.metadata.uid}/${e.interface}`),
        dns: {},
      });
    }
    await this.#api.mergePatch(paths.pods(ns, pod.metadata.name), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: JSON.stringify(status) } } });
    const started = now();
    const containerStatus = (c: { name: string; image: string }, state: object, more: object = {}) => ({
      name: c.name,
      image: c.image,
      imageID: '',
      ...more,
      ready: true,
      restartCount: 0,
      state,
    });
    const cond = (type: string) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: started });
    await this.#api.mergePatch(`${paths.pods(ns, pod.metadata.name)}/status`, {
      status: {
        phase: 'Running',
        hostIP: '127.0.0.1',
        podIP,
        podIPs: [{ ip: podIP }],
        startTime: started,
        conditions: ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map(cond),
        containerStatuses: pod.spec.containers.map((c) =>
          containerStatus(c, { running: { startedAt: started } }, { containerID: `standin://${pod.metadata.uid}/${c.name}`, started: true }),
        ),
        initContainerStatuses: (pod.spec.initContainers ?? []).map((c) =>
          containerStatus(c, { terminated: { exitCode: 0, reason: 'Completed', startedAt: started, finishedAt: started } }),
        ),
      },
    });
    this.#log(
      `kubelet: ${ns}/${pod.metadata.name} Running on ${pod.spec.nodeName} (networks: ${elements.map((e) => `${e.name}/${e.interface}${e['ipam-claim-reference'] ? ` claim ${e['ipam-claim-reference']}` : ''}`).join(', ') || 'none'})`,
    );
  }

  /**
   * OVN-K's `k8s.ovn.org/pod-networks` entry of each element whose network its cluster manager allocates for, or
   * undefined while one of them has none yet.
   */
  async #ovnkEntries(pod: Pod, elements: Element[]): Promise<Map<Element, OvnPodNetwork> | undefined> {
    const ns = pod.metadata.namespace!;
    const entries = ovnPodNetworks(pod.metadata.annotations);
    const out = new Map<Element, OvnPodNetwork>();
    const missing: string[] = [];
    for (const e of elements) {
      const key = `${e.namespace ?? ns}/${e.name}`;
      if (!(await this.#ovnkAllocates(key))) continue;
      const entry = entries[key];
      if (entry) out.set(e, entry);
      else missing.push(key);
    }
    const primary = await this.#ovnkPrimaryNad(ns);
    if (primary && !entries[primary]) missing.push(primary);
    if (missing.length === 0) {
      this.#waitingLogged.delete(pod.metadata.uid ?? '');
      return out;
    }
    if (!this.#waitingLogged.has(pod.metadata.uid ?? '')) {
      this.#waitingLogged.add(pod.metadata.uid ?? '');
      this.#log(`cni: ${ns}/${pod.metadata.name} waits for OVN-K's k8s.ovn.org/pod-networks entry of ${missing.join(', ')}`);
    }
    return undefined;
  }

  /**
   * Whether OVN-K's cluster manager (interconnect) hands out this NAD's addresses: an `ovn-k8s-cni-overlay` secondary
   * network of topology layer2, or localnet with subnets (clustermanager's hasPodAllocation). Other NADs (localnet
   * without IPAM; a primary network is never an element, see #ovnkPrimaryNad) get no entry from it.
   */
  async #ovnkAllocates(nadKey: string): Promise<boolean> {
    const [nadNs, nadName] = nadKey.split('/') as [string, string];
    const config = ovnkConfig(await this.#api.get<NadObject>(paths.nads(nadNs, nadName)));
    if (!config) return false;
    if (config.type !== 'ovn-k8s-cni-overlay' || (config.role !== undefined && config.role !== 'secondary')) return false;
    return config.topology === 'layer2' || (config.topology === 'localnet' && Boolean(config.subnets));
  }

  /**
   * The key of the namespace's primary user-defined network when OVN-K's cluster manager allocates for its pods
   * (network segmentation on, see cluster-manager.ts): the namespace carries the primary-UDN label and has an OVN-K
   * layer2 NAD of role primary. Without the label OVN-K puts the namespace's pods on the default network.
   */
  async #ovnkPrimaryNad(ns: string): Promise<string | undefined> {
    const namespace = await this.#api.get<{ metadata: { labels?: Record<string, string> } }>(paths.namespaces(ns));
    if (namespace?.metadata.labels?.[OVN_PRIMARY_UDN_NAMESPACE_LABEL] === undefined) return undefined;
    for (const nad of (await this.#api.list<NadObject>(paths.nads(ns))).items) {
      const config = ovnkConfig(nad);
      if (config?.type === 'ovn-k8s-cni-overlay' && config.topology === 'layer2' && config.role === 'primary') return `${ns}/${nad.metadata?.name}`;
    }
    return undefined;
  }

  /** The IPAM plugin: the claim's addresses when the element names one (allocated and recorded the first time). */
  async #ipsFor(ns: string, e: Element, fallback?: string): Promise<string[]> {
    const claimName = e['ipam-claim-reference'];
    if (!claimName) return fallback ? [fallback] : [];
    const claim = await this.#api.get<IPAMClaim>(paths.claims(e.namespace ?? ns, claimName));
    if (!claim) return [];
    if (claim.status?.ips?.length) return claim.status.ips;
    const ips = [`10.200.0.${this.#nextAddress++ % 250}/24`];
    await this.#api.mergePatch(`${paths.claims(e.namespace ?? ns, claimName)}/status`, { status: { ips } });
    this.#log(`ipam: ${ns}/${claimName} gets ${ips.join(',')}`);
    return ips;
  }

  async #podGoing(pod: Pod, vmi: Vmi | undefined): Promise<void> {
    const ns = pod.metadata.namespace!;
    // virt-handler: the launcher's domain stops with its pod; if that pod is the VMI's current one, the VMI is done
    if (vmi && pod.spec.nodeName && vmi.status?.nodeName === pod.spec.nodeName && ['Scheduled', 'Running'].includes(vmi.status?.phase ?? '')) {
      await this.#setVmiPhase(vmi, 'Succeeded');
    }
    const res = await this.#api.http.request('DELETE', paths.pods(ns, pod.metadata.name), {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      gracePeriodSeconds: 0,
      preconditions: { uid: pod.metadata.uid },
    });
    if (![200, 202, 404, 409].includes(res.status))
      throw new Error(`kubelet: DELETE pod ${ns}/${pod.metadata.name}: HTTP ${res.status} ${res.body.slice(0, 200)}`);
    this.#log(`kubelet: ${ns}/${pod.metadata.name} stopped and removed`);
  }

  // -- virt-handler -----------------------------------------------------------------------------------------------

  /** A VMI write as virt-handler makes it: applied only to the version it was computed from. */
  async #patchVmi(vmi: Vmi, ops: { op: 'replace'; path: string; value: unknown }[]): Promise<void> {
    const test = { op: 'test' as const, path: '/metadata/resourceVersion', value: vmi.metadata.resourceVersion };
    await this.#api.jsonPatch(paths.vmis(vmi.metadata.namespace!, vmi.metadata.name), [test, ...ops]);
  }

  async #setVmiPhase(vmi: Vmi, phase: string): Promise<void> {
    await this.#patchVmi(vmi, [{ op: 'replace', path: '/status/phase', value: phase }]);
    vmi.status!.phase = phase;
    this.#log(`virt-handler: VMI ${vmi.metadata.namespace}/${vmi.metadata.name} ${phase}`);
  }

  async #virtHandler(vmi: Vmi, pods: Pod[]): Promise<void> {
    const ns = vmi.metadata.namespace!;
    const phase = vmi.status?.phase;
    if (!vmi.status?.nodeName || (phase !== 'Scheduled' && phase !== 'Running')) return;
    const mine = pods.filter((p) => isControlledBy(p.metadata, vmi.metadata.uid));
    const current = mine.find((p) => p.spec.nodeName === vmi.status!.nodeName && !p.metadata.deletionTimestamp && p.status?.phase === 'Running');
    // phase is Scheduled or Running here
    if (vmi.metadata.deletionTimestamp) return this.#setVmiPhase(vmi, 'Succeeded');
    const ms = vmi.status.migrationState;
    if (ms && !ms.completed && ms.targetPod) {
      await this.#migrate(vmi, ms, mine);
      return;
    }
    if (!current) return;
    const wanted = this.#domainInterfaces(vmi, current);
    const conditions = vmi.status.conditions ?? [];
    const hasMigratable = conditions.some((c) => c.type === 'LiveMigratable' && c.status === 'True');
    const same = JSON.stringify(vmi.status.interfaces ?? []) === JSON.stringify(wanted);
    if (phase === 'Running' && hasMigratable && same && vmi.status.selinuxContext) return;
    const status = {
      ...vmi.status,
      phase: 'Running',
      // virt-handler writes the launcher's SELinux context, "none" on a host without SELinux; the migration
      // controller waits for it before it creates a target pod
      selinuxContext: vmi.status.selinuxContext ?? 'none',
      interfaces: wanted,
      conditions: hasMigratable ? conditions : [...conditions, { type: 'LiveMigratable', status: 'True', lastProbeTime: null, lastTransitionTime: now() }],
    };
    await this.#patchVmi(vmi, [{ op: 'replace', path: '/status', value: status }]);
    if (phase !== 'Running') this.#log(`virt-handler: VMI ${ns}/${vmi.metadata.name} Running on ${vmi.status.nodeName}`);
  }

  /**
   * status.interfaces as virt-handler reports them: what virt-controller filled from Multus (`multus-status`), plus
   * `domain` for every interface the domain has: those of the spec that are not `absent` and whose network the
   * current pod carries (or the pod network on eth0).
   */
  #domainInterfaces(vmi: Vmi, pod: Pod): VmiInterfaceStatus[] {
    const statusByPodIface = new Map(parseElements(pod.metadata.annotations?.[NETWORK_STATUS_ANNOTATION]).map((s) => [s.interface, s]));
    const existing = vmi.status?.interfaces ?? [];
    const out: VmiInterfaceStatus[] = [];
    const specIfaces = vmi.spec?.domain?.devices?.interfaces ?? [];
    for (const net of vmi.spec?.networks ?? []) {
      const iface = specIfaces.find((i) => i.name === net.name);
      const prev = existing.find((s) => s.name === net.name);
      const primary = net.pod !== undefined || net.multus?.default === true;
      const podIfaceName = primary ? 'eth0' : prev?.podInterfaceName;
      const inPod = podIfaceName !== undefined && statusByPodIface.has(podIfaceName);
      const inDomain = iface !== undefined && iface.state !== 'absent' && inPod;
      const sources = (prev?.infoSource ?? '').split(', ').filter((s) => s && s !== 'domain');
      if (inDomain) sources.unshift('domain');
      if (sources.length === 0) continue;
      const netStatus = podIfaceName ? statusByPodIface.get(podIfaceName) : undefined;
      out.push({
        ...prev,
        name: net.name,
        infoSource: sources.join(', '),
        ...(podIfaceName ? { podInterfaceName: podIfaceName } : {}),
        ...(inDomain && netStatus?.mac ? { mac: netStatus.mac } : {}),
      });
    }
    return out;
  }

  async #migrate(vmi: Vmi, ms: MigrationState, pods: Pod[]): Promise<void> {
    const ns = vmi.metadata.namespace!;
    const target = pods.find((p) => p.metadata.name === ms.targetPod);
    if (target?.status?.phase !== 'Running' || !ms.targetNode) return;
    const migrationState = (value: MigrationState) => ({ op: 'replace' as const, path: '/status/migrationState', value });
    if (!ms.targetNodeAddress || !ms.targetNodeDomainDetected) {
      // target virt-handler: the receiving launcher is up and listening
      const ready = { targetNodeAddress: '127.0.0.1', targetNodeDomainDetected: true, targetNodeDomainReadyTimestamp: now() };
      await this.#patchVmi(vmi, [migrationState({ ...ms, ...ready, targetDirectMigrationNodePorts: { '49152': 0 } })]);
      this.#log(`virt-handler (target ${ms.targetNode}): ${ns}/${vmi.metadata.name} target ready`);
      return;
    }
    if (!ms.startTimestamp) {
      await this.#patchVmi(vmi, [migrationState({ ...ms, startTimestamp: now() })]);
      this.#log(`virt-handler (source ${ms.sourceNode}): ${ns}/${vmi.metadata.name} migration started`);
      return;
    }
    // source virt-handler: the domain is now on the target; the VMI follows it
    const labels = { ...(vmi.metadata.labels ?? {}), [NODE_NAME_LABEL]: ms.targetNode };
    await this.#patchVmi(vmi, [
      migrationState({ ...ms, completed: true, endTimestamp: now() }),
      { op: 'replace', path: '/status/nodeName', value: ms.targetNode },
      { op: 'replace', path: '/metadata/labels', value: labels },
    ]);
    this.#log(`virt-handler: ${ns}/${vmi.metadata.name} migrated ${ms.sourceNode} → ${ms.targetNode}`);
    // kubelet: the source launcher exits once its domain left
    const source = pods.find((p) => p.spec.nodeName === ms.sourceNode && p.metadata.name !== ms.targetPod && p.status?.phase === 'Running');
    if (source) {
      await this.#api.mergePatch(`${paths.pods(ns, source.metadata.name)}/status`, {
        status: {
          phase: 'Succeeded',
          conditions: [{ type: 'Ready', status: 'False', lastProbeTime: null, lastTransitionTime: now(), reason: 'PodCompleted' }],
        },
      });
      this.#log(`kubelet: source pod ${ns}/${source.metadata.name} Succeeded`);
    }
  }
}
