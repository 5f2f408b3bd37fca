// What @kubernetes/client-node would cost the controller, against what src/kube costs, measured the way the
// controller ships: each client in an esbuild bundle built with scripts/build.ts's options, run by Node with the
// Deployment's NODE_OPTIONS and environment (bench/lib/deployment.ts). client-node is imported only for what a
// controller needs: KubeConfig (with its auth), the generic KubernetesObjectApi and Watch. Each process:
//   1. imports its client and loads the kubeconfig: RSS "after import";
//   2. LISTs the ConfigMaps of a namespace, WATCHes them from the list's resourceVersion, creates one ConfigMap and
//      waits for the watch to deliver it: RSS "after LIST+WATCH".
// A third arm, "none", is Node and the measuring code alone. The arms alternate, one fresh process each time, on
// one local control plane.
//
//   node bench/client-node-rss.ts [--rounds 5] [--kubeconfig PATH]
//
// Without --kubeconfig it starts a local control plane of its own (e2e/harness) and stops it at the end. Prints a
// Markdown table (medians and each round) and the bundle sizes.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { BUNDLE_OPTIONS } from '../scripts/bundle.ts';
import { startControlPlane, type ControlPlane } from '../e2e/harness/index.ts';
import { shippedController } from './lib/deployment.ts';
import { killAllSync, trackExternal, untrackExternal } from './lib/processes.ts';
import { median } from './lib/stats.ts';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const NAMESPACE = 'default';

/** Shared by both arms: RSS at each step, printed as one JSON line for the parent. */
const REPORT = `
const mib = () => Math.round((process.memoryUsage().rss / 2 ** 20) * 10) / 10;
const heap = () => Math.round((process.memoryUsage().heapUsed / 2 ** 20) * 10) / 10;
const idle = () => new Promise((r) => setTimeout(r, 1000));
const name = 'client-rss-' + process.pid;
`;

const ARMS: Record<string, string> = {
  // Node and the measuring code alone: what both clients add to.
  'none': `
${REPORT}
await idle();
const afterImport = { rss: mib(), heap: heap() };
await idle();
const afterListWatch = { rss: mib(), heap: heap() };
process.stdout.write(JSON.stringify({ afterImport, afterListWatch }) + '\\n');
process.exit(0);
`,
  'client-node': `
import { KubeConfig, KubernetesObjectApi, Watch } from '@kubernetes/client-node';
${REPORT}
const kc = new KubeConfig();
kc.loadFromFile(process.env.BENCH_KUBECONFIG);
const api = KubernetesObjectApi.makeApiClient(kc);
await idle();
const afterImport = { rss: mib(), heap: heap() };
const list = await api.list('v1', 'ConfigMap', '${NAMESPACE}');
let seen;
const delivered = new Promise((r) => (seen = r));
const watch = await new Watch(kc).watch('/api/v1/namespaces/${NAMESPACE}/configmaps', { resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: true }, (type, obj) => {
  if (type === 'ADDED' && obj.metadata.name === name) seen();
}, () => {});
await api.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: '${NAMESPACE}' }, data: { k: 'v' } });
await delivered;
await idle();
const afterListWatch = { rss: mib(), heap: heap() };
watch.abort();
await api.delete({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: '${NAMESPACE}' } });
process.stdout.write(JSON.stringify({ afterImport, afterListWatch, items: list.items.length }) + '\\n');
process.exit(0);
`,
  'src/kube': `
import { KubeClient, loadKubeConfig } from '${join(SRC, 'kube', 'client.ts')}';
${REPORT}
const configMaps = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };
const client = KubeClient.fromKubeConfig(loadKubeConfig({ path: process.env.BENCH_KUBECONFIG }).connection);
await idle();
const afterImport = { rss: mib(), heap: heap() };
const list = await client.list(configMaps, { namespace: '${NAMESPACE}' });
const stop = new AbortController();
const events = client.watch(configMaps, { namespace: '${NAMESPACE}', resourceVersion: list.resourceVersion, signal: stop.signal });
const delivered = (async () => {
  for await (const e of events) if (e.type === 'ADDED' && e.object.metadata.name === name) return;
})();
await client.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: '${NAMESPACE}' }, data: { k: 'v' } });
await delivered;
await idle();
const afterListWatch = { rss: mib(), heap: heap() };
stop.abort();
await client.delete(configMaps, '${NAMESPACE}', name);
process.stdout.write(JSON.stringify({ afterImport, afterListWatch, items: list.items.length }) + '\\n');
process.exit(0);
`,
};

interface Sample {
  afterImport: { rss: number; heap: number };
  afterListWatch: { rss: number; heap: number };
}

/** The controller's esbuild options (scripts/bundle.ts), one entry per arm. */
async function bundle(dir: string): Promise<Record<string, { file: string; bytes: number; total: number }>> {
  const out: Record<string, { file: string; bytes: number; total: number }> = {};
  for (const [arm, contents] of Object.entries(ARMS)) {
    const outdir = join(dir, arm.replace('/', '-'));
    await build({
      stdin: { contents, resolveDir: fileURLToPath(new URL('..', import.meta.url)), loader: 'ts', sourcefile: 'entry.ts' },
      outdir,
      entryNames: 'main',
      ...BUNDLE_OPTIONS,
    });
    // main.js is what loads; src/kube's lazily imported client-node chunk (exec and auth-provider kubeconfigs) is
    // written beside it but never loaded here.
    const total = readdirSync(outdir)
      .filter((f) => f.endsWith('.js'))
      .reduce((sum, f) => sum + statSync(join(outdir, f)).size, 0);
    out[arm] = { file: join(outdir, 'main.js'), bytes: statSync(join(outdir, 'main.js')).size, total };
  }
  return out;
}

function runOnce(file: string, kubeconfig: string): Sample {
  const shipped = shippedController();
  const res = spawnSync(process.execPath, [file], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...shipped.env, NODE_OPTIONS: shipped.nodeOptions, BENCH_KUBECONFIG: kubeconfig },
  });
  const line = res.stdout.trim().split('\n').pop() ?? '';
  if (res.status !== 0 || !line.startsWith('{')) throw new Error(`${file} exited with ${res.status ?? res.signal}: ${res.stderr.trim().slice(-2000)}`);
  return JSON.parse(line) as Sample;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, kubeconfig: { type: 'string' } } });
  const rounds = Number(values.rounds);
  const dir = mkdtempSync(join(tmpdir(), 'persistent-ips-client-rss-'));
  let cp: ControlPlane | undefined;
  const cpPids: number[] = [];
  process.on('exit', killAllSync);
  try {
    let kubeconfig = values.kubeconfig;
    if (!kubeconfig) {
      cp = await startControlPlane({
        dir: join(dir, 'cp'),
        handleSignals: false,
        onLog: () => {},
        onProcess: (_n, pid) => {
          trackExternal([pid]);
          cpPids.push(pid);
        },
      });
      kubeconfig = cp.kubeconfigPath;
    }
    const bundles = await bundle(dir);
    const samples: Record<string, Sample[]> = Object.fromEntries(Object.keys(ARMS).map((a) => [a, []]));
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? Object.keys(ARMS) : Object.keys(ARMS).reverse();
      for (const arm of order) {
        const s = runOnce(bundles[arm]!.file, kubeconfig);
        samples[arm]!.push(s);
        process.stderr.write(`${arm} round ${r + 1}: RSS ${s.afterImport.rss} MiB after import, ${s.afterListWatch.rss} MiB after LIST+WATCH\n`);
      }
    }
    const { nodeOptions, env } = shippedController();
    const lines = [
      `# Kubernetes client, bundled: RSS after import and after one LIST+WATCH (${rounds} rounds, NODE_OPTIONS="${nodeOptions}"${env.MALLOC_ARENA_MAX ? `, MALLOC_ARENA_MAX=${env.MALLOC_ARENA_MAX}` : ''}, Node ${process.version})`,
      '',
      '| client | main.js KiB (all chunks) | RSS after import MiB (median; each round) | RSS after LIST+WATCH MiB (median; each round) | heap used after LIST+WATCH MiB (median) |',
      '|---|---|---|---|---|',
    ];
    for (const [arm, list] of Object.entries(samples)) {
      const imp = list.map((s) => s.afterImport.rss);
      const lw = list.map((s) => s.afterListWatch.rss);
      lines.push(
        `| ${arm} | ${Math.round(bundles[arm]!.bytes / 1024)} (${Math.round(bundles[arm]!.total / 1024)}) | ${median(imp)}; ${imp.join(', ')} | ${median(lw)}; ${lw.join(', ')} | ${median(list.map((s) => s.afterListWatch.heap))} |`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
    writeFileSync(join(dir, 'samples.json'), JSON.stringify(samples, null, 1));
  } finally {
    await cp?.stop();
    untrackExternal(cpPids);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
