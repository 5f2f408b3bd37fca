// Where the webhook's serving certificate comes from, as a running process sees it:
// - `self-managed` (default): the Secret `persistent-ips-webhook-cert` in the controller's namespace holds the CA and
//   the serving certificate, the controller keeps it current (certs.ts decides, this file reads and writes) and
//   publishes the CA in the MutatingWebhookConfiguration's caBundle. Every replica runs this loop: writes carry the
//   read resourceVersion, so replicas starting together converge on one CA (the loser of a race re-reads and adopts
//   the winner's). RBAC allows get/create/update on that one Secret (no watch), so other replicas' rotations are
//   picked up by polling (RESYNC_MS) and at each computed rotation time.
// - `external` (cert-manager): the files tls.crt/tls.key in --webhook-cert-dir, reloaded when they change.
// Both hand each new certificate to `onCertificate` (the webhook server's setCertificate).

import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { ifFound, isAlreadyExists, isConflict, isNotFound } from '../kube/errors.ts';
import type { KubeClient } from '../kube/client.ts';
import type { JsonPatchOp } from '../kube/patch.ts';
import type { ResourceDescriptor } from '../kube/resources.ts';
import type { Logger } from '../telemetry/logger.ts';
import { realClock, sleep, type Clock } from '../kube/clock.ts';
import {
  applyPlan,
  caBundlePatch,
  DEFAULT_CERT_POLICY,
  fingerprintOf,
  planCertificates,
  sameState,
  secretToState,
  stateToSecretData,
  webhooksTrust,
  type CertPlan,
  type CertPolicy,
  type CertState,
  type MutatingWebhookConfiguration,
  type Secret,
} from './certs.ts';
import type { CertKeyPair } from '../telemetry/tls-profile.ts';

/** A source of the serving certificate, whichever the provisioning. */
export interface CertificateSource {
  /** Starts providing; resolves once the first attempt is done (a certificate may still be missing: see ready()). */
  start(): Promise<void>;
  stop(): Promise<void>;
  current(): CertKeyPair | undefined;
  /** True once a certificate has been handed to onCertificate: the readiness check "webhook certificate loaded". */
  ready(): boolean;
}

/** The API calls of self-managed provisioning, injected (wired to src/kube's client by the controller). */
export interface CertStoreClient {
  /** GET the Secret; undefined when it does not exist. */
  getSecret(signal: AbortSignal): Promise<Secret | undefined>;
  /** POST; rejects when it already exists (another replica was first). */
  createSecret(secret: Secret, signal: AbortSignal): Promise<Secret>;
  /** PUT with `secret.metadata.resourceVersion` as precondition; rejects on conflict. */
  updateSecret(secret: Secret, signal: AbortSignal): Promise<Secret>;
  /** GET the MutatingWebhookConfiguration; undefined when it does not exist. */
  getWebhookConfiguration(signal: AbortSignal): Promise<MutatingWebhookConfiguration | undefined>;
  /** PATCH (application/json-patch+json). */
  patchWebhookConfiguration(patch: JsonPatchOp[], signal: AbortSignal): Promise<MutatingWebhookConfiguration>;
}

const SECRETS: ResourceDescriptor = { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true };
const MUTATING_WEBHOOK_CONFIGURATIONS: ResourceDescriptor = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  plural: 'mutatingwebhookconfigurations',
  kind: 'MutatingWebhookConfiguration',
  namespaced: false,
};

/** The CertStoreClient on src/kube's client: exactly the verbs the RBAC grants (get/create/update, get/patch). */
export function kubeCertStoreClient(
  client: Pick<KubeClient, 'get' | 'create' | 'replace' | 'jsonPatch'>,
  names: { namespace: string; secretName: string; webhookConfigurationName: string },
): CertStoreClient {
  return {
    getSecret: (signal) => ifFound(client.get<Secret>(SECRETS, names.namespace, names.secretName, { signal })),
    createSecret: (secret, signal) => client.create(SECRETS, secret, { signal }),
    updateSecret: (secret, signal) => client.replace(SECRETS, secret, { signal }),
    getWebhookConfiguration: (signal) =>
      ifFound(client.get<MutatingWebhookConfiguration>(MUTATING_WEBHOOK_CONFIGURATIONS, undefined, names.webhookConfigurationName, { signal })),
    patchWebhookConfiguration: (patch, signal) =>
      client.jsonPatch<MutatingWebhookConfiguration>(MUTATING_WEBHOOK_CONFIGURATIONS, undefined, names.webhookConfigurationName, patch, { signal }),
  };
}

export interface SelfManagedOptions {
  client: CertStoreClient;
  secretName: string;
  namespace: string;
  webhookConfigurationName: string;
  policy: Pick<CertPolicy, 'dnsNames' | 'ipAddresses'> & Partial<CertPolicy>;
  logger: Logger;
  onCertificate: (pair: CertKeyPair) => void;
  clock?: Clock;
}

export interface SelfManagedCertificates extends CertificateSource {
  /** One reconcile pass now (also what the loop runs); resolves with the state it left. */
  reconcile(): Promise<CertState>;
}

const MAX_WRITE_RACES = 5;
/** Look again at least this often, for rotations done by another replica. */
const RESYNC_MS = 60_000;
/** Retries after a failed pass wait 1 s, 2 s, 4 s, ... up to 30 s; a successful pass starts again at 1 s. */
export const RETRY_INITIAL_MS = 1000;
export const RETRY_MAX_MS = 30_000;

/**
 * The Secret cannot be created because its namespace does not exist (a create answered 404). Not a race and not
 * something the next second will fix: usually --controller-namespace / POD_NAMESPACE names a namespace that was
 * never created, or the namespace was deleted under a running controller.
 */
export class NamespaceMissingError extends Error {
  override readonly name = 'NamespaceMissingError';
  readonly namespace: string;
  constructor(namespace: string, cause: unknown) {
    super(`namespace ${namespace} does not exist`, { cause });
    this.namespace = namespace;
  }
}

/** A write that lost to another replica's: the next read shows what it wrote, so re-read at once, without backoff. */
function lostWriteRace(error: unknown): boolean {
  return isConflict(error) || isAlreadyExists(error) || (isNotFound(error) && error.verb !== 'create');
}

export function createSelfManagedCertificates(options: SelfManagedOptions): SelfManagedCertificates {
  return new SelfManaged(options);
}

/** What one pass read of the webhook configuration: `known` false when it could not be read. */
type ConfigRead = { known: true; config: MutatingWebhookConfiguration | undefined } | { known: false };

class SelfManaged implements SelfManagedCertificates {
  readonly #options: SelfManagedOptions;
  readonly #policy: CertPolicy;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #stop = new AbortController();
  #served: CertKeyPair | undefined;
  #nextCheckAt = 0;
  #loop: Promise<void> | undefined;
  /** CA fingerprint → when we first saw (or made) the webhook configuration trust it. */
  readonly #trustedSince = new Map<string, number>();
  #warnedNoConfig = false;
  #retryMs = RETRY_INITIAL_MS;
  /** The namespace was missing at the last attempt (said once at error level; repeats go to debug). */
  #namespaceMissing = false;

  constructor(options: SelfManagedOptions) {
    this.#options = options;
    this.#policy = { ...DEFAULT_CERT_POLICY, ...options.policy };
    this.#clock = options.clock ?? realClock;
    this.#log = options.logger.child({ component: 'webhook-certificates', secret: `${options.namespace}/${options.secretName}` });
  }

  async start(): Promise<void> {
    // The first pass is awaited so that the caller can serve (and report ready) at once; the loop goes on.
    this.#loop = repeat(this.#clock, this.#stop.signal, await this.#attempt(), () => this.#attempt());
  }

  async stop(): Promise<void> {
    this.#stop.abort(new Error('stopped'));
    await this.#loop;
  }

  current = (): CertKeyPair | undefined => this.#served;
  ready = (): boolean => this.#served !== undefined;

  async reconcile(): Promise<CertState> {
    const signal = this.#stop.signal;
    for (let race = 0; ; race++) {
      const secret = await this.#options.client.getSecret(signal);
      const read = await this.#readConfig(signal);
      let state = secretToState(secret);
      const now = this.#clock.now();
      if (read.known) this.#noteTrust(read.config, state, now);
      const plan = planCertificates(now, state, this.#policy, this.#trustedSinceOf(state));
      const wanted = await applyPlan(now, state, plan, this.#policy);
      if (!sameState(state, wanted)) {
        if (!(await this.#writeSecret(plan, wanted, secret, race, signal))) continue;
        state = wanted;
        if (read.known) this.#noteTrust(read.config, state, now);
      }
      // Serve first, then publish: a routine change serves only what the published caBundle already trusts.
      this.#serve(state.serving);
      if (read.known && read.config) await this.#publish(read.config, state, signal);
      const after = planCertificates(this.#clock.now(), state, this.#policy, this.#trustedSinceOf(state));
      this.#nextCheckAt = after.newCa || after.newServing ? this.#clock.now() : after.nextCheckAt;
      return state;
    }
  }

  #trustedSinceOf(state: CertState): number | undefined {
    return this.#trustedSince.get(fingerprintOf(state.ca?.certPem) ?? '');
  }

  async #readConfig(signal: AbortSignal): Promise<ConfigRead> {
    try {
      const config = await this.#options.client.getWebhookConfiguration(signal);
      if (!config && !this.#warnedNoConfig) {
        this.#warnedNoConfig = true;
        this.#log.warn(
          { webhookConfiguration: this.#options.webhookConfigurationName },
          'the MutatingWebhookConfiguration does not exist; its caBundle will be set once it does',
        );
      }
      return { known: true, config };
    } catch (error) {
      // Without knowing what the API servers trust, never switch to a new CA; everything else goes on.
      this.#log.warn({ err: error, webhookConfiguration: this.#options.webhookConfigurationName }, 'cannot read the MutatingWebhookConfiguration');
      return { known: false };
    }
  }

  /** Writes the wanted state; false when another replica wrote first and the pass must read again. */
  async #writeSecret(plan: CertPlan, wanted: CertState, secret: Secret | undefined, race: number, signal: AbortSignal): Promise<boolean> {
    // While the namespace is missing every retry would say this again; the first attempt said it.
    if (plan.reasons.length > 0)
      this.#log[this.#namespaceMissing ? 'debug' : 'info'](
        { newCa: plan.newCa, newServing: plan.newServing, reasons: plan.reasons },
        'renewing webhook certificates',
      );
    try {
      const object = this.#secretObject(wanted, secret);
      if (secret) await this.#options.client.updateSecret(object, signal);
      else await this.#options.client.createSecret(object, signal);
      return true;
    } catch (error) {
      if (signal.aborted) throw error;
      if (!secret && isNotFound(error)) throw new NamespaceMissingError(this.#options.namespace, error);
      // Anything but a lost race (API server down, RBAC, a webhook refusing Secrets) is retried with backoff by the
      // loop; re-reading at once would only repeat the failure.
      if (!lostWriteRace(error) || race + 1 >= MAX_WRITE_RACES) throw error;
      this.#log.debug(
        { error: error instanceof Error ? error.message : String(error) },
        'another replica wrote the certificate Secret first; reading it again',
      );
      return false;
    }
  }

  async #publish(config: MutatingWebhookConfiguration, state: CertState, signal: AbortSignal): Promise<void> {
    const patch = caBundlePatch(config, state.bundle);
    if (patch.length === 0) return;
    await this.#options.client.patchWebhookConfiguration(patch, signal);
    this.#log.info({ webhookConfiguration: this.#options.webhookConfigurationName, cas: state.bundle.length }, 'published the webhook CA bundle');
    // The patch went through: the API servers trust the bundle from now on (plus their propagation delay).
    const current = fingerprintOf(state.ca?.certPem);
    if (current && !this.#trustedSince.has(current)) this.#trustedSince.set(current, this.#clock.now());
  }

  #serve(pair: CertKeyPair | undefined): void {
    const served = this.#served;
    if (!pair || (served && served.certPem === pair.certPem && served.keyPem === pair.keyPem)) return;
    this.#options.onCertificate(pair);
    this.#served = pair;
    this.#log.info({ notAfter: new X509Certificate(pair.certPem).validTo }, 'serving a new webhook certificate');
  }

  #noteTrust(config: MutatingWebhookConfiguration | undefined, state: CertState, now: number): void {
    const print = fingerprintOf(state.ca?.certPem);
    if (!print || !state.ca) return;
    // No configuration: nobody calls the webhook through a caBundle, so nothing can break by using the CA.
    const trusts = config === undefined || webhooksTrust(config, state.ca.certPem);
    if (!trusts) this.#trustedSince.delete(print);
    else if (!this.#trustedSince.has(print)) this.#trustedSince.set(print, now);
  }

  #secretObject(state: CertState, existing: Secret | undefined): Secret {
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        ...(existing?.metadata ?? {}),
        name: this.#options.secretName,
        namespace: this.#options.namespace,
        labels: { ...(existing?.metadata.labels ?? {}), 'app.kubernetes.io/name': 'persistent-ips', 'app.kubernetes.io/component': 'webhook-certificate' },
      },
      // The type of an existing Secret cannot change; a new one is a TLS Secret (tls.crt/tls.key are present).
      type: existing?.type ?? 'kubernetes.io/tls',
      data: stateToSecretData(state),
    };
  }

  /** One pass, never throwing; resolves with how long to wait before the next, or undefined once stopped. */
  async #attempt(): Promise<number | undefined> {
    try {
      await this.reconcile();
    } catch (error) {
      if (this.#stop.signal.aborted) return undefined;
      const delay = this.#retryMs;
      this.#retryMs = Math.min(this.#retryMs * 2, RETRY_MAX_MS);
      this.#reportFailure(error, delay);
      return delay;
    }
    if (this.#namespaceMissing) {
      this.#namespaceMissing = false;
      this.#log.info({ namespace: this.#options.namespace }, 'the controller namespace exists now; the webhook certificate is provisioned');
    }
    this.#retryMs = RETRY_INITIAL_MS;
    return Math.max(0, Math.min(this.#nextCheckAt - this.#clock.now(), RESYNC_MS));
  }

  #reportFailure(error: unknown, delay: number): void {
    if (!(error instanceof NamespaceMissingError)) {
      this.#log.error({ err: error, retryInMs: delay }, 'failed to provision the webhook certificate; retrying');
    } else if (!this.#namespaceMissing) {
      this.#namespaceMissing = true;
      this.#log.error(
        { namespace: error.namespace },
        `namespace ${error.namespace} does not exist, so the webhook certificate Secret cannot be stored and the webhook cannot serve: ` +
          `create the namespace, or point --controller-namespace (or POD_NAMESPACE) at the namespace the controller is installed in; retrying quietly`,
      );
    } else {
      this.#log.debug({ namespace: error.namespace, retryInMs: delay }, 'the controller namespace still does not exist');
    }
  }
}

/** Sleeps `delay`, runs `pass`, and again for the delay it returns, until it returns undefined or `signal` aborts. */
async function repeat(clock: Clock, signal: AbortSignal, delay: number | undefined, pass: () => Promise<number | undefined>): Promise<void> {
  for (; delay !== undefined; delay = await pass()) {
    try {
      await sleep(clock, delay, signal);
    } catch {
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// External provisioning: files written by someone else (cert-manager through a Secret volume).

export interface FileCertificatesOptions {
  dir: string;
  logger: Logger;
  onCertificate: (pair: CertKeyPair) => void;
  clock?: Clock;
}

/** Poll this often too, since file events are unreliable on some volumes. */
const POLL_INTERVAL_MS = 10_000;

/** Loads tls.crt and tls.key and checks that they belong together; rejects when the files are not usable (yet). */
async function loadCertificateFiles(dir: string): Promise<CertKeyPair> {
  const [certFile, keyFile] = [join(dir, 'tls.crt'), join(dir, 'tls.key')];
  const [certPem, keyPem] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  const cert = new X509Certificate(certPem);
  if (!cert.checkPrivateKey(createPrivateKey(keyPem))) throw new Error(`${keyFile} does not match ${certFile}`);
  return { certPem, keyPem };
}

export interface FileCertificates extends CertificateSource {
  /** Reads the files again now (file events and polling call it; so may a SIGHUP handler). */
  reload(): Promise<void>;
}

export function createFileCertificates(options: FileCertificatesOptions): FileCertificates {
  const clock = options.clock ?? realClock;
  const log = options.logger.child({ component: 'webhook-certificates', dir: options.dir });
  const stopController = new AbortController();
  let served: CertKeyPair | undefined;
  let watcher: FSWatcher | undefined;
  let loop: Promise<void> | undefined;
  let reloading: Promise<void> = Promise.resolve();
  let queued = false;
  let lastError = '';

  const reloadOnce = async (): Promise<void> => {
    try {
      const pair = await loadCertificateFiles(options.dir);
      lastError = '';
      if (served && served.certPem === pair.certPem && served.keyPem === pair.keyPem) return;
      options.onCertificate(pair);
      served = pair;
      log.info({ notAfter: new X509Certificate(pair.certPem).validTo }, 'loaded the webhook certificate');
    } catch (error) {
      // A Secret volume swaps both files at once, but a plain directory may be caught half-written: keep serving
      // what we have and look again at the next event or poll.
      const message = error instanceof Error ? error.message : String(error);
      if (message !== lastError)
        log.warn({ err: error }, served ? 'cannot reload the webhook certificate; keeping the current one' : 'webhook certificate not available yet');
      lastError = message;
    }
  };
  /** Coalesces bursts of file events into at most one reload in flight plus one queued. */
  const reload = (): Promise<void> => {
    if (queued) return reloading;
    queued = true;
    reloading = reloading.then(() => {
      queued = false;
      return reloadOnce();
    });
    return reloading;
  };

  return {
    reload,
    async start() {
      await reload();
      try {
        watcher = watch(options.dir, { persistent: false }, () => void reload());
        watcher.on('error', (error) => log.warn({ err: error }, 'watching the certificate directory failed; polling only'));
      } catch (error) {
        log.warn({ err: error }, 'cannot watch the certificate directory; polling only');
      }
      loop = repeat(clock, stopController.signal, POLL_INTERVAL_MS, async () => {
        await reload();
        return POLL_INTERVAL_MS;
      });
    },
    async stop() {
      stopController.abort(new Error('stopped'));
      watcher?.close();
      await loop;
      await reloading;
    },
    current: () => served,
    ready: () => served !== undefined,
  };
}
