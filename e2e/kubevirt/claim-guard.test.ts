// Issue 43, secure by default: with the shipped webhook configuration alone (no claim-reference policy), no pod but a
// VM's launcher pod may name the VM's IPAMClaim. A namespace user with rights on pods only (impersonated: "alice")
// tries every door a claim reference has (a networks element, the primary-UDN annotation, a default-network element,
// an UPDATE of a running plain pod through pods and pods/status, a Binding), each refused by the webhook; OVN-
// Kubernetes' real cluster manager, which hands a pod the addresses of whatever claim it names, never gives the VM's
// addresses to any pod but the VM's launcher pods. And ordinary pods never reach the webhook at all: the API server's
// own count of calls stays where it was across 500 plain pods.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MULTUS_DEFAULT_NETWORK_ANNOTATION, MULTUS_NETWORKS_ANNOTATION, OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION } from '../../src/claims/constants.ts';
import type { KubectlResult } from '../harness/index.ts';
import { parsePrometheus, sumOf } from '../local/controller-process.ts';
import { localWebhookConfiguration } from '../local/webhook-config.ts';
import { OVN_PRIMARY_UDN_NAMESPACE_LABEL, ovnPodNetworks } from '../ovn-kubernetes/cluster-manager.ts';
import { createPersistentNad } from '../suite/fixtures.ts';
import { paths, WatchLog, type IPAMClaim } from '../suite/kube.ts';
import type { Pod } from '../../src/kube/types.ts';
import { buildVM } from './launcher-fixture.ts';
import { STANDIN_NODES } from './node-standin.ts';
import { eventually, World } from './world.ts';

const world = new World({ ovnKubernetes: true });
const ALICE = 'alice';
const NOT_A_LAUNCHER = /admission webhook "claim-references\.persistent-ips\.kubevirt\.io" denied the request: persistent-ips: pod .* not a virt-launcher pod/;

const WEBHOOKS = ['launcher-pods-create', 'launcher-pods-hotplug', 'claim-references', 'pod-bindings'].map((w) => `${w}.persistent-ips.kubevirt.io`);

/** The API server's calls to each of our webhook entries, from its own /metrics. */
async function webhookCalls(): Promise<Record<string, number>> {
  const samples = parsePrometheus((await world.cp.kubectl(['get', '--raw', '/metrics'], { timeoutMs: 60_000 })).stdout);
  return Object.fromEntries(WEBHOOKS.map((name) => [name, sumOf(samples, 'apiserver_admission_webhook_request_total', { name })]));
}

describe('secure by default: only a VM launcher pod may name its claim (default webhook configuration, no policy)', { timeout: 15 * 60_000 }, () => {
  let ns = '';
  let vmIps: string[] = [];
  let pods: WatchLog<Pod>;
  const as = (args: string[], input?: string): Promise<KubectlResult> =>
    world.cp.kubectl([`--as=${ALICE}`, ...args], { check: false, ...(input === undefined ? {} : { input }) });
  const plainPod = (name: string, annotations: Record<string, string>, nodeName?: string) =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, labels: { app: 'not-a-vm' }, annotations },
      spec: { ...(nodeName ? { nodeName } : {}), containers: [{ name: 'web', image: 'registry.invalid/web:1' }] },
    });
  const red = (claim?: string) => JSON.stringify([{ name: 'nad-red', namespace: ns, ...(claim ? { 'ipam-claim-reference': claim } : {}) }]);
  const refused = (result: KubectlResult, pattern: RegExp, what: string) => {
    assert.notEqual(result.code, 0, `${what}: refused, but kubectl said ${result.stdout}`);
    assert.match(result.stderr, pattern, what);
    console.log(`[claim-guard] ${what}: ${result.stderr.trim()}`);
  };

  before(
    async () => {
      await world.setUp();
      // The shipped configuration has the two entries this issue adds (the world registers it from the manifest).
      assert.deepEqual(
        localWebhookConfiguration(0).webhooks.map((w) => (w as unknown as { name: string }).name),
        WEBHOOKS,
      );
      ns = await world.namespace('guard', { [OVN_PRIMARY_UDN_NAMESPACE_LABEL]: '' });
      // alice may do anything with pods in this namespace, and nothing else: only admission can stop her.
      await world.cp.kubectl(['create', 'role', 'pod-writer', '-n', ns, '--verb=get,list,watch,create,update,patch,delete', '--resource=pods,pods/status']);
      await world.cp.kubectl(['create', 'role', 'pod-binder', '-n', ns, '--verb=create', '--resource=pods/binding,bindings']);
      for (const role of ['pod-writer', 'pod-binder']) await world.cp.kubectl(['create', 'rolebinding', role, '-n', ns, `--role=${role}`, `--user=${ALICE}`]);
      await createPersistentNad(world, ns, 'primary', { network: `guard-primary-${world.runId}`, role: 'primary', subnets: '10.204.0.0/28' });
      await createPersistentNad(world, ns, 'nad-red', { network: `guard-red-${world.runId}`, subnets: '10.204.1.0/28' });
      await world.kv.createVM(
        buildVM({
          namespace: ns,
          name: 'vm1',
          podNetwork: { name: 'default', binding: { name: 'l2bridge' } },
          networks: [{ name: 'red', nadName: 'nad-red' }],
        }),
      );
      const claims = await eventually("OVN-K to fill vm1's claims", async () => {
        const all = await Promise.all(['vm1.default', 'vm1.red'].map((n) => world.api.claim(ns, n)));
        return all.every((c) => c?.status?.ips?.length) ? (all as IPAMClaim[]) : undefined;
      });
      vmIps = claims.flatMap((c) => c.status?.ips ?? []);
      pods = await WatchLog.start<Pod>(world.api, paths.pods(ns));
    },
    { timeout: 300_000 },
  );

  after(
    async () => {
      pods?.stop();
      await world.tearDown();
    },
    { timeout: 60_000 },
  );

  it('(a, b, c) a plain pod naming the claim in a networks element, the primary-UDN annotation or a default-network element: refused', async () => {
    const attempts: [string, Record<string, string>][] = [
      ['(a) networks element', { [MULTUS_NETWORKS_ANNOTATION]: red('vm1.red') }],
      ['(b) primary-UDN annotation', { [OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION]: 'vm1.default' }],
      [
        '(c) default-network element',
        { [MULTUS_DEFAULT_NETWORK_ANNOTATION]: JSON.stringify([{ name: 'default', namespace: 'ovn-kubernetes', 'ipam-claim-reference': 'vm1.default' }]) },
      ],
    ];
    for (const [i, [what, annotations]] of attempts.entries()) {
      refused(await as(['create', '-f', '-'], plainPod(`thief-${i}`, annotations, STANDIN_NODES[0])), NOT_A_LAUNCHER, what);
      assert.equal(await world.api.get(paths.pods(ns, `thief-${i}`)), undefined, `${what}: no pod`);
    }
    // What Go's JSON decoder (Multus, OVN-K) reads as the same key, and JSON.parse does not.
    for (const [what, text] of [
      ['key in another letter case', `[{"name":"nad-red","namespace":"${ns}","IPAM-Claim-Reference":"vm1.red"}]`],
      ['key spelled with a \\u escape', `[{"name":"nad-red","namespace":"${ns}","\\u0069pam-claim-reference":"vm1.red"}]`],
    ]) {
      refused(
        await as(['create', '-f', '-'], plainPod('thief-spelled', { [MULTUS_NETWORKS_ANNOTATION]: text! }, STANDIN_NODES[0])),
        /cannot be checked/,
        what!,
      );
    }
  });

  it('(d) an UPDATE adding a reference to a running plain pod, through pods or pods/status: refused; the pod keeps its own addresses', async () => {
    const created = await as(['create', '-f', '-'], plainPod('web', { [MULTUS_NETWORKS_ANNOTATION]: red() }, STANDIN_NODES[0]));
    assert.equal(created.code, 0, `a plain pod without a reference is admitted: ${created.stderr}`);
    await world.api.mergePatch(`${paths.pods(ns, 'web')}/status`, { status: { phase: 'Running' } });
    const own = await eventually("OVN-K's addresses for the plain pod", async () => {
      const nets = ovnPodNetworks((await world.api.get<Pod>(paths.pods(ns, 'web')))?.metadata.annotations);
      return nets[`${ns}/nad-red`]?.ip_addresses?.length && nets[`${ns}/primary`]?.ip_addresses?.length ? nets : undefined;
    });
    const patch = (annotations: Record<string, string>) => JSON.stringify({ metadata: { annotations } });
    const attempts: [string, string[]][] = [
      ['(d) pods', ['patch', 'pod', 'web', '-n', ns, '--type=merge', '-p', patch({ [MULTUS_NETWORKS_ANNOTATION]: red('vm1.red') })]],
      [
        '(d) pods/status',
        ['patch', 'pod', 'web', '-n', ns, '--subresource=status', '--type=merge', '-p', patch({ [MULTUS_NETWORKS_ANNOTATION]: red('vm1.red') })],
      ],
      ['(d) primary-UDN annotation', ['annotate', 'pod', 'web', '-n', ns, `${OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION}=vm1.default`]],
    ];
    for (const [what, args] of attempts) refused(await as(args), NOT_A_LAUNCHER, what);
    const web = (await world.api.get<Pod>(paths.pods(ns, 'web')))!;
    assert.equal(web.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION], red(), 'the annotation is unchanged');
    assert.equal(web.metadata.annotations?.[OVN_PRIMARY_UDN_IPAMCLAIM_ANNOTATION], undefined);
    const mine = Object.values(own).flatMap((n) => n.ip_addresses ?? []);
    assert.deepEqual(
      mine.filter((ip) => vmIps.includes(ip)),
      [],
      `the plain pod has addresses of its own (${mine.join(', ')}), none of the VM's (${vmIps.join(', ')})`,
    );
    // Updates that leave the claim annotations alone never wait for the webhook.
    assert.equal((await as(['label', 'pod', 'web', '-n', ns, 'team=blue'])).code, 0);
  });

  it('(e) a Binding carrying a claim annotation: refused; the pod stays unbound and without it', async () => {
    assert.equal((await as(['create', '-f', '-'], plainPod('pending', {}))).code, 0);
    const binding = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: 'pending', namespace: ns, annotations: { [MULTUS_NETWORKS_ANNOTATION]: red('vm1.red') } },
      target: { apiVersion: 'v1', kind: 'Node', name: STANDIN_NODES[0] },
    });
    refused(
      await as(['create', '--raw', `/api/v1/namespaces/${ns}/pods/pending/binding`, '-f', '-'], binding),
      /admission webhook "pod-bindings\.persistent-ips\.kubevirt\.io" denied the request: persistent-ips: a Binding of pod .*\/pending may not carry annotation k8s\.v1\.cni\.cncf\.io\/networks/,
      '(e) Binding',
    );
    // The older namespaced `bindings` resource merges a Binding's annotations into the pod the same way.
    refused(
      await as(['create', '--raw', `/api/v1/namespaces/${ns}/bindings`, '-f', '-'], binding),
      /admission webhook "pod-bindings\.persistent-ips\.kubevirt\.io" denied the request: persistent-ips: a Binding of pod .*\/pending may not carry/,
      '(e) Binding through the bindings resource',
    );
    const pending = (await world.api.get<Pod>(paths.pods(ns, 'pending')))!;
    assert.equal(pending.spec?.nodeName, undefined);
    assert.equal(pending.metadata.annotations?.[MULTUS_NETWORKS_ANNOTATION], undefined);
  });

  it("through all of it, no pod but vm1's launcher pods ever had one of vm1's addresses (OVN-K's pod-networks)", async () => {
    // The VM still runs on its claims' addresses, from its launcher pod.
    const hasVmAddress = (p: Pod) =>
      Object.values(ovnPodNetworks(p.metadata.annotations))
        .flatMap((n) => n.ip_addresses ?? [])
        .some((ip) => vmIps.includes(ip));
    const launchers = (await world.api.list<Pod>(`${paths.pods(ns)}?labelSelector=kubevirt.io%3Dvirt-launcher`)).items;
    assert.ok(launchers.some(hasVmAddress), 'the running launcher pod has the VM addresses');
    pods.check();
    const holders = [...pods.initial.values(), ...pods.events.map((e) => e.obj)].filter(hasVmAddress);
    assert.ok(holders.length > 0, 'the record shows the launcher pod with the VM addresses');
    for (const p of holders) assert.equal(p.metadata.labels?.['kubevirt.io'], 'virt-launcher', `pod ${p.metadata.name} had one of ${vmIps.join(', ')}`);
  });

  it('500 plain pods (with and without a networks annotation) never reach the webhook', async () => {
    const before = await webhookCalls();
    const items = Array.from({ length: 500 }, (_, i) =>
      JSON.parse(plainPod(`bulk-${i}`, i % 2 === 0 ? {} : { [MULTUS_NETWORKS_ANNOTATION]: i % 4 === 1 ? 'nad-red' : red() })),
    );
    const r = await as(['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    assert.equal(r.code, 0, r.stderr);
    const afterwards = await webhookCalls();
    console.log(`[claim-guard] API server calls to each webhook entry, before and after 500 plain pods: ${JSON.stringify({ before, after: afterwards })}`);
    for (const name of WEBHOOKS) assert.equal(afterwards[name], before[name], `${name}: no call for a plain pod`);
    assert.ok(before['claim-references.persistent-ips.kubevirt.io']! > 0, 'while the refused attempts above did reach it');
  });
});
