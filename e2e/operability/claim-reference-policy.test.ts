// Issue 26, section 6: the optional ValidatingAdmissionPolicy of manifests/claim-reference-policy, applied as a user
// applies it (kubectl apply -k) to a real kube-apiserver v1.34, which compiles and runs its CEL. Requests are made
// as other users through impersonation (kubectl --as): an ordinary user "alice", virt-controller's ServiceAccount
// and this controller's. Pods are never scheduled here (no scheduler, no kubelet); admission is all that is tested.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { poll, startControlPlane, type ControlPlane, type KubectlResult } from '../harness/index.ts';
import { REPO_ROOT } from '../local/controller-process.ts';

const NS = 'vms';
const POLICY = 'persistent-ips-claim-references';
const ALICE = 'alice';
const VIRT_CONTROLLER = 'system:serviceaccount:kubevirt:kubevirt-controller';
const CONTROLLER = 'system:serviceaccount:persistent-ips-system:persistent-ips-controller';
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const DEFAULT_NETWORK = 'v1.multus-cni.io/default-network';
const PRIMARY_UDN = 'k8s.ovn.org/primary-udn-ipamclaim';
const DENIED = new RegExp(
  `ValidatingAdmissionPolicy '${POLICY}' with binding '${POLICY}' denied request: only virt-controller and persistent-ips may name an IPAMClaim`,
);

const networks = (...elements: Record<string, string>[]) => JSON.stringify(elements);
const red = (claim?: string) => ({ name: 'red', namespace: NS, interface: 'pod1a2b3c', ...(claim === undefined ? {} : { 'ipam-claim-reference': claim }) });

function pod(name: string, annotations: Record<string, string>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels: { 'kubevirt.io': 'virt-launcher' }, annotations },
    spec: { containers: [{ name: 'compute', image: 'registry.invalid/virt-launcher:v1.9.0' }] },
  });
}

/** kubectl arguments that merge-patch these annotations into pod `name` (through `extra`, e.g. pods/status). */
const patchArgs = (name: string, annotations: Record<string, string>, extra: string[] = []): string[] => [
  'patch',
  'pod',
  name,
  '-n',
  NS,
  ...extra,
  '--type=merge',
  '-p',
  JSON.stringify({ metadata: { annotations } }),
];

const scratch = mkdtempSync(join(tmpdir(), 'pips-claim-policy-'));

describe('claim-reference policy (manifests/claim-reference-policy) on a real API server', { timeout: 5 * 60_000 }, () => {
  let cp: ControlPlane;
  const kubectl = async (args: string[], input?: string): Promise<string> => (await cp.kubectl(args, input === undefined ? {} : { input })).stdout.trim();
  /** kubectl as another user; never throws, the result says what the API server answered. */
  const as = (user: string, args: string[], input?: string): Promise<KubectlResult> =>
    cp.kubectl([`--as=${user}`, ...args], { check: false, ...(input === undefined ? {} : { input }) });
  const exists = async (name: string): Promise<boolean> => (await cp.kubectl(['get', 'pod', name, '-n', NS], { check: false })).code === 0;
  const annotation = async (name: string, key: string): Promise<string | undefined> =>
    (JSON.parse(await kubectl(['get', 'pod', name, '-n', NS, '-o', 'json'])) as { metadata: { annotations?: Record<string, string> } }).metadata.annotations?.[
      key
    ];

  async function refused(result: KubectlResult, user: string): Promise<void> {
    assert.notEqual(result.code, 0, `refused, but kubectl said: ${result.stdout}`);
    assert.match(result.stderr, DENIED);
    assert.ok(result.stderr.includes(`${user} may not add or change one`), result.stderr);
  }
  async function createdBy(user: string, name: string, annotations: Record<string, string>): Promise<KubectlResult> {
    return as(user, ['create', '-f', '-'], pod(name, annotations));
  }

  before(
    async () => {
      cp = await startControlPlane({ dir: join(scratch, 'cp') });
      await kubectl(['create', 'namespace', NS]);
      // Everyone may write pods in NS: RBAC lets each request through, so that only the policy can refuse it.
      await kubectl(['create', 'clusterrole', 'pod-writer', '--verb=get,list,create,update,patch', '--resource=pods,pods/status']);
      await kubectl(['create', 'rolebinding', 'pod-writers', '-n', NS, '--clusterrole=pod-writer', '--group=system:authenticated']);
      await kubectl(['apply', '-k', join(REPO_ROOT, 'manifests', 'claim-reference-policy')]);
      // The API server loads policies and bindings from its informers: wait until a dry run is refused by the policy.
      const probe = pod('probe', { [NETWORKS]: networks(red('vm1.red')) });
      await poll('the policy refuses a claim reference', 30_000, async () => {
        const r = await as(ALICE, ['create', '--dry-run=server', '-f', '-'], probe);
        return r.code !== 0 && DENIED.test(r.stderr) ? true : undefined;
      });
    },
    { timeout: 120_000 },
  );

  after(
    async () => {
      await cp?.stop();
      rmSync(scratch, { recursive: true, force: true });
    },
    { timeout: 60_000 },
  );

  it('an ordinary user cannot create a pod naming a claim: networks element, default-network element, primary-UDN annotation', async () => {
    const cases: [string, Record<string, string>][] = [
      ['networks', { [NETWORKS]: networks({ name: 'blue', namespace: NS }, red('vm1.red')) }],
      ['default-network', { [DEFAULT_NETWORK]: networks({ name: 'default', namespace: 'ovn-kubernetes', 'ipam-claim-reference': 'vm1.isolated' }) }],
      ['primary-udn', { [PRIMARY_UDN]: 'vm1.isolated' }],
      // What Go's JSON decoder (Multus, OVN-Kubernetes) reads as the same key: another letter case, a \u escape.
      ['upper-case-key', { [NETWORKS]: '[{"name":"red","namespace":"vms","IPAM-Claim-Reference":"vm1.red"}]' }],
      ['escaped-key', { [NETWORKS]: '[{"name":"red","namespace":"vms","\\u0069pam-claim-reference":"vm1.red"}]' }],
    ];
    for (const [name, annotations] of cases) {
      await refused(await createdBy(ALICE, `alice-${name}`, annotations), ALICE);
      assert.equal(await exists(`alice-${name}`), false, `${name}: no pod was created`);
    }
    // A ServiceAccount that is neither virt-controller's nor the controller's is an ordinary user too.
    const other = 'system:serviceaccount:vms:default';
    await refused(await createdBy(other, 'default-sa-networks', { [NETWORKS]: networks(red('vm1.red')) }), other);
  });

  it('the same pods without a reference are admitted, a plain list of network names and an empty reference included', async () => {
    const cases: [string, Record<string, string>][] = [
      ['networks', { [NETWORKS]: networks({ name: 'blue', namespace: NS }, red()) }],
      ['names-list', { [NETWORKS]: 'red,vms/blue@eth2' }],
      ['empty-reference', { [NETWORKS]: networks(red('')) }],
      ['default-network', { [DEFAULT_NETWORK]: networks({ name: 'default', namespace: 'ovn-kubernetes' }) }],
      ['primary-udn-empty', { [PRIMARY_UDN]: '' }],
      ['no-annotations', {}],
      // Far more elements than any VM has: the expressions stay within the API server's CEL cost budget.
      [
        'large',
        {
          [NETWORKS]: networks(
            ...Array.from({ length: 1500 }, (_, i) => ({ name: `net-${i}`, namespace: NS, interface: `pod${i.toString(16).padStart(11, '0')}` })),
          ),
        },
      ],
    ];
    for (const [name, annotations] of cases) {
      const r = await createdBy(ALICE, `plain-${name}`, annotations);
      assert.equal(r.code, 0, `${name}: ${r.stderr}`);
      assert.equal(await exists(`plain-${name}`), true, name);
    }
  });

  it("virt-controller's and the controller's ServiceAccounts may create pods naming claims", async () => {
    const annotations = {
      [NETWORKS]: networks(red('vm1.red')),
      [DEFAULT_NETWORK]: networks({ name: 'default', namespace: 'ovn-kubernetes', 'ipam-claim-reference': 'vm1.isolated' }),
      [PRIMARY_UDN]: 'vm1.isolated',
    };
    for (const [user, name] of [
      [VIRT_CONTROLLER, 'launcher-virt-controller'],
      [CONTROLLER, 'launcher-controller'],
    ] as const) {
      const r = await createdBy(user, name, annotations);
      assert.equal(r.code, 0, `${user}: ${r.stderr}`);
      assert.equal(await annotation(name, NETWORKS), annotations[NETWORKS]);
    }
  });

  it('an ordinary user may update a launcher pod while its references stay as they are (label, other annotations)', async () => {
    const name = 'launcher-virt-controller';
    let r = await as(ALICE, ['label', 'pod', name, '-n', NS, 'team=blue']);
    assert.equal(r.code, 0, r.stderr);
    r = await as(ALICE, ['annotate', 'pod', name, '-n', NS, 'example.com/note=checked']);
    assert.equal(r.code, 0, r.stderr);
    // A status update (kubelet, Multus) leaves the annotations alone and is admitted as well.
    r = await as(ALICE, ['patch', 'pod', name, '-n', NS, '--subresource=status', '--type=merge', '-p', '{"status":{"message":"probe"}}']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await kubectl(['get', 'pod', name, '-n', NS, '-o', 'jsonpath={.metadata.labels.team}']), 'blue');
  });

  it('an ordinary user cannot add or change a reference on an existing pod, through pods or pods/status', async () => {
    const before = await annotation('launcher-virt-controller', NETWORKS);
    const attempts: [string, string[]][] = [
      ['change the networks reference', patchArgs('launcher-virt-controller', { [NETWORKS]: networks(red('vm2.red')) })],
      ['add a reference', patchArgs('plain-networks', { [NETWORKS]: networks({ name: 'blue', namespace: NS }, red('vm1.red')) })],
      ['add the primary-UDN annotation', ['annotate', 'pod', 'plain-no-annotations', '-n', NS, `${PRIMARY_UDN}=vm1.isolated`]],
      [
        'add a default-network reference',
        patchArgs('plain-default-network', {
          [DEFAULT_NETWORK]: networks({ name: 'default', namespace: 'ovn-kubernetes', 'ipam-claim-reference': 'vm1.isolated' }),
        }),
      ],
      ['change it through pods/status', patchArgs('launcher-virt-controller', { [NETWORKS]: networks(red('vm2.red')) }, ['--subresource=status'])],
    ];
    for (const [what, args] of attempts) await refused(await as(ALICE, args), ALICE).catch((e: unknown) => assert.fail(`${what}: ${String(e)}`));
    assert.equal(await annotation('launcher-virt-controller', NETWORKS), before, 'the reference is unchanged');
    assert.equal(await annotation('plain-networks', NETWORKS), networks({ name: 'blue', namespace: NS }, red()));
    assert.equal(await annotation('plain-no-annotations', PRIMARY_UDN), undefined);
  });

  it('virt-controller (hotplug) and the controller (a claim made after the pod started) may add references to a running pod', async () => {
    const hotplugged = networks(red('vm1.red'), { name: 'green', namespace: NS, interface: 'pod9f8e7d', 'ipam-claim-reference': 'vm1.green' });
    let r = await as(VIRT_CONTROLLER, ['annotate', '--overwrite', 'pod', 'launcher-virt-controller', '-n', NS, `${NETWORKS}=${hotplugged}`]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await annotation('launcher-virt-controller', NETWORKS), hotplugged);
    const pointed = networks({ name: 'blue', namespace: NS }, red('vm1.red'));
    r = await as(CONTROLLER, patchArgs('plain-networks', { [NETWORKS]: pointed }));
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await annotation('plain-networks', NETWORKS), pointed);
  });
});
