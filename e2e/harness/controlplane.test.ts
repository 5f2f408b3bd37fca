// The local control plane works: pinned version, CRDs established, garbage collection, a client-node client accepts
// the kubeconfig, and stop() leaves no process behind. With PERSISTENT_IPS_EXISTING_KUBECONFIG set, the same checks
// (but the version and the processes) run against that cluster instead.
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connectToCluster, EXISTING_KUBECONFIG_ENV } from './existing.ts';
import { freePort, startControlPlane, verifyGarbageCollector, type Cluster, type ControlPlane } from './controlplane.ts';
import { poll } from './kubehttp.ts';
import { CLI_SCRIPT, pinnedVersions } from './paths.ts';
import { findProcesses, readState } from './cli.ts';
import { runKubectl } from './kubectl.ts';
import { isAlive } from './process.ts';

const CRDS = [
  'ipamclaims.k8s.cni.cncf.io',
  'network-attachment-definitions.k8s.cni.cncf.io',
  'virtualmachines.kubevirt.io',
  'virtualmachineinstances.kubevirt.io',
  'kubevirts.kubevirt.io',
];

describe('local control plane', { timeout: 45 * 60_000 }, () => {
  let cluster: Cluster;
  let owned: ControlPlane | undefined;
  let dir: string | undefined;

  before(async () => {
    const existing = process.env[EXISTING_KUBECONFIG_ENV];
    if (existing) {
      cluster = await connectToCluster(existing);
      return;
    }
    dir = mkdtempSync(join(tmpdir(), 'persistent-ips-cp-test-'));
    const t0 = Date.now();
    owned = await startControlPlane({ dir, onLog: (l) => console.log(`[harness] ${l}`) });
    console.log(`[harness] started in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    cluster = owned;
  });

  after(async () => {
    await owned?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves the pinned Kubernetes version', async (t) => {
    const res = await cluster.http.expect('GET', '/version', [200]);
    const v = res.json<{ gitVersion: string; major: string; minor: string }>();
    assert.equal(v.gitVersion, cluster.version);
    if (!owned) return t.skip(`existing cluster runs ${v.gitVersion}`);
    const pinned = pinnedVersions().kubernetes;
    assert.equal(v.gitVersion, pinned);
    assert.equal(`v${v.major}.${v.minor}`, pinned.split('.').slice(0, 2).join('.'));
    const out = await cluster.kubectl(['get', '--raw', '/version']);
    assert.equal(JSON.parse(out.stdout).gitVersion, pinned);
  });

  it('has the project CRDs established and usable', async () => {
    for (const name of CRDS) {
      const res = await cluster.http.expect('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`, [200]);
      const crd = res.json<{ status?: { conditions?: { type: string; status: string }[] } }>();
      assert.ok(
        crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'),
        `${name} established`,
      );
    }
    // Short names resolve through discovery, and a real-looking VM (unknown fields everywhere) round-trips.
    const ns = 'default';
    const vm = {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: `harness-vm-${Date.now().toString(36)}`, namespace: ns },
      spec: {
        runStrategy: 'Always',
        template: {
          spec: {
            domain: { devices: { interfaces: [{ name: 'net1', bridge: {} }] }, resources: { requests: { memory: '64Mi' } } },
            networks: [{ name: 'net1', multus: { networkName: 'nad1' } }],
          },
        },
      },
    };
    await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(vm) });
    const got = JSON.parse((await cluster.kubectl(['get', 'vm', vm.metadata.name, '-n', ns, '-o', 'json'])).stdout);
    assert.deepEqual(got.spec, vm.spec);
    await cluster.kubectl(['delete', 'vm', vm.metadata.name, '-n', ns, '--wait=false']);
    // IPAMClaim: spec.network and spec.interface are required; status is a subresource.
    const bad = await cluster.http.request('POST', `/apis/k8s.cni.cncf.io/v1alpha1/namespaces/${ns}/ipamclaims`, {
      apiVersion: 'k8s.cni.cncf.io/v1alpha1',
      kind: 'IPAMClaim',
      metadata: { name: 'harness-bad-claim' },
      spec: { network: 'n' },
    });
    assert.equal(bad.status, 422, bad.body);
  });

  it('runs the garbage collector, for custom resources too', async () => {
    await verifyGarbageCollector(cluster.http, { timeoutMs: 60_000 });
    // An IPAMClaim owned by a VirtualMachine goes with it (the GC knows the CRDs installed before it started).
    const ns = 'default';
    const name = `harness-gc-${Date.now().toString(36)}`;
    const vmPath = `/apis/kubevirt.io/v1/namespaces/${ns}/virtualmachines`;
    const claimPath = `/apis/k8s.cni.cncf.io/v1alpha1/namespaces/${ns}/ipamclaims`;
    const vm = (await cluster.http.expect('POST', vmPath, [201], { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', metadata: { name }, spec: {} })).json<{
      metadata: { uid: string };
    }>();
    await cluster.http.expect('POST', claimPath, [201], {
      apiVersion: 'k8s.cni.cncf.io/v1alpha1',
      kind: 'IPAMClaim',
      metadata: {
        name: `${name}.net1`,
        ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name, uid: vm.metadata.uid, controller: true, blockOwnerDeletion: true }],
      },
      spec: { network: 'net1', interface: '' },
    });
    await cluster.http.expect('DELETE', `${vmPath}/${name}`, [200, 202]);
    await poll('IPAMClaim garbage-collected after its VM', 60_000, async () =>
      (await cluster.http.get(`${claimPath}/${name}.net1`)).status === 404 ? true : undefined,
    );
  });

  it('runs the namespace controller', async () => {
    const name = `harness-ns-${Date.now().toString(36)}`;
    await cluster.http.expect('POST', '/api/v1/namespaces', [201], { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    await cluster.http.expect('POST', `/api/v1/namespaces/${name}/configmaps`, [201], { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } });
    await cluster.http.expect('DELETE', `/api/v1/namespaces/${name}`, [200, 202]);
    await poll('namespace deleted', 60_000, async () => ((await cluster.http.get(`/api/v1/namespaces/${name}`)).status === 404 ? true : undefined), {
      intervalMs: 500,
    });
  });

  it('hands out a kubeconfig that @kubernetes/client-node accepts (TLS verified)', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    const api = kc.makeApiClient(CoreV1Api);
    const ns = await api.readNamespace({ name: 'default' });
    assert.equal(ns.metadata?.name, 'default');
    if (owned) assert.equal(kc.getCurrentCluster()?.skipTLSVerify, false);
  });

  it('stops every process it started', async (t) => {
    if (!owned) return t.skip('existing cluster');
    const pids = Object.values(owned.pids);
    assert.equal(pids.length, 3);
    assert.ok(pids.every(isAlive));
    await owned.stop();
    for (const pid of pids) assert.equal(isAlive(pid), false, `pid ${pid} still alive`);
  });
});

describe('local control plane start-up', { timeout: 45 * 60_000, skip: !!process.env[EXISTING_KUBECONFIG_ENV] }, () => {
  it('retries with new ports when a chosen port is taken before the server binds it', async () => {
    // Hold two ports and hand them out as etcd's client port (1st pick) and the apiserver's port (5th pick: after
    // etcd's retry took picks 3 and 4): both servers fail to bind, and the harness must retry each with new ports.
    const held = await Promise.all([holdPort(), holdPort()]);
    const scripted = new Map([
      [1, held[0]!.port],
      [5, held[1]!.port],
    ]);
    const picks: number[] = [];
    const pickPort = async () => {
      const p = scripted.get(picks.length + 1) ?? (await freePort());
      picks.push(p);
      return p;
    };
    const dir = mkdtempSync(join(tmpdir(), 'persistent-ips-cp-test-'));
    const lines: string[] = [];
    try {
      const cp = await startControlPlane({ dir, pickPort, crdDirs: [], onLog: (l) => lines.push(l) });
      try {
        const retries = lines.filter((l) => l.includes('retrying with new ports'));
        assert.deepEqual(
          retries.map((l) => l.split(':')[0]),
          ['etcd', 'kube-apiserver'],
          lines.join('\n'),
        );
        assert.equal(picks.length, 6);
        assert.equal(cp.server, `https://127.0.0.1:${picks[5]}`);
        assert.equal((await cp.http.expect('GET', '/readyz', [200])).status, 200);
      } finally {
        await cp.stop();
      }
      assert.ok(Object.values(cp.pids).every((pid) => !isAlive(pid)));
    } finally {
      for (const h of held) h.server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function holdPort(): Promise<{ port: number; server: Server }> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, () => {
      const addr = server.address();
      resolvePort({ port: typeof addr === 'object' && addr ? addr.port : 0, server });
    });
  });
}

describe('cluster:up / cluster:down', { timeout: 45 * 60_000, skip: !!process.env[EXISTING_KUBECONFIG_ENV] }, () => {
  it('starts detached, serves the pinned version, and leaves no process after down', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'persistent-ips-cli-test-'));
    try {
      const upRun = spawnSync(process.execPath, [CLI_SCRIPT, 'up', '--dir', dir], { encoding: 'utf8', timeout: 40 * 60_000 });
      assert.equal(upRun.status, 0, upRun.stderr);
      assert.match(upRun.stdout, new RegExp(`KUBECONFIG=${join(dir, 'kubeconfig')}`));
      const state = readState(dir);
      assert.equal(state?.status, 'ready');
      const out = await runKubectl(['get', '--raw', '/version'], { kubeconfig: join(dir, 'kubeconfig'), binDir: state.binDir! });
      assert.equal(JSON.parse(out.stdout).gitVersion, pinnedVersions().kubernetes);
      const pids = [state.supervisorPid, ...Object.values(state.pids)];
      assert.equal(pids.length, 4);
      assert.ok(pids.every(isAlive));

      const downRun = spawnSync(process.execPath, [CLI_SCRIPT, 'down', '--dir', dir], { encoding: 'utf8', timeout: 120_000 });
      assert.equal(downRun.status, 0, downRun.stderr);
      for (const pid of pids) assert.equal(isAlive(pid), false, `pid ${pid} survived cluster:down`);
      assert.deepEqual(findProcesses(dir), []);
      assert.equal(readState(dir)?.status, 'stopped');
    } finally {
      spawnSync(process.execPath, [CLI_SCRIPT, 'down', '--dir', dir], { encoding: 'utf8', timeout: 120_000 });
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
