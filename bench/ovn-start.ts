// `npm run bench:ovn-start -- [--vms 1000] [--rate 20] [--out FILE]`: VM start → address in the claim, with the
// real pair of the e2e (e2e/kubevirt/world.ts, the same World npm start runs): KubeVirt's virt-controller v1.9.0
// makes each VMI and launcher pod, the controller under test (the built CLI) makes the claim and its webhook the
// pod's claim reference, OVN-Kubernetes' cluster manager v1.3.0 allocates the address and writes it to the claim's
// status.ips; the node stand-in binds and runs the pods. N VMs (runStrategy Always, one persistent OVN-K layer2
// network each, one /16 for all) are created at a fixed rate; per VM: VM POST sent → first watch event of its claim
// with status.ips, p50/p95/p99/max. The binaries are built (with progress) when missing, like npm start.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { World } from '../e2e/kubevirt/world.ts';
import { nadConfig } from '../e2e/suite/fixtures.ts';
import { paths } from '../e2e/suite/kube.ts';
import { vmName } from './lib/objects.ts';
import { paced } from './lib/pool.ts';
import { pcts, round } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    vms: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '20' },
    out: { type: 'string' },
    'timeout-s': { type: 'string', default: '900' },
  },
});
const N = Number(values.vms);
const RATE = Number(values.rate);
const say = (l: string) => process.stdout.write(`[bench-ovn-start] ${l}\n`);

const world = new World({ ovnKubernetes: true, onLog: (l) => say(l), resyncPeriodS: undefined, controllerName: 'bench-ovn-start' });
let exitCode = 0;
try {
  await world.setUp();
  const ns = await world.namespace('bench');
  await world.api.create(paths.nads(ns), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name: 'tenant', namespace: ns },
    spec: { config: nadConfig(ns, 'tenant', { network: `bench-${world.runId}`, subnets: '10.128.0.0/16' }) },
  });
  // claim name → when its status.ips was first seen (watch receipt time)
  const addressed = new Map<string, { at: number; ips: string[] }>();
  // claim name → when it was first seen at all (the controller's part ends there; OVN-K's begins with the pod)
  const created = new Map<string, number>();
  const ctrl = await world.api.http.watch(`${paths.claims(ns)}?watch=true`, (event, at) => {
    const obj = event.object as { metadata: { name: string }; status?: { ips?: string[] } };
    const ips = obj.status?.ips ?? [];
    if (!created.has(obj.metadata.name)) created.set(obj.metadata.name, at);
    if (ips.length > 0 && !addressed.has(obj.metadata.name)) addressed.set(obj.metadata.name, { at, ips });
  });
  void ctrl.done.then(() => say('claim watch ended'));
  const load0 = loadavg();
  const { t0, sentAt: sent } = await paced(N, RATE, async (i) => {
    await world.api.create(paths.vms(ns), {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: vmName('vm', i), namespace: ns },
      spec: {
        runStrategy: 'Always',
        template: {
          spec: {
            domain: { devices: { interfaces: [{ name: 'tenant', bridge: {} }] }, resources: { requests: { memory: '128Mi' } } },
            networks: [{ name: 'tenant', multus: { networkName: 'tenant' } }],
            terminationGracePeriodSeconds: 0,
          },
        },
      },
    });
  });
  const genS = (performance.now() - t0) / 1000;
  const sentAt = new Map(sent.map((at, i) => [`${vmName('vm', i)}.tenant`, at]));
  say(`${N} VMs created in ${genS.toFixed(1)} s (target ${RATE}/s); waiting for their addresses`);
  const deadline = Date.now() + Number(values['timeout-s']) * 1000;
  let last = -1;
  while (addressed.size < N && Date.now() < deadline) {
    if (addressed.size !== last) say(`  ${addressed.size}/${N} claims have an address (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    last = addressed.size;
    await sleep(5000);
  }
  ctrl.stop();
  // The time from each key's `from` to its `to`, for the keys in both.
  const gaps = (from: Map<string, number>, to: Map<string, number>): number[] => [...from].flatMap(([k, t]) => (to.has(k) ? [to.get(k)! - t] : []));
  const addressedAt = new Map([...addressed].map(([k, a]) => [k, a.at]));
  const lat = gaps(sentAt, addressedAt);
  const toClaim = gaps(sentAt, created);
  const claimToAddress = gaps(created, addressedAt);
  const q = (xs: number[]) => pcts(xs, 0);
  const unique = new Set([...addressed.values()].map((a) => a.ips.join(','))).size;
  const result = {
    vms: N,
    ratePerS: RATE,
    generatorSeconds: round(genS, 1),
    addressed: lat.length,
    distinctAddresses: unique,
    totalSeconds: round((Math.max(...[...addressed.values()].map((a) => a.at)) - t0) / 1000, 1),
    /** VM POST sent → claim with status.ips seen: the figure. */
    latencyMs: q(lat),
    /** Its two parts: VM POST → claim created (the controller), claim created → status.ips (virt-controller's pod, the webhook, the node stand-in's binding, OVN-K). */
    vmToClaimMs: q(toClaim),
    claimToAddressMs: q(claimToAddress),
    loadavgBefore: load0.map((x) => round(x, 1)),
    loadavgAfter: loadavg().map((x) => round(x, 1)),
    cpus: cpus().length,
  };
  say(JSON.stringify(result));
  if (values.out) writeFileSync(values.out, `${JSON.stringify(result, null, 2)}\n`);
  if (lat.length < N) {
    exitCode = 1;
    world.failed = true;
    say(`only ${lat.length} of ${N} claims got an address before the time-out`);
  }
  if (unique !== lat.length) {
    exitCode = 1;
    world.failed = true;
    say(`${lat.length} claims but ${unique} distinct addresses`);
  }
} catch (err) {
  exitCode = 1;
  world.failed = true;
  say(`failed: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  await world.tearDown();
}
process.exit(exitCode);
