// The suite's world: ONE control plane (or the cluster of PERSISTENT_IPS_EXISTING_KUBECONFIG), the KubeVirt
// stand-in (test infrastructure doing virt-controller's job, in this process, watching every namespace), the
// KubeVirt CR that carries the PersistentIPs gate, and the controller under test as separate processes: one shared
// controller for most cases, dedicated ones (after stopping the shared one) where a case needs its own flags or
// kills it.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { FEATURE_GATE } from '../../src/claims/constants.ts';
import type { KubeVirtCR } from '../../src/kube/types.ts';
import { freePort, startOrConnect, type Cluster } from '../harness/index.ts';
import { controllerNamespace, localWebhookConfiguration } from '../local/webhook-config.ts';
import { KubeVirtStandInClient, startKubeVirtStandIn, waitFor, type KubeVirtStandIn } from '../kubevirt-standin/index.ts';
import { ControllerProcess, type ControllerOptions, type LogLine } from '../local/controller-process.ts';
import { Api, kubeConfigFrom, namespaceEvents, paths } from './kube.ts';

/**
 * The shared controller's --resync-period (seconds). Short on purpose: cases that must hold "after several
 * resyncs" see them within seconds, and the steady-state case's window contains several full passes.
 */
export const SHARED_RESYNC_PERIOD_S = 2;

/** Where the KubeVirt CR lives (KubeVirt's convention; the controller watches KubeVirt CRs in every namespace). */
export const KUBEVIRT_NAMESPACE = 'kubevirt';
export const KUBEVIRT_CR_NAME = 'kubevirt';

/** Whether a log line is about namespace `ns` (the reconciler's lines carry `namespace`). */
export const inNamespace = (ns: string) => (l: LogLine): boolean => l['namespace'] === ns;

export interface Tally {
  ran: number;
  passed: number;
  failed: number;
}

export class SuiteEnv {
  cluster!: Cluster;
  kc!: KubeConfig;
  api!: Api;
  /** virtctl-like operations and waits (work whether or not the stand-in is running). */
  kv!: KubeVirtStandInClient;
  dir!: string;
  /** Where every controller of the suite serves the launcher-pod webhook (the MutatingWebhookConfiguration's URL). */
  webhookPort = 0;
  readonly runId = randomBytes(3).toString('hex');
  readonly tally: Tally = { ran: 0, passed: 0, failed: 0 };
  readonly namespaces: string[] = [];
  startedAt = 0;
  #standIn: KubeVirtStandIn | undefined;
  #shared: ControllerProcess | undefined;
  readonly #dedicated = new Set<ControllerProcess>();
  #originalGates: string[] | null | undefined;
  #createdKubeVirtCR = false;

  async setUp(): Promise<void> {
    this.startedAt = Date.now();
    this.dir = mkdtempSync(join(tmpdir(), 'persistent-ips-e2e-suite-'));
    const t0 = Date.now();
    this.cluster = await startOrConnect({ dir: join(this.dir, 'controlplane') });
    console.log(`[e2e] Kubernetes ${this.cluster.version} at ${this.cluster.server} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s; work dir ${this.dir}`);
    this.kc = kubeConfigFrom(this.cluster.kubeconfigPath);
    this.api = new Api(this.cluster.http);
    this.kv = KubeVirtStandInClient.fromKubeconfig(this.cluster.kubeconfigPath);
    await this.#ensureKubeVirtCR();
    await this.#installWebhookConfiguration();
    await this.resumeStandIn();
    this.#shared = await this.#startShared();
  }

  async tearDown(): Promise<void> {
    for (const c of this.#dedicated) await c.stop().catch(() => undefined);
    if (this.cluster && !this.cluster.owned) await this.#cleanUpExistingCluster();
    await this.#shared?.stop().catch(() => undefined);
    await this.pauseStandIn().catch(() => undefined);
    if (this.cluster && !this.cluster.owned) {
      await this.#restoreKubeVirtCR().catch(() => undefined);
      // with failurePolicy Fail and no controller left to answer, it would block every launcher pod of that cluster
      await this.cluster.kubectl(['delete', 'mutatingwebhookconfiguration', localWebhookConfiguration(0).metadata.name, '--ignore-not-found']).catch(() => undefined);
    }
    await this.cluster?.stop();
    if (this.tally.failed === 0 && !process.env['PERSISTENT_IPS_E2E_KEEP']) rmSync(this.dir, { recursive: true, force: true });
    else console.log(`[e2e] kept ${this.dir} (controller, stand-in and control plane logs)`);
  }

  // -- the KubeVirt stand-in --------------------------------------------------------------------------------------

  /** Stops the stand-in: VMs, VMIs and pods stay as they are (as if virt-controller were down) until resumed. */
  async pauseStandIn(): Promise<void> {
    const s = this.#standIn;
    this.#standIn = undefined;
    await s?.stop();
  }

  async resumeStandIn(): Promise<void> {
    this.#standIn ??= await startKubeVirtStandIn({
      kubeconfigPath: this.cluster.kubeconfigPath,
      // its log goes to the work dir (kept when a case fails), not into the test report
      log: pino(
        { level: process.env['KUBEVIRT_STANDIN_LOG_LEVEL'] ?? 'info', base: { component: 'kubevirt-standin' } },
        pino.destination({ dest: join(this.dir, 'kubevirt-standin.log'), append: true, sync: true }),
      ),
    });
  }

  // -- controllers ------------------------------------------------------------------------------------------------

  get shared(): ControllerProcess {
    if (!this.#shared) throw new Error('the shared controller is not running (a case that stopped it must start it again)');
    return this.#shared;
  }

  #startShared(): Promise<ControllerProcess> {
    return ControllerProcess.start({
      name: `shared-${Date.now().toString(36)}`,
      kubeconfig: this.cluster.kubeconfigPath,
      logDir: this.dir,
      webhookPort: this.webhookPort,
      resyncPeriodS: SHARED_RESYNC_PERIOD_S,
    });
  }

  /**
   * The launcher-pod webhook as `npm start` installs it locally: the shipped MutatingWebhookConfiguration, called by
   * URL on 127.0.0.1 (no Service here), and the controller namespace exempt from it. The controller fills in the
   * caBundle from the CA it keeps in a Secret there, so every controller process of the suite serves a certificate
   * the API server trusts. failurePolicy is Fail, as shipped: while no controller runs, launcher pods wait (the
   * stand-in retries, as virt-controller does).
   */
  async #installWebhookConfiguration(): Promise<void> {
    this.webhookPort = await freePort();
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: [
        controllerNamespace,
        { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', ...localWebhookConfiguration(this.webhookPort) },
      ],
    };
    await this.cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(list) });
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

  async startController(opts: Omit<ControllerOptions, 'kubeconfig' | 'logDir' | 'webhookPort'>): Promise<ControllerProcess> {
    if (this.#shared) throw new Error('a dedicated controller runs only inside withoutSharedController()');
    const c = await ControllerProcess.start({ ...opts, kubeconfig: this.cluster.kubeconfigPath, logDir: this.dir, webhookPort: this.webhookPort });
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

  // -- the feature gate in the KubeVirt CR ---------------------------------------------------------------------------

  async #ensureKubeVirtCR(): Promise<void> {
    if (!(await this.api.get(paths.namespaces(KUBEVIRT_NAMESPACE)))) {
      await this.api.create(paths.namespaces(), { apiVersion: 'v1', kind: 'Namespace', metadata: { name: KUBEVIRT_NAMESPACE } });
    }
    const cr = await this.api.get<KubeVirtCR>(paths.kubeVirts(KUBEVIRT_NAMESPACE, KUBEVIRT_CR_NAME));
    if (!cr) {
      this.#createdKubeVirtCR = true;
      await this.api.create(paths.kubeVirts(KUBEVIRT_NAMESPACE), {
        apiVersion: 'kubevirt.io/v1',
        kind: 'KubeVirt',
        metadata: { name: KUBEVIRT_CR_NAME, namespace: KUBEVIRT_NAMESPACE },
        spec: { configuration: { developerConfiguration: { featureGates: [FEATURE_GATE] } } },
      });
      return;
    }
    this.#originalGates = cr.spec?.configuration?.developerConfiguration?.featureGates ?? null;
    await this.setGateInCR(true);
  }

  async #restoreKubeVirtCR(): Promise<void> {
    const path = paths.kubeVirts(KUBEVIRT_NAMESPACE, KUBEVIRT_CR_NAME);
    if (this.#createdKubeVirtCR) await this.api.delete(path);
    else if (this.#originalGates !== undefined) {
      await this.api.mergePatch(path, { spec: { configuration: { developerConfiguration: { featureGates: this.#originalGates } } } });
    }
  }

  /** Adds or removes PersistentIPs in the KubeVirt CR's developerConfiguration.featureGates (other gates kept). */
  async setGateInCR(on: boolean): Promise<void> {
    const path = paths.kubeVirts(KUBEVIRT_NAMESPACE, KUBEVIRT_CR_NAME);
    const cr = await this.api.get<KubeVirtCR>(path);
    if (!cr) throw new Error(`KubeVirt CR ${KUBEVIRT_NAMESPACE}/${KUBEVIRT_CR_NAME} is missing`);
    const gates = (cr.spec?.configuration?.developerConfiguration?.featureGates ?? []).filter((g) => g !== FEATURE_GATE);
    if (on) gates.push(FEATURE_GATE);
    // resourceVersion in a merge patch is a precondition: a concurrent change makes this fail instead of losing it
    await this.api.mergePatch(path, {
      metadata: { resourceVersion: cr.metadata.resourceVersion },
      spec: { configuration: { developerConfiguration: { featureGates: gates } } },
    });
  }

  // -- namespaces -------------------------------------------------------------------------------------------------

  /** A fresh namespace for one case. */
  async newNamespace(slug: string): Promise<string> {
    const name = `e2e-${slug}`.slice(0, 55).replace(/-+$/, '') + `-${this.runId}`;
    await this.api.create(paths.namespaces(), {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name, labels: { 'persistent-ips-e2e': this.runId } },
    });
    this.namespaces.push(name);
    return name;
  }

  /** What a person needs to see when a case failed in `ns`: objects, Events, the controllers' lines about it. */
  async describeNamespace(ns: string): Promise<string> {
    const parts: string[] = [];
    const get = await this.cluster
      .kubectl(['get', 'virtualmachines,virtualmachineinstances,ipamclaims,pods,network-attachment-definitions', '-n', ns, '-o', 'wide'], { check: false })
      .catch((e: unknown) => ({ stdout: '', stderr: String(e) }));
    parts.push(`kubectl get ... -n ${ns}:\n${get.stdout}${get.stderr}`);
    const claims = await this.cluster.kubectl(['get', 'ipamclaims', '-n', ns, '-o', 'yaml'], { check: false }).catch(() => undefined);
    if (claims) parts.push(`ipamclaims:\n${claims.stdout}`);
    const events = await namespaceEvents(this.cluster, ns).catch(() => []);
    parts.push(`events:\n${events.map((e) => `  ${e.type} ${e.reason} ${e.involvedObject.kind}/${e.involvedObject.name}: ${e.message}`).join('\n')}`);
    for (const c of this.controllers()) {
      const lines = c.logsMatching(inNamespace(ns)).slice(-40);
      parts.push(`controller ${c.name} (pid ${c.pid}, log ${c.logFile}) about ${ns}:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`);
    }
    return parts.join('\n');
  }

  async #cleanUpExistingCluster(): Promise<void> {
    // On a cluster that outlives the suite: delete the namespaces while the stand-in and the controller still run
    // (they hold finalizers on VMs and claims), and wait a bounded time.
    for (const ns of this.namespaces) await this.api.delete(paths.namespaces(ns)).catch(() => undefined);
    await waitFor(
      'test namespaces to be deleted',
      async () => {
        for (const ns of this.namespaces) if (await this.api.get(paths.namespaces(ns))) return false;
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    ).catch((e: unknown) => console.log(`[e2e] ${String(e)}`));
  }
}

/** What a case gets: the suite's world, its test context, and fresh namespaces (remembered for diagnostics). */
export interface CaseContext {
  env: SuiteEnv;
  t: TestContext;
  namespace(slug: string): Promise<string>;
}

export const DEFAULT_CASE_TIMEOUT_MS = 180_000;

/**
 * One end-to-end case (a `node:test` test). Counts it for the summary line and, when it fails, attaches what the
 * namespaces it used look like (objects, Events, the controllers' log lines) to the failure.
 */
export function e2eCase(env: SuiteEnv, name: string, fn: (c: CaseContext) => Promise<void>, opts: { timeoutMs?: number } = {}): void {
  it(name, { timeout: opts.timeoutMs ?? DEFAULT_CASE_TIMEOUT_MS }, async (t) => {
    env.tally.ran++;
    const used: string[] = [];
    const ctx: CaseContext = {
      env,
      t,
      namespace: async (slug) => {
        const ns = await env.newNamespace(slug);
        used.push(ns);
        return ns;
      },
    };
    const t0 = Date.now();
    try {
      await fn(ctx);
      env.tally.passed++;
    } catch (err) {
      env.tally.failed++;
      for (const ns of used) t.diagnostic(await env.describeNamespace(ns).catch((e: unknown) => `cannot describe ${ns}: ${String(e)}`));
      throw err;
    } finally {
      t.diagnostic(`${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  });
}
