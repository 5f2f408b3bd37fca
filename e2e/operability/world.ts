// What every operability file needs around the controller: its own world (one per file; e2e/kubevirt's World with
// a real control plane with KubeVirt's real CRDs, the KubeVirt CR with the PersistentIPs gate, the node and virt-api
// stand-ins, and KubeVirt's real virt-controller where the file drives VMs), the controllers it starts, REST through
// the suite's Api (independent of the controller's client), persistent and ordinary NADs, the URL-based webhook
// configuration, and launcher pods made directly through the API (rendered as virt-controller renders them:
// ../kubevirt/launcher-fixture.ts) where a test needs to see each admission itself, with virt-controller stopped
// meanwhile (withKubeVirtSilent).
import { X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import type { V1Pod } from '@kubernetes/client-node';
import type { IPAMClaim } from '../../src/kube/types.ts';
import { poll, type KubeResponse } from '../harness/index.ts';
import {
  buildVM,
  launcherPodName,
  podInterfaceName,
  renderLauncherPod,
  renderVmiFromVm,
  type VMNetworkRequest,
  type Vm,
  type Vmi,
} from '../kubevirt/launcher-fixture.ts';
import { podElements } from '../kubevirt/flows.ts';
import { World as KubeVirtWorld } from '../kubevirt/world.ts';
import { createPersistentNad } from '../suite/fixtures.ts';
import { type CoreEvent, paths } from '../suite/kube.ts';
import { CONTROLLER_NAMESPACE, controllerNamespace, localWebhookConfiguration } from '../local/webhook-config.ts';

export { CONTROLLER_NAMESPACE };
export const WEBHOOK_CONFIGURATION = 'persistent-ips-launcher-pods';
export const WEBHOOK_SECRET = 'persistent-ips-webhook-cert';
export const LEASE_NAME = 'persistent-ips-leader';

export { paths };

export interface Secret {
  metadata: { name: string; resourceVersion?: string };
  type?: string;
  data?: Record<string, string>;
}

export interface MutatingWebhookConfiguration {
  metadata: { name: string; resourceVersion?: string };
  webhooks: { name: string; clientConfig: { url?: string; caBundle?: string } }[];
}

export interface Lease {
  metadata: { name: string; resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

/** A pod creation through the API server (admission included): the pod as stored, or why it was refused. */
export type PodCreation = { ok: true; pod: V1Pod; ms: number } | { ok: false; status: number; message: string; ms: number };

/** A launcher pod virt-controller could not create: its FailedCreate Event on the VMI (e.g. the webhook refused it). */
export interface RefusedLauncherPod {
  namespace: string;
  vmi: string;
  message: string;
}

export class World extends KubeVirtWorld {
  /** VMIs made directly while KubeVirt is silent: deleted before virt-controller starts again. */
  readonly #directVmis: { namespace: string; name: string }[] = [];
  #silent: boolean;
  readonly #controllerNamespace: boolean;
  /** The file's area, in its progress lines and its summary line (summaryAtEnd). */
  readonly label: string;

  /**
   * This file's world: control plane, KubeVirt's CRDs (only those the controller reads when virt-controller does not
   * run) and CR (gate on), the node and virt-api stand-ins, virt-controller when `virtController` (default false:
   * files that drive no VM leave KubeVirt silent), and the controller namespace (labelled as in manifests/default, so
   * the webhook skips it; unless `controllerNamespace: false`). The webhook configuration and the controllers (with
   * the controller's default resync period) are the file's to start.
   */
  constructor(label: string, opts: { controllerNamespace?: boolean; virtController?: boolean } = {}) {
    super({
      ovnKubernetes: false,
      controller: false,
      webhook: false,
      virtController: opts.virtController ?? false,
      kubevirtCrds: opts.virtController === true ? 'all' : 'controller',
      resyncPeriodS: undefined,
      onLog: (l) => console.log(`[operability:${label}] ${l}`),
    });
    this.#silent = opts.virtController !== true;
    this.#controllerNamespace = opts.controllerNamespace !== false;
    this.label = label;
  }

  override async setUp(): Promise<void> {
    await super.setUp();
    if (this.#controllerNamespace) await this.ensureNamespace(controllerNamespace);
  }

  /**
   * Runs `fn` with virt-controller stopped, for cases that create VMIs and launcher pods directly (createVmi,
   * createLauncherPod) and must see only their own admissions; then deletes those VMIs and starts virt-controller
   * again (which finishes their deletion: it never makes a pod for a terminating VMI).
   */
  async withKubeVirtSilent<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#silent) return fn();
    await this.stopVirtController();
    this.#silent = true;
    try {
      return await fn();
    } finally {
      for (const v of this.#directVmis.splice(0)) await this.api.delete(paths.vmis(v.namespace, v.name)).catch(() => undefined);
      await this.startVirtController();
      this.#silent = false;
    }
  }

  /** Launcher pods virt-controller could not create (its FailedCreate Events), in `namespace` or everywhere. */
  async rejectedLauncherPods(namespace?: string): Promise<RefusedLauncherPod[]> {
    const path = namespace ? paths.events(namespace) : '/api/v1/events';
    const events = await this.api.list<CoreEvent>(`${path}?fieldSelector=${encodeURIComponent('reason=FailedCreate')}`);
    return events.items
      .filter((e) => e.involvedObject.kind === 'VirtualMachineInstance')
      .map((e) => ({ namespace: e.metadata.namespace, vmi: e.involvedObject.name, message: e.message ?? '' }));
  }

  async ensureNamespace(obj: { metadata: { name: string } } & Record<string, unknown>): Promise<void> {
    if (await this.api.get(paths.namespaces(obj.metadata.name))) return;
    await this.api.create(paths.namespaces(), obj);
  }

  // -- fixtures ---------------------------------------------------------------------------------------------------

  /** An OVN-Kubernetes layer2 NAD; persistent unless `persistent: false`. `network` is the config's `name`. */
  async createNad(namespace: string, name: string, o: { network: string; persistent?: boolean; subnets?: string }): Promise<void> {
    await createPersistentNad(this, namespace, name, { network: o.network, allowPersistentIPs: o.persistent !== false, subnets: o.subnets });
  }

  /**
   * The MutatingWebhookConfiguration of manifests/webhook (same rules, selectors, failurePolicy), called by URL at
   * https://127.0.0.1:PORT: local runs have no Service. Replaces an earlier one (and with it its caBundle).
   */
  async installWebhookConfiguration(port: number): Promise<void> {
    await this.api.delete(paths.webhookConfigurations(WEBHOOK_CONFIGURATION));
    await this.api.create(paths.webhookConfigurations(), {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      ...localWebhookConfiguration(port),
    });
  }

  /** Waits until the controller has written its CA into every webhook's caBundle; returns the bundle (PEM). */
  async waitForCaBundle(timeoutMs = 30_000): Promise<string> {
    return poll('the webhook configuration caBundle', timeoutMs, async () => {
      const config = await this.api.get<MutatingWebhookConfiguration>(paths.webhookConfigurations(WEBHOOK_CONFIGURATION));
      const bundles = config?.webhooks.map((w) => w.clientConfig.caBundle ?? '') ?? [];
      return bundles.length > 0 && bundles.every((b) => b !== '' && b === bundles[0]) ? Buffer.from(bundles[0]!, 'base64').toString('utf8') : undefined;
    });
  }

  // -- VMIs and launcher pods made directly -----------------------------------------------------------------------

  /**
   * Creates a standalone VMI (no VM) with these secondary networks; returns it as stored. Where virt-controller runs,
   * it makes a launcher pod of its own for the VMI too: a case that must see only its own admissions makes the VMI
   * inside withKubeVirtSilent.
   */
  async createVmi(namespace: string, name: string, networks: VMNetworkRequest[]): Promise<Vmi> {
    // A standalone VMI: no owner, and none of the VM controller's finalizers (virt-api's comes from its stand-in)
    const vmi = renderVmiFromVm(buildVM({ namespace, name, networks }) as Vm) as Vmi & { metadata: { ownerReferences?: unknown; finalizers?: unknown } };
    delete vmi.metadata.ownerReferences;
    delete vmi.metadata.finalizers;
    const created = await this.api.create<Vmi>(paths.vmis(namespace), vmi);
    if (this.#silent) this.#directVmis.push({ namespace, name });
    return created;
  }

  /**
   * Creates a launcher pod for `vmi` through the API server (so through admission and the webhook), as virt-controller
   * renders it (the launcher fixture). Never throws for a refusal: returns it.
   */
  async createLauncherPod(vmi: Vmi, purpose: string): Promise<PodCreation> {
    const pod = renderLauncherPod(vmi, { name: launcherPodName(vmi.metadata.name, vmi.metadata.uid!, purpose) });
    return this.createPod(vmi.metadata.namespace!, pod);
  }

  async createPod(namespace: string, pod: V1Pod): Promise<PodCreation> {
    const t0 = Date.now();
    let res: KubeResponse;
    try {
      res = await this.cp.http.request('POST', paths.pods(namespace), pod);
    } catch (err) {
      return { ok: false, status: 0, message: err instanceof Error ? err.message : String(err), ms: Date.now() - t0 };
    }
    const ms = Date.now() - t0;
    if (res.status === 201) return { ok: true, pod: res.json<V1Pod>(), ms };
    let message = res.body.slice(0, 600);
    try {
      message = res.json<{ message?: string }>().message ?? message;
    } catch {
      /* not JSON */
    }
    return { ok: false, status: res.status, message, ms };
  }

  /** Waits until the namespace holds exactly the claims `names` (and returns them). */
  async waitForClaims(namespace: string, names: string[], timeoutMs = 30_000): Promise<IPAMClaim[]> {
    const want = [...names].sort().join(',');
    return poll(`claims ${want} in ${namespace}`, timeoutMs, async () => {
      const claims = await this.api.claims(namespace);
      return claims
        .map((c) => c.metadata.name)
        .sort()
        .join(',') === want
        ? claims
        : undefined;
    });
  }
}

/** pod interface name → ipam-claim-reference (undefined when the element has none), for every element. */
export function claimReferences(pod: V1Pod): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const e of podElements(pod)) out[e.interface ?? e.name] = e['ipam-claim-reference'] as string | undefined;
  return out;
}

/** What `claimReferences` must be for a VM's networks: `{ networkName: claimName | undefined }` by pod interface. */
export function expectedReferences(byNetwork: Record<string, string | undefined>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [network, claim] of Object.entries(byNetwork)) out[podInterfaceName(network)] = claim;
  return out;
}

/** The serving certificate and CA the Secret holds now (serial numbers and fingerprints). */
export function secretCertificates(secret: Secret | undefined): { servingSerial?: string; caFingerprint?: string } {
  const pem = (k: string) => (secret?.data?.[k] ? Buffer.from(secret.data[k]!, 'base64').toString('utf8') : undefined);
  const out: { servingSerial?: string; caFingerprint?: string } = {};
  const serving = pem('tls.crt');
  if (serving) out.servingSerial = new X509Certificate(serving).serialNumber;
  const ca = pem('ca.crt');
  if (ca) out.caFingerprint = new X509Certificate(ca).fingerprint256;
  return out;
}

/**
 * A TLS handshake with 127.0.0.1:port: the certificate the server presents, and whether it verifies against `ca` (for
 * the IP 127.0.0.1). The connection is accepted either way, so that an untrusted certificate can still be read.
 */
export function handshake(port: number, ca: string): Promise<{ authorized: boolean; error?: string; serial?: string }> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, ca, rejectUnauthorized: false }, () => {
      const serial = socket.getPeerX509Certificate()?.serialNumber;
      const out = {
        authorized: socket.authorized,
        ...(socket.authorizationError ? { error: String(socket.authorizationError) } : {}),
        ...(serial ? { serial } : {}),
      };
      socket.end();
      resolve(out);
    });
    socket.setTimeout(3000, () => socket.destroy(new Error(`TLS handshake with 127.0.0.1:${port} timed out`)));
    socket.on('error', (err) => resolve({ authorized: false, error: err.message }));
  });
}
