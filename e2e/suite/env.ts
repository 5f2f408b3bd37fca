// The suite's world: the real-KubeVirt world of e2e/kubevirt (world.ts: its own control plane with KubeVirt's real
// CRDs and the KubeVirt CR that carries the PersistentIPs gate, the real virt-controller v1.9.0, the node and virt-api
// stand-ins, test infrastructure) and the controller under test as separate processes: one shared controller for
// most cases, dedicated ones (after stopping the shared one) where a case needs its own flags or kills it. The IPAM
// plugin is the node stand-in (`ovnKubernetes: false`): the cases write the claims' addresses themselves where they
// need them, and several stage NADs OVN-Kubernetes would refuse (invalid, layer3, edited configs).
import { type CaseContext as WorldCaseContext, World, worldCase } from '../kubevirt/world.ts';
import type { ControllerOptions, ControllerProcess, LogLine } from '../local/controller-process.ts';
import { namespaceEvents, paths } from './kube.ts';

/**
 * The shared controller's --resync-period (seconds). Short on purpose: cases that must hold "after several
 * resyncs" see them within seconds, and the steady-state case's window contains several full passes.
 */
export const SHARED_RESYNC_PERIOD_S = 2;

/** Whether a log line is about namespace `ns` (the reconciler's lines carry `namespace`). */
export const inNamespace =
  (ns: string) =>
  (l: LogLine): boolean =>
    l['namespace'] === ns;

/** The world with the suite's controllers: the shared one, or (withoutSharedController) a case's dedicated ones. */
export class SuiteEnv extends World {
  #shared: ControllerProcess | undefined;
  readonly #dedicated = new Set<ControllerProcess>();

  constructor() {
    // dedicated controllers keep the controller's own --resync-period unless a case passes one
    super({ ovnKubernetes: false, controller: false, resyncPeriodS: undefined, onLog: (l) => console.log(`[e2e] ${l}`) });
  }

  override async setUp(): Promise<void> {
    await super.setUp();
    this.#shared = await this.#startShared();
  }

  // -- controllers (World.tearDown stops every one of them) --------------------------------------------------------

  get shared(): ControllerProcess {
    if (!this.#shared) throw new Error('the shared controller is not running (a case that stopped it must start it again)');
    return this.#shared;
  }

  #startShared(): Promise<ControllerProcess> {
    return super.startController({ name: `shared-${Date.now().toString(36)}`, resyncPeriodS: SHARED_RESYNC_PERIOD_S });
  }

  /** SIGTERM the shared controller and start a new one (waits for /readyz). */
  async restartShared(): Promise<ControllerProcess> {
    await this.#shared?.stop();
    this.#shared = undefined;
    this.#shared = await this.#startShared();
    return this.#shared;
  }

  /**
   * Runs `fn` with the shared controller stopped, so that the dedicated controllers it starts (startController) are
   * the only ones acting; stops them afterwards and starts the shared one again.
   */
  async withoutSharedController<T>(fn: () => Promise<T>): Promise<T> {
    await this.#shared?.stop();
    this.#shared = undefined;
    try {
      return await fn();
    } finally {
      for (const c of this.#dedicated) await c.stop().catch(() => undefined);
      this.#dedicated.clear();
      this.#shared = await this.#startShared();
    }
  }

  override async startController(opts: Omit<ControllerOptions, 'kubeconfig' | 'logDir' | 'webhookPort'>): Promise<ControllerProcess> {
    if (this.#shared) throw new Error('a dedicated controller runs only inside withoutSharedController()');
    const c = await super.startController(opts);
    this.#dedicated.add(c);
    return c;
  }

  /** Like startController, but returns as soon as the process is spawned (for cases about its start-up). */
  spawnController(opts: Omit<ControllerOptions, 'kubeconfig' | 'logDir' | 'webhookPort' | 'waitReady'>): Promise<ControllerProcess> {
    return this.startController({ ...opts, waitReady: false });
  }

  /** The controllers running now (for diagnostics). */
  controllers(): ControllerProcess[] {
    return [...(this.#shared ? [this.#shared] : []), ...this.#dedicated];
  }

  // -- namespaces -------------------------------------------------------------------------------------------------

  /** A fresh namespace for one case. */
  override async namespace(slug: string): Promise<string> {
    const name = `e2e-${slug}`.slice(0, 55).replace(/-+$/, '') + `-${this.runId}`;
    await this.api.create(paths.namespaces(), {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name, labels: { 'persistent-ips-e2e': this.runId } },
    });
    return name;
  }

  /** What a person needs to see when a case failed in `ns`: objects, Events, the controllers' lines about it. */
  override async describe(ns: string): Promise<string> {
    const parts: string[] = [];
    const get = await this.cp
      .kubectl(['get', 'virtualmachines,virtualmachineinstances,ipamclaims,pods,network-attachment-definitions', '-n', ns, '-o', 'wide'], { check: false })
      .catch((e: unknown) => ({ stdout: '', stderr: String(e) }));
    parts.push(`kubectl get ... -n ${ns}:\n${get.stdout}${get.stderr}`);
    const claims = await this.cp.kubectl(['get', 'ipamclaims', '-n', ns, '-o', 'yaml'], { check: false }).catch(() => undefined);
    if (claims) parts.push(`ipamclaims:\n${claims.stdout}`);
    const events = await namespaceEvents(this.cp, ns).catch(() => []);
    parts.push(`events:\n${events.map((e) => `  ${e.type} ${e.reason} ${e.involvedObject.kind}/${e.involvedObject.name}: ${e.message}`).join('\n')}`);
    for (const c of this.controllers()) {
      const lines = c.logsMatching(inNamespace(ns)).slice(-40);
      parts.push(`controller ${c.name} (pid ${c.pid}, log ${c.logFile}) about ${ns}:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`);
    }
    return parts.join('\n');
  }
}

/** What a case of the suite gets (`c.world` is the suite's env). */
export type CaseContext = WorldCaseContext<SuiteEnv>;

/** One case of the suite (world.ts worldCase, 180 s unless `timeoutMs`). */
export const e2eCase = (env: SuiteEnv, name: string, fn: (c: CaseContext) => Promise<void>, opts: { timeoutMs?: number } = {}): void =>
  worldCase(env, name, fn, { timeoutMs: 180_000, ...opts });
