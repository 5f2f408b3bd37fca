// A real local control plane for tests and local mode: unmodified upstream etcd, kube-apiserver and
// kube-controller-manager (garbage collector + namespace controllers only), each its own process.
//
//   const cp = await startControlPlane({ dir: '/tmp/x' });
//   ... use cp.kubeconfigPath (or cp.server + cp.token + cp.caFile) ...
//   await cp.stop();
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { binariesIn, ensureBinaries, type Binaries } from './binaries.ts';
import { runKubectl, type KubectlOptions, type KubectlResult } from './kubectl.ts';
import { KubeHttp, poll } from './kubehttp.ts';
import { CRDS_DIR } from './paths.ts';
import { spawnLogged, stopProcess, type ManagedProcess } from './process.ts';

export type ComponentName = 'etcd' | 'kube-apiserver' | 'kube-controller-manager';

export interface StartOptions {
  /** Working directory: etcd data, certificates, logs (DIR/logs/<name>.log) and DIR/kubeconfig. Created if missing;
   * anything a previous run left in it is replaced. */
  dir: string;
  /** Progress lines (build progress included). Default: none. */
  onLog?: (line: string) => void;
  /** Called as soon as each process is started (the detached supervisor records the pids). */
  onProcess?: (name: ComponentName, pid: number) => void;
  /** Called whenever a started process exits, with its exit code or signal; `expected` once stop() has begun. */
  onExit?: (name: ComponentName, pid: number, code: number | string, expected: boolean) => void;
  /** Directory with prebuilt binaries; default: run e2e/controlplane/build.sh (cached). */
  binDir?: string;
  /** CRD manifests to install before the controller manager starts. Default e2e/crds (test stand-ins + the IPAMClaim CRD); [] for none. */
  crdDirs?: string[];
  /** Stop the processes on SIGINT/SIGTERM of this process, then re-raise the signal. Default true. */
  handleSignals?: boolean;
  /** Grace period between SIGTERM and SIGKILL when stopping. Default 10 s. */
  stopGraceMs?: number;
  /** How ports are chosen (default freePort). A hook for tests of the retry on ports taken meanwhile. */
  pickPort?: () => Promise<number>;
}

/** What tests need from a cluster, whether the harness started it or it already existed. */
export interface Cluster {
  /** A kubeconfig file for clients (kubectl, @kubernetes/client-node). */
  kubeconfigPath: string;
  /** e.g. https://127.0.0.1:PORT */
  server: string;
  /** gitVersion from /version, e.g. v1.34.2. */
  version: string;
  /** An HTTPS client authenticated as the kubeconfig's user. */
  http: KubeHttp;
  /** Runs kubectl (the version-matched one when built) with this kubeconfig. */
  kubectl(args: string[], opts?: Omit<KubectlOptions, 'kubeconfig' | 'binDir'>): Promise<KubectlResult>;
  /** True when the harness started the processes (false for PERSISTENT_IPS_EXISTING_KUBECONFIG). */
  owned: boolean;
  /** Stops what the harness started (nothing for an existing cluster). Idempotent. */
  stop(): Promise<void>;
}

export interface ControlPlane extends Cluster {
  /** DIR/kubeconfig: server https://127.0.0.1:PORT, bearer token user (system:masters), CA = the apiserver cert. */
  kubeconfigPath: string;
  /** Bearer token of the admin user (group system:masters). */
  token: string;
  /** The apiserver's self-signed serving certificate chain (from --cert-dir), usable as CA. */
  caFile: string;
  binDir: string;
  dir: string;
  etcdUrl: string;
  pids: Record<ComponentName, number>;
  logFiles: Record<ComponentName, string>;
  owned: true;
  /** Stops every process (reverse start order, SIGTERM then SIGKILL). Idempotent. */
  stop(): Promise<void>;
  /**
   * Stops kube-apiserver alone (SIGKILL: an outage, not a shutdown); etcd and the controller manager keep running.
   * `startApiServer()` brings it back on the same port with the same certificate and tokens, so clients reconnect
   * with the configuration they have.
   */
  stopApiServer(): Promise<void>;
  /** Starts kube-apiserver again after `stopApiServer()`, and waits until it serves. */
  startApiServer(): Promise<void>;
}

/** Discovers a free TCP port on 127.0.0.1 by binding port 0. The caller retries if it is taken before use. */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolvePort(port) : reject(new Error('no port'))));
    });
  });
}

/** Deadline for the whole start, once the binaries exist. */
const START_TIMEOUT_MS = 180_000;
const ADDRESS_IN_USE = /address already in use|bind: address already in use|EADDRINUSE/i;

/** What a log file holds from `offset` on (at most the last 64 KiB). */
function logSince(file: string, offset: number): string {
  const fd = openSync(file, 'r');
  try {
    const size = statSync(file).size;
    const from = Math.max(offset, size - 65536);
    const buf = Buffer.alloc(Math.max(0, size - from));
    readSync(fd, buf, 0, buf.length, from);
    return buf.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Generates the admin token and the token file, and the service-account RSA key. */
function writeSecrets(apiDir: string): { token: string; tokenFile: string; saKey: string; saPub: string } {
  const token = randomBytes(24).toString('hex');
  const tokenFile = join(apiDir, 'tokens.csv');
  writeFileSync(tokenFile, `${token},admin,admin-uid,"system:masters"\n`, { mode: 0o600 });
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const saKey = join(apiDir, 'sa.key');
  const saPub = join(apiDir, 'sa.pub');
  writeFileSync(saKey, privateKey, { mode: 0o600 });
  writeFileSync(saPub, publicKey);
  return { token, tokenFile, saKey, saPub };
}

export function kubeconfigYaml(server: string, caFile: string, token: string, namespace = 'default'): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: persistent-ips',
    '    cluster:',
    `      server: ${server}`,
    `      certificate-authority: ${caFile}`,
    'users:',
    '  - name: admin',
    '    user:',
    `      token: ${token}`,
    'contexts:',
    '  - name: persistent-ips',
    '    context:',
    '      cluster: persistent-ips',
    '      user: admin',
    `      namespace: ${namespace}`,
    'current-context: persistent-ips',
    '',
  ].join('\n');
}

export async function startControlPlane(opts: StartOptions): Promise<ControlPlane> {
  const log = opts.onLog ?? (() => {});
  const dir = resolve(opts.dir);
  const grace = opts.stopGraceMs ?? 10_000;
  const pickPort = opts.pickPort ?? freePort;
  const t0 = Date.now();
  const since = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;

  const bins: Binaries = opts.binDir ? binariesIn(opts.binDir) : await ensureBinaries(log);
  const tStart = Date.now();
  const deadline = tStart + START_TIMEOUT_MS;
  const remaining = () => Math.max(1000, deadline - Date.now());

  // Fresh state: what a previous run left is replaced (a running cluster in DIR would be a caller error).
  const logDir = join(dir, 'logs');
  const etcdDir = join(dir, 'etcd');
  const apiDir = join(dir, 'apiserver');
  const certDir = join(apiDir, 'certs');
  for (const d of [etcdDir, apiDir, join(dir, 'controller-manager')]) rmSync(d, { recursive: true, force: true });
  for (const name of ['etcd', 'kube-apiserver', 'kube-controller-manager']) rmSync(join(logDir, `${name}.log`), { force: true });
  for (const d of [logDir, etcdDir, certDir, join(dir, 'controller-manager')]) mkdirSync(d, { recursive: true, mode: 0o700 });

  const started: ManagedProcess[] = [];
  /** Where each process's output starts in its (appended) log file. */
  const logStart = new Map<ManagedProcess, number>();
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      removeSignalHandlers();
      process.off('exit', killAllSync);
      for (const p of [...started].reverse()) {
        log(`stopping ${p.name} (pid ${p.pid})`);
        await stopProcess(p, grace);
      }
    })();
    return stopping;
  };
  // Last resort if this process exits without stop(): never leave the children behind.
  const killAllSync = () => {
    for (const p of [...started].reverse()) {
      if (p.hasExited()) continue;
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  };
  process.on('exit', killAllSync);

  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping the control plane`);
    void stop().finally(() => {
      process.kill(process.pid, signal);
    });
  };
  const removeSignalHandlers = () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  if (opts.handleSignals !== false) {
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }

  const launch = (name: ComponentName, command: string, args: string[]): ManagedProcess => {
    if (stopping) throw new Error(`not starting ${name}: the control plane is stopping`);
    const logFile = join(logDir, `${name}.log`);
    writeFileSync(logFile, `# ${command} ${args.join(' ')}\n`, { flag: 'a' });
    const offset = statSync(logFile).size;
    const p = spawnLogged(name, command, args, logFile);
    logStart.set(p, offset);
    started.push(p);
    void p.exited.then((code) => opts.onExit?.(name, p.pid, code, stopping !== undefined));
    opts.onProcess?.(name, p.pid);
    log(`${name} started (pid ${p.pid}), log ${logFile}`);
    return p;
  };
  const diedReason = (p: ManagedProcess) => () =>
    p.hasExited()
      ? `${p.name} exited early; its last lines in ${p.logFile}:\n${logSince(p.logFile, logStart.get(p) ?? 0)
          .trimEnd()
          .split('\n')
          .slice(-20)
          .join('\n')}`
      : undefined;

  /** Starts a server on fresh ports; when its log says the port was taken meanwhile, tries new ports. */
  const withPortRetry = async <T>(name: ComponentName, attempt: () => Promise<T>): Promise<T> => {
    for (let i = 1; ; i++) {
      try {
        return await attempt();
      } catch (err) {
        const last = started.at(-1);
        if (i < 5 && last?.name === name && last.hasExited() && ADDRESS_IN_USE.test(logSince(last.logFile, logStart.get(last) ?? 0))) {
          log(`${name}: a port was taken between discovery and bind; retrying with new ports`);
          started.pop();
          continue;
        }
        throw err;
      }
    }
  };

  let apiArgs: string[] = [];
  try {
    // etcd
    const etcd = await withPortRetry('etcd', async () => {
      const [clientPort, peerPort] = [await pickPort(), await pickPort()];
      const clientUrl = `http://127.0.0.1:${clientPort}`;
      const peerUrl = `http://127.0.0.1:${peerPort}`;
      rmSync(join(etcdDir, 'data'), { recursive: true, force: true });
      const p = launch('etcd', bins.etcd, [
        '--name=default',
        `--data-dir=${join(etcdDir, 'data')}`,
        `--listen-client-urls=${clientUrl}`,
        `--advertise-client-urls=${clientUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=default=${peerUrl}`,
        '--initial-cluster-state=new',
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ]);
      await poll(
        'etcd /health',
        remaining(),
        async () => {
          const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(2000) });
          return res.status === 200 ? true : undefined;
        },
        { abort: diedReason(p), intervalMs: 100 },
      );
      return { p, clientUrl };
    });
    log(`etcd ready at ${etcd.clientUrl} (${since()})`);

    // kube-apiserver
    const secrets = writeSecrets(apiDir);
    const caFile = join(certDir, 'apiserver.crt');
    const api = await withPortRetry('kube-apiserver', async () => {
      const port = await pickPort();
      // A fresh serving certificate per attempt (the apiserver refuses a half-written pair).
      rmSync(certDir, { recursive: true, force: true });
      mkdirSync(certDir, { recursive: true, mode: 0o700 });
      apiArgs = [
        `--etcd-servers=${etcd.clientUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${port}`,
        `--cert-dir=${certDir}`,
        `--token-auth-file=${secrets.tokenFile}`,
        '--authorization-mode=RBAC',
        '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
        `--service-account-key-file=${secrets.saPub}`,
        `--service-account-signing-key-file=${secrets.saKey}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--allow-privileged=true',
        '--disable-admission-plugins=ServiceAccount',
        '--endpoint-reconciler-type=none',
        '--profiling=false',
      ];
      const p = launch('kube-apiserver', bins.kubeApiserver, apiArgs);
      const server = `https://127.0.0.1:${port}`;
      // kube-apiserver writes its serving certificate and CA at start-up, before the port is served, but not
      // atomically: a file read while empty or half-written would fail every later attempt as an untrusted chain
      // (seen under load). So each attempt reads it again, and a changed file gets a new client.
      let ca = '';
      let current: KubeHttp | undefined;
      const client = (): KubeHttp => {
        const now = readFileSync(caFile, 'utf8');
        if (current === undefined || now !== ca) [ca, current] = [now, new KubeHttp({ server, token: secrets.token, ca: now })];
        return current;
      };
      await poll('kube-apiserver /readyz', remaining(), async () => ((await client().get('/readyz')).status === 200 ? true : undefined), {
        abort: diedReason(p),
        intervalMs: 250,
      });
      const http = client();
      await poll(
        'GET /api/v1/namespaces/default',
        remaining(),
        async () => ((await http.get('/api/v1/namespaces/default')).status === 200 ? true : undefined),
        { abort: diedReason(p), intervalMs: 250 },
      );
      return { p, server, http };
    });
    const version = (await api.http.expect('GET', '/version', [200])).json<{ gitVersion: string }>().gitVersion;
    log(`kube-apiserver ${version} ready at ${api.server} (${since()})`);

    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfigYaml(api.server, caFile, secrets.token), { mode: 0o600 });

    // CRDs before the controller manager: its garbage collector refreshes discovery only every 30 s.
    const crdDirs = opts.crdDirs ?? [CRDS_DIR];
    for (const crdDir of crdDirs) {
      const names = await installCrds(kubeconfigPath, crdDir, bins.binDir);
      await waitForCrdsEstablished(api.http, names, remaining());
      log(`CRDs established: ${names.join(', ')} (${since()})`);
    }

    // kube-controller-manager
    const kcmKubeconfig = join(dir, 'controller-manager', 'kubeconfig');
    writeFileSync(kcmKubeconfig, kubeconfigYaml(api.server, caFile, secrets.token), { mode: 0o600 });
    const kcm = launch('kube-controller-manager', bins.kubeControllerManager, [
      `--kubeconfig=${kcmKubeconfig}`,
      '--controllers=garbagecollector,namespace',
      '--leader-elect=false',
      '--secure-port=0',
      '--concurrent-gc-syncs=5',
    ]);
    await verifyGarbageCollector(api.http, { timeoutMs: Math.min(remaining(), 60_000), abort: diedReason(kcm) });
    log(`garbage collector works (${since()})`);

    let apiProcess = api.p;
    const stopApiServer = async (): Promise<void> => {
      log(`stopping kube-apiserver (pid ${apiProcess.pid}) for an outage`);
      await stopProcess(apiProcess, 0);
      started.splice(started.indexOf(apiProcess), 1);
    };
    const startApiServer = async (): Promise<void> => {
      if (!apiProcess.hasExited()) throw new Error('kube-apiserver is still running');
      const p = launch('kube-apiserver', bins.kubeApiserver, apiArgs);
      // Keep the reverse stop order: the API server before etcd, after the controller manager.
      started.splice(started.indexOf(p), 1);
      started.splice(1, 0, p);
      apiProcess = p;
      await poll('kube-apiserver /readyz after a restart', 120_000, async () => ((await api.http.get('/readyz')).status === 200 ? true : undefined), {
        abort: diedReason(p),
        intervalMs: 250,
      });
      cp.pids['kube-apiserver'] = p.pid;
      log(`kube-apiserver serving again (pid ${p.pid})`);
    };

    const cp: ControlPlane = {
      stopApiServer,
      startApiServer,
      kubeconfigPath,
      server: api.server,
      token: secrets.token,
      caFile,
      version,
      binDir: bins.binDir,
      dir,
      etcdUrl: etcd.clientUrl,
      pids: { etcd: etcd.p.pid, 'kube-apiserver': api.p.pid, 'kube-controller-manager': kcm.pid },
      logFiles: { etcd: etcd.p.logFile, 'kube-apiserver': api.p.logFile, 'kube-controller-manager': kcm.logFile },
      http: api.http,
      kubectl: (args, o = {}) => runKubectl(args, { ...o, kubeconfig: kubeconfigPath, binDir: bins.binDir }),
      owned: true,
      stop,
    };
    log(`control plane ready in ${((Date.now() - tStart) / 1000).toFixed(1)} s (kubeconfig ${kubeconfigPath})`);
    return cp;
  } catch (err) {
    log(`start failed: ${err instanceof Error ? err.message : String(err)}`);
    await stop();
    throw err;
  }
}

/**
 * Applies every CRD manifest of `crdDir` (server-side apply through kubectl, so `kustomization.yaml` is honoured when
 * present) and returns the CRD names.
 */
export async function installCrds(kubeconfig: string, crdDir: string, binDir?: string): Promise<string[]> {
  const kustomize = existsSync(join(crdDir, 'kustomization.yaml'));
  const res = await runKubectl(
    ['apply', '--server-side', '--force-conflicts', '--field-manager=persistent-ips-harness', kustomize ? '-k' : '-f', crdDir, '-o', 'name'],
    {
      kubeconfig,
      ...(binDir ? { binDir } : {}),
    },
  );
  return res.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('customresourcedefinition.apiextensions.k8s.io/'))
    .map((l) => l.slice('customresourcedefinition.apiextensions.k8s.io/'.length));
}

interface Crd {
  spec: { group: string; versions: { name: string; served: boolean }[]; names: { plural: string } };
  status?: { conditions?: { type: string; status: string }[] };
}

/** Waits until each CRD is Established and its resources are listable. */
export async function waitForCrdsEstablished(http: KubeHttp, names: string[], timeoutMs = 30_000): Promise<void> {
  for (const name of names) {
    const crd = await poll(`CRD ${name} established`, timeoutMs, async () => {
      const res = await http.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
      if (res.status !== 200) return undefined;
      const obj = res.json<Crd>();
      return obj.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? obj : undefined;
    });
    for (const v of crd.spec.versions.filter((x) => x.served)) {
      await poll(`list ${crd.spec.names.plural}.${crd.spec.group}/${v.name}`, timeoutMs, async () =>
        (await http.get(`/apis/${crd.spec.group}/${v.name}/${crd.spec.names.plural}?limit=1`)).status === 200 ? true : undefined,
      );
    }
  }
}

/**
 * Proves that kube-controller-manager's garbage collector runs: a ConfigMap owned by another ConfigMap must vanish
 * once its owner is deleted.
 */
export async function verifyGarbageCollector(http: KubeHttp, opts: { timeoutMs?: number; abort?: () => string | undefined } = {}): Promise<void> {
  const ns = 'default';
  const suffix = randomBytes(4).toString('hex');
  const base = `/api/v1/namespaces/${ns}/configmaps`;
  const owner = (await http.expect('POST', base, [201], { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `gc-probe-owner-${suffix}` } })).json<{
    metadata: { uid: string; name: string };
  }>();
  const dependentName = `gc-probe-dependent-${suffix}`;
  await http.expect('POST', base, [201], {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: dependentName,
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: owner.metadata.name, uid: owner.metadata.uid }],
    },
  });
  await http.expect('DELETE', `${base}/${owner.metadata.name}`, [200, 202]);
  await poll(
    `garbage collection of ${ns}/${dependentName} after its owner was deleted`,
    opts.timeoutMs ?? 60_000,
    async () => ((await http.get(`${base}/${dependentName}`)).status === 404 ? true : undefined),
    { intervalMs: 250, ...(opts.abort ? { abort: opts.abort } : {}) },
  );
}
