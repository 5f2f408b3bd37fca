// The world of the real-KubeVirt suite: its own control plane with KubeVirt's real CRDs, the KubeVirt CR, the
// launcher-pod webhook registered by URL, the node stand-in, the real virt-controller, OVN-Kubernetes' real cluster
// manager as the IPAM of OVN-K networks (where `ovnKubernetes` asks for it), and the controller under test (the built
// CLI). Everything it starts is tracked by the harness's reaper. `npm start` (scripts/start.ts) runs this same world
// in a directory of its own, with the demo VM.
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it, type TestContext } from 'node:test';
import { FEATURE_GATE } from '../../src/claims/constants.ts';
import { freePort, startControlPlane, type ControlPlane } from '../harness/index.ts';
import { ControllerProcess, type ControllerOptions } from '../local/controller-process.ts';
import { controllerNamespace, localWebhookConfiguration } from '../local/webhook-config.ts';
import { Api, paths } from '../suite/kube.ts';
import { ensureOvnkube } from '../ovn-kubernetes/binaries.ts';
import { startClusterManager, type ClusterManager } from '../ovn-kubernetes/cluster-manager.ts';
import { ensureKubeVirtBinaries } from './binaries.ts';
import { crdDirWithRealKubeVirt, installKubeVirtCR, startVirtController, type VirtController } from './kubevirt.ts';
import { NodeStandIn } from './node-standin.ts';
import { VirtApiStandIn } from './virt-api-standin.ts';
import { VirtCtl, waitFor } from './virtctl.ts';

export { waitFor };

/** Deadline for what must happen (virt-controller and our controller on 2 busy cores). */
export const EVENTUALLY_MS = 60_000;

/** waitFor with that deadline (or `timeoutMs`), looking every 200 ms. */
export const eventually = <T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = EVENTUALLY_MS): Promise<T> =>
  waitFor(what, probe, { timeoutMs, intervalMs: 200 });

export interface WorldOptions {
  /**
   * Run OVN-Kubernetes' cluster manager, which then hands out the addresses of OVN-K networks (the node stand-in
   * only reads them). Default false: the IPAM is the node stand-in's. Said where a file builds its world (not passed
   * through), because `npm test` starts a file before ovnkube is built unless the file's text asks for it.
   */
  ovnKubernetes?: boolean;
  /**
   * The work directory (control plane, logs, certificates); created when missing and never removed. Default: a new
   * temporary directory, removed by tearDown unless a case failed or PERSISTENT_IPS_E2E_KEEP is set.
   */
  dir?: string;
  /** Progress lines, the binaries' build progress included (a first `npm start` builds them). Default: console. */
  onLog?: (line: string) => void;
  /** Stop the control plane on SIGINT/SIGTERM of this process (startControlPlane's handleSignals). Default true. */
  handleSignals?: boolean;
  /** The controller's name (its log is `<dir>/controller-<name>.log`) and --resync-period (default 10 s here). */
  controllerName?: string;
  resyncPeriodS?: number | undefined;
  /**
   * Start the controller under test (default true). False: the caller runs its own controllers (ControllerProcess)
   * on `webhookPort`, where the launcher-pod webhook is registered; `controller` is then unset.
   */
  controller?: boolean;
  /**
   * Register the launcher-pod webhook by URL on `webhookPort`, with the controller namespace it exempts (default
   * true). False: the caller installs what it tests (the shipped manifests, its own webhook configuration).
   */
  webhook?: boolean;
  /** Start virt-controller in setUp (default true); false: KubeVirt stays silent until startVirtController. */
  virtController?: boolean;
  /**
   * KubeVirt's CRDs to install: all of them (default), or only those the controller and the stand-ins read
   * (CONTROLLER_KUBEVIRT_CRDS), for a world where virt-controller never runs (startVirtController then refuses).
   */
  kubevirtCrds?: 'all' | 'controller';
  /**
   * Without OVN-K, who gives pods their secondary addresses: the node stand-in as the IPAM plugin, writing the claims
   * (`standin`, default), or the CNI taking what the pod's element asks for (`element`: static IPAM, the built-in
   * allocator's networks, where the controller under test fills the claims).
   */
  nodeIpam?: 'standin' | 'element';
}

export class World {
  cp!: ControlPlane;
  api!: Api;
  /** virtctl-like operations on VMs (driven by the real virt-controller). */
  kv!: VirtCtl;
  dir!: string;
  virtController!: VirtController;
  node!: NodeStandIn;
  readonly virtApi = new VirtApiStandIn();
  controller!: ControllerProcess;
  /** OVN-K's cluster manager; undefined unless `ovnKubernetes`. */
  ovnk: ClusterManager | undefined;
  webhookPort = 0;
  failed = false;
  /** The cases worldCase counted, for a file's summary line (summaryAtEnd). */
  readonly tally = { ran: 0, passed: 0, failed: 0, startedAt: Date.now() };
  readonly runId = randomBytes(3).toString('hex');
  #nodeLog: WriteStream | undefined;
  readonly #withOvnk: boolean;
  readonly #opts: WorldOptions;
  #bins: Awaited<ReturnType<typeof ensureKubeVirtBinaries>> | undefined;
  #virtControllerStarts = 0;
  /** Every controller startController started, stopped by tearDown. */
  readonly #controllers: ControllerProcess[] = [];

  constructor(opts: WorldOptions = {}) {
    this.#withOvnk = opts.ovnKubernetes ?? false;
    this.#opts = opts;
  }

  async setUp(): Promise<void> {
    const t0 = Date.now();
    const say = this.#opts.onLog ?? ((l: string) => console.log(`[kubevirt-e2e] ${l}`));
    // inside a test file this only looks in the cache (build.sh --check): the build is `npm run test:prepare`'s
    const bins = await ensureKubeVirtBinaries(say);
    this.#bins = bins;
    const ovnkube = this.#withOvnk ? await ensureOvnkube(say) : undefined;
    if (this.#opts.dir) mkdirSync(this.#opts.dir, { recursive: true });
    this.dir = this.#opts.dir ?? mkdtempSync(join(tmpdir(), 'persistent-ips-e2e-kubevirt-'));
    this.cp = await startControlPlane({
      dir: join(this.dir, 'controlplane'),
      crdDirs: [crdDirWithRealKubeVirt(bins, this.dir, this.#opts.kubevirtCrds)],
      ...(this.#opts.onLog ? { onLog: this.#opts.onLog } : {}),
      ...(this.#opts.handleSignals !== undefined ? { handleSignals: this.#opts.handleSignals } : {}),
    });
    this.api = new Api(this.cp.http);
    this.kv = new VirtCtl(this.api);
    say(`Kubernetes ${this.cp.version} with KubeVirt's CRDs in ${((Date.now() - t0) / 1000).toFixed(1)} s; work dir ${this.dir}`);
    await installKubeVirtCR(this.cp, { featureGates: [FEATURE_GATE] });
    this.webhookPort = await freePort();
    if (this.#opts.webhook !== false) {
      await this.cp.kubectl(['apply', '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'v1',
          kind: 'List',
          items: [
            controllerNamespace,
            { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', ...localWebhookConfiguration(this.webhookPort) },
          ],
        }),
      });
    }
    await this.virtApi.start(this.cp, join(this.dir, 'virt-api-standin'));
    this.#nodeLog = createWriteStream(join(this.dir, 'node-standin.log'), { flags: 'a' });
    this.node = new NodeStandIn(this.cp, {
      log: (l) => this.#nodeLog?.write(`${new Date().toISOString()} ${l}\n`),
      ipam: ovnkube ? 'ovn-kubernetes' : (this.#opts.nodeIpam ?? 'standin'),
    });
    // the stand-in's Node objects exist before the cluster manager starts: it allocates only for pods bound to a Node
    // it knows, and annotates each Node itself
    await this.node.start();
    if (ovnkube) {
      this.ovnk = await startClusterManager(this.cp, ovnkube, join(this.dir, 'ovn-kubernetes'));
      say(`OVN-Kubernetes cluster manager ready, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
    if (this.#opts.controller !== false) this.controller = await this.startController();
    if (this.#opts.virtController !== false) await this.startVirtController();
    say(`${this.#opts.virtController !== false ? 'virt-controller v1.9.0 leads, ' : ''}controller ready, ${((Date.now() - t0) / 1000).toFixed(1)} s in all`);
  }

  /**
   * Stops virt-controller (its process): KubeVirt is silent, VMs, VMIs and pods stay as they are (the node stand-in
   * still plays the node) until startVirtController, e.g. for a case that stages a state virt-controller would fix.
   */
  async stopVirtController(): Promise<void> {
    await this.virtController?.stop();
  }

  /** Starts virt-controller (again) and waits until it leads; each start logs to a directory of its own. */
  async startVirtController(): Promise<void> {
    if (!this.#bins) throw new Error('World.startVirtController before setUp');
    if (this.#opts.kubevirtCrds === 'controller')
      throw new Error(
        "World.startVirtController: this world installed only the controller's KubeVirt CRDs (kubevirtCrds: 'controller'), virt-controller needs all of them",
      );
    const n = this.#virtControllerStarts++;
    this.virtController = await startVirtController(this.cp, this.#bins, join(this.dir, n === 0 ? 'kubevirt' : `kubevirt-start-${n + 1}`));
  }

  async tearDown(): Promise<void> {
    await this.virtController?.stop().catch(() => undefined);
    await this.controller?.stop().catch(() => undefined);
    for (const c of this.#controllers.splice(0)) await c.stop().catch(() => undefined);
    await this.node?.stop().catch(() => undefined);
    await this.ovnk?.stop().catch(() => undefined);
    await this.virtApi.stop().catch(() => undefined);
    await this.cp?.stop();
    await new Promise<void>((r) => (this.#nodeLog ? this.#nodeLog.end(() => r()) : r()));
    if (!this.dir || this.#opts.dir) return;
    if (!this.failed && !process.env['PERSISTENT_IPS_E2E_KEEP']) rmSync(this.dir, { recursive: true, force: true });
    else console.log(`[kubevirt-e2e] kept ${this.dir} (virt-controller, OVN-K cluster manager, controller, node stand-in and control-plane logs)`);
  }

  /**
   * Starts a controller with this world's options, on the webhook port the MutatingWebhookConfiguration names, unless
   * `o` says otherwise; a string is its name (default the world's controller name), which names its log file. A case
   * that stopped `controller` starts it again with this and assigns the result to `controller`.
   */
  async startController(o: string | Partial<ControllerOptions> = {}): Promise<ControllerProcess> {
    const resyncPeriodS = 'resyncPeriodS' in this.#opts ? this.#opts.resyncPeriodS : 10;
    const c = await ControllerProcess.start({
      name: this.#opts.controllerName ?? 'kubevirt-e2e',
      kubeconfig: this.cp.kubeconfigPath,
      logDir: this.dir,
      webhookPort: this.webhookPort,
      ...(resyncPeriodS !== undefined ? { resyncPeriodS } : {}),
      ...(typeof o === 'string' ? { name: o } : o),
    });
    this.#controllers.push(c);
    return c;
  }

  /** Stops `controller` and starts a new one (startController's `o`), which becomes `controller`. */
  async restartController(o: string | Partial<ControllerOptions> = {}): Promise<ControllerProcess> {
    await this.controller?.stop();
    this.controller = await this.startController(o);
    return this.controller;
  }

  async namespace(slug: string, labels?: Record<string, string>): Promise<string> {
    const name = `kv-${slug}-${this.runId}`;
    await this.api.create(paths.namespaces(), { apiVersion: 'v1', kind: 'Namespace', metadata: { name, ...(labels ? { labels } : {}) } });
    return name;
  }

  /** What a person needs when a case failed in `ns`. */
  async describe(ns: string): Promise<string> {
    const get = await this.cp
      .kubectl(['get', 'virtualmachines,virtualmachineinstances,virtualmachineinstancemigrations,ipamclaims,pods', '-n', ns, '-o', 'yaml'], { check: false })
      .catch((e: unknown) => ({ stdout: '', stderr: String(e) }));
    const events = await this.cp.kubectl(['get', 'events', '-n', ns], { check: false }).catch(() => ({ stdout: '', stderr: '' }));
    const ours = this.controller?.logsMatching((l) => l['namespace'] === ns).slice(-30) ?? [];
    return [
      `objects in ${ns}:\n${get.stdout}${get.stderr}`,
      `events:\n${events.stdout}`,
      `controller lines about ${ns}:\n${ours.map((l) => JSON.stringify(l)).join('\n')}`,
      `node stand-in last error: ${this.node.lastError ?? 'none'}`,
      ...(this.ovnk
        ? [
            `OVN-K cluster manager lines about ${ns}:\n${this.ovnk
              .lines()
              .filter((l) => l.includes(ns))
              .slice(-30)
              .join('\n')}`,
          ]
        : []),
      `logs: ${this.dir}`,
    ].join('\n');
  }
}

/** What a case needs of its world: fresh namespaces, and what one looks like when a case in it failed. */
export interface CaseWorld {
  namespace(slug: string, labels?: Record<string, string>): Promise<string>;
  describe(ns: string): Promise<string>;
  /** Set when a case failed (a world then keeps its logs). */
  failed: boolean;
  /** Counted when the file prints a summary line. */
  tally?: { ran: number; passed: number; failed: number };
}

/** What a case gets: its world, its test context, and fresh namespaces (described when the case fails). */
export interface CaseContext<W extends CaseWorld = CaseWorld> {
  world: W;
  t: TestContext;
  namespace(slug: string, labels?: Record<string, string>): Promise<string>;
}

export const CASE_TIMEOUT_MS = 240_000;

/**
 * One end-to-end case (a `node:test` test) in `world`: counted in its tally, and, when it fails, the state of the
 * namespaces it made attached to the failure.
 */
export function worldCase<W extends CaseWorld>(world: W, name: string, fn: (c: CaseContext<W>) => Promise<void>, opts: { timeoutMs?: number } = {}): void {
  it(name, { timeout: opts.timeoutMs ?? CASE_TIMEOUT_MS }, async (t) => {
    const tally = world.tally;
    if (tally) tally.ran++;
    const used: string[] = [];
    const namespace = async (slug: string, labels?: Record<string, string>) => {
      const ns = await world.namespace(slug, labels);
      used.push(ns);
      return ns;
    };
    const t0 = Date.now();
    try {
      await fn({ world, t, namespace });
      if (tally) tally.passed++;
    } catch (err) {
      if (tally) tally.failed++;
      world.failed = true;
      for (const ns of used) t.diagnostic(await world.describe(ns).catch((e: unknown) => `cannot describe ${ns}: ${String(e)}`));
      throw err;
    } finally {
      t.diagnostic(`${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  });
}

/**
 * Registers the file's summary line (a root-level after hook: printed once every case has run):
 *   <title>: N cases against Kubernetes v1.34.2 (P passed, F failed) in S s
 */
export function summaryAtEnd(world: World, title: string): void {
  after((ctx) => {
    const { ran, passed, failed, startedAt } = world.tally;
    const wall = ((Date.now() - startedAt) / 1000).toFixed(0);
    ctx.diagnostic(`${title}: ${ran} cases against Kubernetes ${world.cp?.version ?? '(no cluster)'} (${passed} passed, ${failed} failed) in ${wall} s`);
  });
}
