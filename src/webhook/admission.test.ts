import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { TransientLookupError, createPodAddressLookup, type PodAddressLookup } from '../allocator/pod-addresses.ts';
import { allocatorNad } from '../../test/allocator-world.ts';
import { collisionClaimName, podInterfaceName, swapClaimName } from '../claims/index.ts';
import { admissionReview, claim as claimFixture, ovnNad } from '../../test/objects.ts';
import type { IPAMClaim, NetworkAttachmentDefinition, Pod, VirtualMachineInstance } from '../kube/types.ts';
import { createLogger, type Logger } from '../telemetry/logger.ts';
import { capturingLogger } from '../../test/log-lines.ts';
import { BadAdmissionReviewError, createPodAdmissionHandler, vmiOf, type AdmissionReview, type Fetch, type PodAdmissionDeps } from './admission.ts';
import { createWebhookMetrics } from './metrics.ts';
import { applyJsonPatch } from '../../test/json-patch.ts';
import { FakeCache } from '../../test/fake-cache.ts';

const logger = createLogger('silent');
const NS = 'vms';
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';

const nad = (name: string, persistent: boolean, namespace = NS): NetworkAttachmentDefinition => ovnNad(name, { persistent, namespace });
const RED = nad('red', true);
const BLUE = nad('blue', false);

function vmi(networks: string[], uid = 'vmi-uid-1'): VirtualMachineInstance {
  return {
    metadata: { name: 'vm1', namespace: NS, uid },
    spec: {
      networks: networks.map((n) => ({ name: n, multus: { networkName: n === 'hot' ? 'red' : n } })),
      domain: { devices: { interfaces: networks.map((n) => ({ name: n, bridge: {} })) } },
    },
  };
}

/** A launcher pod of vm1 with an element per network; `refs` gives elements their claim reference. */
function launcher(
  networks: string[],
  options: { ownerUid?: string; labels?: Record<string, string>; annotations?: Record<string, string>; refs?: Record<string, string> } = {},
): Pod {
  const ref = (n: string) => (options.refs?.[n] ? { 'ipam-claim-reference': options.refs[n] } : {});
  return {
    metadata: {
      name: 'virt-launcher-vm1-x',
      namespace: NS,
      labels: options.labels ?? { 'kubevirt.io': 'virt-launcher' },
      annotations: {
        'kubevirt.io/domain': 'vm1',
        [NETWORKS]: JSON.stringify(networks.map((n) => ({ name: n === 'hot' ? 'red' : n, namespace: NS, interface: podInterfaceName(n), ...ref(n) }))),
        ...options.annotations,
      },
      ownerReferences: [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vm1', uid: options.ownerUid ?? 'vmi-uid-1', controller: true }],
    },
  };
}

/** A claim of vm1 (by default of the standalone VMI vmi-uid-1) for the red network. */
function claim(name: string, options: { ownerUid?: string; ownerKind?: string; network?: string; terminating?: boolean } = {}): IPAMClaim {
  const owner = {
    apiVersion: 'kubevirt.io/v1',
    kind: options.ownerKind ?? 'VirtualMachineInstance',
    name: 'vm1',
    uid: options.ownerUid ?? 'vmi-uid-1',
    controller: true,
  };
  return claimFixture({ name, owners: [owner], network: options.network ?? 'net-red', deleting: options.terminating ?? false });
}
/** The claims the controller makes for vm1's persistent networks (standalone VMI vmi-uid-1). */
const OWN_CLAIMS = [claim('vm1.red'), claim('vm1.hot')];

interface Setup {
  /** The claims cache; default OWN_CLAIMS. */
  claims?: IPAMClaim[];
  /** What a claim GET answers (default: the cache's entry). */
  apiClaims?: IPAMClaim[] | 'error';
  claimWaitMs?: number;
  cached?: VirtualMachineInstance[];
  api?: VirtualMachineInstance | 'error' | 'hang';
  nads?: NetworkAttachmentDefinition[];
  gate?: boolean;
  fetchNad?: Fetch<NetworkAttachmentDefinition>;
  budgetMs?: number;
  podAddresses?: PodAddressLookup;
  synced?: boolean;
  watchNamespace?: string;
  logger?: Logger;
}

function handler(setup: Setup) {
  const calls: string[] = [];
  const registry = new Registry();
  const metrics = createWebhookMetrics(registry);
  const fetchVmi: Fetch<VirtualMachineInstance> = async (namespace, name, signal) => {
    calls.push(`${namespace}/${name}`);
    if (setup.api === 'error') throw new Error('etcdserver: request timed out');
    if (setup.api === 'hang') return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    return setup.api;
  };
  const claims = new FakeCache(setup.claims ?? OWN_CLAIMS);
  const claimCalls: string[] = [];
  const fetchClaim: Fetch<IPAMClaim> = async (namespace, name) => {
    claimCalls.push(`${namespace}/${name}`);
    if (setup.apiClaims === 'error') throw new Error('etcdserver: request timed out');
    return (setup.apiClaims ? new FakeCache(setup.apiClaims) : claims).get(namespace, name);
  };
  const events: { target: string; causes: { reason: string; message: string }[] }[] = [];
  const deps: PodAdmissionDeps = {
    logger: setup.logger ?? logger,
    gateEnabled: () => setup.gate ?? true,
    vmis: new FakeCache(setup.cached ?? []),
    nads: new FakeCache(setup.nads ?? [RED, BLUE]),
    claims,
    claimEvents: claims.events,
    fetchClaim,
    claimWaitMs: setup.claimWaitMs ?? 0,
    reportDenials: (target, causes) => events.push({ target: `${target.kind} ${target.name} ${target.uid}`, causes }),
    fetchVmi,
    metrics,
    ...(setup.fetchNad ? { fetchNad: setup.fetchNad } : {}),
    ...(setup.budgetMs ? { budgetMs: setup.budgetMs } : {}),
    ...(setup.podAddresses ? { podAddresses: setup.podAddresses } : {}),
    ...(setup.synced !== undefined ? { synced: () => setup.synced! } : {}),
    ...(setup.watchNamespace !== undefined ? { watchNamespace: setup.watchNamespace } : {}),
  };
  return { handle: createPodAdmissionHandler(deps), calls, registry, claims, claimCalls, events };
}

function patchedNetworks(pod: Pod, out: AdmissionReview): unknown {
  const ops = JSON.parse(Buffer.from(out.response!.patch!, 'base64').toString('utf8'));
  return JSON.parse(applyJsonPatch(pod, ops).metadata.annotations![NETWORKS]!);
}

/** One admission with a handler built from `setup`; the handler's recorders come along. */
async function admit(setup: Setup, review: AdmissionReview) {
  const h = handler(setup);
  return { ...h, out: await h.handle(review) };
}

/** Admitted without a patch; the first warning matches `warning` when given. */
function assertUnchanged(out: AdmissionReview, warning?: RegExp): void {
  assert.equal(out.response?.allowed, true);
  assert.equal(out.response?.patch, undefined);
  if (warning) assert.match(out.response?.warnings?.[0] ?? '', warning);
}

/** Refused, with that status code (0: any), and a status message matching every pattern. */
function assertDenied(out: AdmissionReview, code: number, ...messages: RegExp[]): void {
  assert.equal(out.response?.allowed, false);
  if (code) assert.equal(out.response?.status?.code, code);
  for (const message of messages) assert.match(out.response?.status?.message ?? '', message);
}

/** The claim reference of each element of the patched networks annotation. */
const patchedRefs = (pod: Pod, out: AdmissionReview) => (patchedNetworks(pod, out) as Record<string, string>[]).map((e) => e['ipam-claim-reference']);

describe('pod admission handler', () => {
  it('VMI in the cache: patches, echoes the uid, JSONPatch type, no API call', async () => {
    const { handle, calls } = handler({ cached: [vmi(['red', 'blue'])] });
    const pod = launcher(['red', 'blue']);
    const out = await handle(admissionReview(pod));
    assert.equal(out.apiVersion, 'admission.k8s.io/v1');
    assert.equal(out.kind, 'AdmissionReview');
    assert.equal(out.response?.uid, 'req-1');
    assert.equal(out.response?.allowed, true);
    assert.equal(out.response?.patchType, 'JSONPatch');
    assert.deepEqual(patchedNetworks(pod, out), [
      { name: 'red', namespace: NS, interface: podInterfaceName('red'), 'ipam-claim-reference': 'vm1.red' },
      { name: 'blue', namespace: NS, interface: podInterfaceName('blue') },
    ]);
    assert.deepEqual(calls, []);
  });

  it('a binding plugin element (passt): no API read of the VMI and no warning', async () => {
    const { handle, calls } = handler({ cached: [vmi(['red'])] });
    const pod = launcher(['red']);
    const elements = JSON.parse(pod.metadata.annotations![NETWORKS]!);
    elements.push({ name: 'passt-binding', namespace: 'default', 'cni-args': { logicNetworkName: 'default' } });
    pod.metadata.annotations![NETWORKS] = JSON.stringify(elements);
    const out = await handle(admissionReview(pod));
    assert.equal(out.response?.patchType, 'JSONPatch');
    assert.equal(out.response?.warnings, undefined);
    assert.deepEqual(calls, []);
  });

  it("the claim is this VM's in the cache: counted as a cache hit, no wait, no API read", async () => {
    const { out, claimCalls, registry } = await admit({ cached: [vmi(['red'])], claimWaitMs: 2_000 }, admissionReview(launcher(['red'])));
    assert.equal(out.response?.patchType, 'JSONPatch');
    assert.deepEqual(claimCalls, []);
    assert.match(await registry.metrics(), /persistent_ips_webhook_claim_lookups_total\{source="cache"\} 1/);
  });

  it('VMI not in the cache yet: read from the API, then patched', async () => {
    const { out, calls, registry } = await admit({ api: vmi(['red']) }, admissionReview(launcher(['red'])));
    assert.equal(out.response?.patchType, 'JSONPatch');
    assert.deepEqual(calls, [`${NS}/vm1`]);
    assert.match(await registry.metrics(), /persistent_ips_webhook_vmi_lookups_total\{source="api"\} 1/);
  });

  it('the cache holds an earlier VMI of the same name (other uid): read from the API', async () => {
    const { out, calls } = await admit({ cached: [vmi(['blue'], 'old-uid')], api: vmi(['red']) }, admissionReview(launcher(['red'])));
    assert.equal(out.response?.patchType, 'JSONPatch');
    assert.deepEqual(calls, [`${NS}/vm1`]);
  });

  it('the cached VMI lacks a network the pod has (hotplug not seen yet): re-read from the API', async () => {
    const { handle, calls } = handler({ cached: [vmi(['red'])], api: vmi(['red', 'hot']) });
    // virt-controller's rebuild of the running pod's annotation for the hotplug: red's reference dropped, hot added
    const pod = launcher(['red', 'hot']);
    const running = launcher(['red'], { refs: { red: 'vm1.red' } });
    const out = await handle(admissionReview(pod, 'UPDATE', running));
    assert.deepEqual(calls, [`${NS}/vm1`]);
    assert.deepEqual(patchedRefs(pod, out), ['vm1.red', 'vm1.hot']);
  });

  it('the API cannot be read: denied with a clear, retryable message', async () => {
    const { out, registry } = await admit({ api: 'error' }, admissionReview(launcher(['red'])));
    assertDenied(out, 503, /VirtualMachineInstance vms\/vm1/, /KubeVirt retries/);
    assert.equal(out.response?.patch, undefined);
    assert.match(await registry.metrics(), /persistent_ips_webhook_admissions_total\{result="denied"\} 1/);
  });

  it('the API does not answer within the budget: denied before the API server times out', async () => {
    const { out } = await admit({ api: 'hang', budgetMs: 20 }, admissionReview(launcher(['red'])));
    assertDenied(out, 0, /cannot read VirtualMachineInstance/);
  });

  it('the VMI does not exist (API 404): allowed unchanged, with a warning', async () => {
    const { out } = await admit({}, admissionReview(launcher(['red'])));
    assertUnchanged(out, /does not exist/);
  });

  it('the VMI was re-created (other uid than the pod owner): allowed unchanged, with a warning', async () => {
    const { out } = await admit({ api: vmi(['red'], 'new-uid') }, admissionReview(launcher(['red'])));
    assertUnchanged(out, /not the pod owner's vmi-uid-1/);
  });

  it('ordinary networks only: admitted without looking the VMI up (even with the API down)', async () => {
    const { out, calls } = await admit({ api: 'error' }, admissionReview(launcher(['blue'])));
    assertUnchanged(out);
    assert.deepEqual(calls, []);
  });

  it('not a launcher pod, or the gate off: admitted unchanged without lookups', async () => {
    for (const [setup, pod] of [
      [{ api: 'error' as const }, launcher(['red'], { labels: { app: 'web' } })],
      [{ api: 'error' as const, gate: false }, launcher(['red'])],
    ] as const) {
      const { handle, calls } = handler(setup);
      const out = await handle(admissionReview(pod));
      assertUnchanged(out);
      assert.deepEqual(calls, []);
    }
  });

  it('before the caches have synced: a launcher pod is denied with a retryable answer, never admitted bare', async () => {
    // An empty cache reads as "gate off, no persistent network": answering from it would admit the pod without
    // its references, for good.
    const { handle, calls } = handler({ cached: [vmi(['red'])], synced: false, gate: false });
    const out = await handle(admissionReview(launcher(['red'])));
    assertDenied(out, 503, /starting.*retry/);
    assert.deepEqual(calls, []);
    const other = await handle(admissionReview(launcher(['red'], { labels: { app: 'web' } })));
    assert.equal(other.response?.allowed, true, 'pods that are not launcher pods are never held up');
  });

  it('with --namespace, launcher pods of other namespaces are left alone (allowed unchanged, no lookups)', async () => {
    const { handle, calls } = handler({ cached: [vmi(['red'])], api: 'error', watchNamespace: 'elsewhere' });
    const out = await handle(admissionReview(launcher(['red'])));
    assertUnchanged(out);
    assert.deepEqual(calls, []);
    const inside = await handler({ cached: [vmi(['red'])], watchNamespace: NS }).handle(admissionReview(launcher(['red'])));
    assert.equal(inside.response?.patchType, 'JSONPatch', 'its own namespace is still served');
  });

  it('an unreadable networks annotation: admitted unchanged, with a warning', async () => {
    const { out } = await admit({ cached: [vmi(['red'])] }, admissionReview(launcher([], { annotations: { [NETWORKS]: '[{"name":' } })));
    assertUnchanged(out, /cannot be read/);
  });

  it('a NAD referenced by the VMI but not cached is read from the API; if that fails, denied', async () => {
    const fetched: string[] = [];
    const ok = handler({
      cached: [vmi(['red'])],
      nads: [BLUE],
      fetchNad: async (ns, name) => {
        fetched.push(`${ns}/${name}`);
        return RED;
      },
    });
    assert.equal((await ok.handle(admissionReview(launcher(['red'])))).response?.patchType, 'JSONPatch');
    assert.deepEqual(fetched, [`${NS}/red`]);
    const failing = handler({ cached: [vmi(['red'])], nads: [BLUE], fetchNad: async () => Promise.reject(new Error('connection reset')) });
    const out = await failing.handle(admissionReview(launcher(['red'])));
    assertDenied(out, 0, /NetworkAttachmentDefinition vms\/red/);
  });

  it('not a pod, another operation, or a subresource: admitted unchanged', async () => {
    const { handle } = handler({ api: 'error' });
    const base = admissionReview(launcher(['red']));
    for (const request of [
      { ...base.request!, kind: { group: '', version: 'v1', kind: 'Service' } },
      { ...base.request!, operation: 'DELETE' },
      { ...base.request!, subResource: 'status' },
      { ...base.request!, object: undefined },
    ]) {
      const out = await handle({ ...base, request });
      assert.deepEqual(out.response, { uid: 'req-1', allowed: true });
    }
  });

  it('many unknown network elements: one warning to the API server and one log line, not one per element (report-aggregation.ts)', async () => {
    const { log, lines } = capturingLogger();
    const elements = Array.from({ length: 998 }, (_, i) => ({ name: `ghost-${i}`, namespace: NS, interface: `pod${i}` }));
    const pod = launcher(['red'], { annotations: { [NETWORKS]: JSON.stringify(elements) } });
    const { out } = await admit({ cached: [vmi(['red'])], api: vmi(['red']), logger: log }, admissionReview(pod));
    await new Promise((r) => setImmediate(r));
    assert.equal(out.response?.allowed, true);
    const unknownWarnings = (out.response?.warnings ?? []).filter((w) => /UnknownNetworkElement|matches no network/.test(w));
    assert.equal(unknownWarnings.length, 1, JSON.stringify(out.response?.warnings));
    assert.match(unknownWarnings[0]!, /^persistent-ips: 998 of the same kind \(UnknownNetworkElement\)/);
    const logged = lines.filter((l) => l['reason'] === 'UnknownNetworkElement');
    assert.equal(logged.length, 1);
    assert.equal(logged[0]!['level'], 'warn');
  });

  it('rejects what is not an AdmissionReview v1', async () => {
    const { handle } = handler({});
    for (const body of [
      null,
      [],
      { apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview', request: { uid: 'x' } },
      { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' },
    ]) {
      await assert.rejects(handle(body), BadAdmissionReviewError);
    }
  });
});

describe('pod admission handler: built-in allocator networks', () => {
  it('the claim holds addresses: the element gets them as ips', async () => {
    const lookups: string[] = [];
    const podAddresses: PodAddressLookup = async (namespace, v) => {
      lookups.push(`${namespace}/${v.metadata.name}`);
      return new Map([['red', { ips: ['10.0.0.5/16'] }]]);
    };
    const { handle } = handler({ cached: [vmi(['red', 'blue'])], podAddresses });
    const pod = launcher(['red', 'blue']);
    const out = await handle(admissionReview(pod));
    assert.equal(out.response?.allowed, true);
    assert.deepEqual(patchedNetworks(pod, out), [
      { name: 'red', namespace: NS, interface: podInterfaceName('red'), ips: ['10.0.0.5/16'], 'ipam-claim-reference': 'vm1.red' },
      { name: 'blue', namespace: NS, interface: podInterfaceName('blue') },
    ]);
    assert.deepEqual(lookups, [`${NS}/vm1`]);
  });

  it('the ips and the claim reference name one claim, even when the cache shows another claim of the network', async () => {
    // A NAD swapped on a running VM: the cache still shows only the old claim (another NAD network, with its
    // address); the API shows the swap claim too, and the pod is pointed at it, so its `ips` must be that claim's.
    const red = allocatorNad('red', 'net-red', '10.0.0.0/24');
    const old: IPAMClaim = { ...claim('vm1.red', { network: 'net-before' }), status: { ips: ['10.0.0.7/24'] } };
    const swapName = swapClaimName('vm1', 'red', 'net-red');
    const swapped: IPAMClaim = { ...claim(swapName), status: { ips: ['10.0.0.9/24'] } };
    const podAddresses = createPodAddressLookup({
      allocatorNad: (_ns, name) => (name === 'red' ? red : undefined),
      fetchClaim: async () => assert.fail('no read: both claims hold addresses'),
    });
    const { handle } = handler({ cached: [vmi(['red'])], nads: [red], claims: [old], apiClaims: [old, swapped], podAddresses });
    const pod = launcher(['red']);
    const out = await handle(admissionReview(pod));
    assert.equal(out.response?.allowed, true, JSON.stringify(out.response?.status));
    assert.deepEqual(patchedNetworks(pod, out), [
      { name: 'red', namespace: NS, interface: podInterfaceName('red'), ips: ['10.0.0.9/24'], 'ipam-claim-reference': swapName },
    ]);
  });

  it('the claim has no address yet: denied with the reason and a retry promise', async () => {
    const { handle, registry } = handler({
      cached: [vmi(['red'])],
      podAddresses: async () => new Map([['red', { deny: 'IPAMClaim vms/vm1.red for network "red" has no address yet' }]]),
    });
    const out = await handle(admissionReview(launcher(['red'])));
    assertDenied(out, 503, /vm1\.red for network "red" has no address yet/, /KubeVirt retries/);
    assert.match(await registry.metrics(), /persistent_ips_webhook_admissions_total\{result="denied"\} 1/);
  });

  it('the claim cannot be read: denied as a transient lookup failure', async () => {
    const podAddresses: PodAddressLookup = async () => {
      throw new TransientLookupError({ kind: 'IPAMClaim', namespace: NS, name: 'vm1.red' }, new Error('connection reset'));
    };
    const { out } = await admit({ cached: [vmi(['red'])], podAddresses }, admissionReview(launcher(['red'])));
    assertDenied(out, 0, /cannot read IPAMClaim vms\/vm1\.red: connection reset/);
  });

  it('UPDATE (in-place hotplug): addresses are not looked up', async () => {
    let called = false;
    const { handle } = handler({
      cached: [vmi(['red'])],
      podAddresses: async () => {
        called = true;
        return new Map();
      },
    });
    const out = await handle(admissionReview(launcher(['red']), 'UPDATE'));
    assert.equal(out.response?.allowed, true);
    assert.equal(called, false);
  });
});

describe('pod admission handler: only a claim of this VM, by uid, and not being deleted', () => {
  const OLD = claim('vm1.red', { ownerKind: 'VirtualMachine', ownerUid: 'old-vm-uid', terminating: true });
  const vmiOfVm = (): VirtualMachineInstance => {
    const v = vmi(['red']);
    v.metadata.ownerReferences = [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', name: 'vm1', uid: 'vm-uid-2', controller: true }];
    return v;
  };
  const NEW = claim('vm1.red', { ownerKind: 'VirtualMachine', ownerUid: 'vm-uid-2' });

  it("the old VM's terminating claim in cache and API: denied 503 naming the claim and the reason; an Event on the VM", async () => {
    const { out, events, claimCalls } = await admit({ cached: [vmiOfVm()], claims: [OLD] }, admissionReview(launcher(['red'])));
    assertDenied(out, 503);
    assert.equal(out.response?.patch, undefined);
    assert.match(out.response?.status?.message ?? '', /IPAMClaim vm1\.red belongs to VirtualMachine vm1 \(uid old-vm-uid\)/);
    assert.match(out.response?.status?.message ?? '', /KubeVirt retries/);
    assert.deepEqual(
      claimCalls,
      [`${NS}/vm1.red`, `${NS}/${collisionClaimName('vm1', 'red')}`, `${NS}/${swapClaimName('vm1', 'red', 'net-red')}`],
      'the API has the last word before a denial (every name the claim may have)',
    );
    assert.equal(events.length, 1);
    assert.equal(events[0]!.target, 'VirtualMachine vm1 vm-uid-2');
    assert.deepEqual(
      events[0]!.causes.map((c) => c.reason),
      ['LauncherPodRefused'],
    );
    assert.match(events[0]!.causes[0]!.message, /^launcher pods are not admitted \(ClaimOwnedByAnotherObject\): IPAMClaim vm1\.red belongs to/);
  });

  it('the cache still shows the old claim, the API already the new one: admitted with the reference', async () => {
    const { handle, events } = handler({ cached: [vmiOfVm()], claims: [OLD], apiClaims: [NEW] });
    const pod = launcher(['red']);
    const out = await handle(admissionReview(pod));
    assert.equal(out.response?.allowed, true);
    assert.deepEqual(patchedNetworks(pod, out), [{ name: 'red', namespace: NS, interface: podInterfaceName('red'), 'ipam-claim-reference': 'vm1.red' }]);
    assert.deepEqual(events, [{ target: 'VirtualMachine vm1 vm-uid-2', causes: [] }], 'an admission clears the denial Events');
  });

  it('no claim yet: the cache is watched for it (the controller is creating it), then the pod is admitted without a retry', async () => {
    const { handle, claims, claimCalls, registry } = handler({ cached: [vmiOfVm()], claims: [], claimWaitMs: 2_000 });
    setTimeout(() => claims.add(NEW), 50);
    const pod = launcher(['red']);
    const out = await handle(admissionReview(pod));
    assert.equal(out.response?.allowed, true);
    assert.equal(out.response?.patchType, 'JSONPatch');
    assert.deepEqual(claimCalls, [], 'found in the cache, no API read');
    assert.match(await registry.metrics(), /persistent_ips_webhook_claim_lookups_total\{source="cache_after_wait"\} 1/);
  });

  it('no claim at all (e.g. only standby replicas, nobody creating it): denied with ClaimNotFound after the wait and an API read', async () => {
    const { handle, claimCalls, events } = handler({ cached: [vmiOfVm()], claims: [], claimWaitMs: 60 });
    const started = Date.now();
    const out = await handle(admissionReview(launcher(['red'])));
    assert.ok(Date.now() - started >= 55, 'waited for the claim first');
    assertDenied(out, 503, /IPAMClaim vm1\.red does not exist yet/);
    assert.deepEqual(claimCalls, [`${NS}/vm1.red`, `${NS}/${collisionClaimName('vm1', 'red')}`, `${NS}/${swapClaimName('vm1', 'red', 'net-red')}`]);
    assert.match(events[0]!.causes[0]!.message, /\(ClaimNotFound\)/);
  });

  it('the claim cannot be read from the API: denied as a transient lookup failure, never admitted', async () => {
    const { out } = await admit({ cached: [vmiOfVm()], claims: [], apiClaims: 'error' }, admissionReview(launcher(['red'])));
    assertDenied(out, 0, /cannot read IPAMClaim vms\/vm1\.red/);
  });

  it('dry run: denied the same way, but no Event', async () => {
    const { handle, events } = handler({ cached: [vmiOfVm()], claims: [OLD] });
    const r = admissionReview(launcher(['red']));
    r.request!.dryRun = true;
    const out = await handle(r);
    assertDenied(out, 0);
    assert.deepEqual(events, []);
  });

  it('UPDATE of a running pod whose claim is not usable: allowed, no reference, nothing waited for or read', async () => {
    const { out, claimCalls } = await admit({ cached: [vmiOfVm()], claims: [OLD], claimWaitMs: 2_000 }, admissionReview(launcher(['red']), 'UPDATE'));
    assertUnchanged(out);
    assert.deepEqual(claimCalls, []);
  });
});

describe('vmiOf', () => {
  it('only a controller owner reference to a VMI, with its uid; kubevirt.io/domain alone names no VMI (a copied pod)', () => {
    assert.deepEqual(vmiOf(launcher(['red'])), { name: 'vm1', uid: 'vmi-uid-1' });
    assert.equal(vmiOf({ metadata: { name: 'p', annotations: { 'kubevirt.io/domain': 'vm2' } } }), undefined);
    const notController = launcher(['red']);
    notController.metadata.ownerReferences = [{ apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vm1', uid: 'vmi-uid-1' }];
    assert.equal(vmiOf(notController), undefined);
    assert.equal(vmiOf({ metadata: { name: 'p' } }), undefined);
  });
});

describe('pod admission handler at UPDATE: a reference, once on a running pod, is never taken away (spec §8)', () => {
  const running = launcher(['red', 'blue'], { refs: { red: 'vm1.red' } });
  /** virt-controller's rebuild of the annotation from the VMI spec: no references. */
  const rebuilt = launcher(['red', 'blue']);

  const states: [string, Setup][] = [
    ['the gate is off', { gate: false }],
    ['the NAD no longer allows persistent IPs', { nads: [nad('red', false), BLUE] }],
    ['the claim is gone from the cache', { claims: [] }],
    ['the caches have not synced (controller starting)', { synced: false }],
    ['the VMI cannot be read', { api: 'error' }],
  ];
  for (const [name, setup] of states) {
    it(`${name}: the dropped reference is put back, and nothing is read`, async () => {
      const { handle, calls, claimCalls } = handler(setup);
      const out = await handle(admissionReview(rebuilt, 'UPDATE', running));
      assert.equal(out.response?.allowed, true);
      assert.deepEqual(patchedRefs(rebuilt, out), ['vm1.red', undefined]);
      assert.deepEqual([calls, claimCalls], [[], []]);
    });
  }

  it('an UPDATE that changes a reference of the running pod is refused', async () => {
    const { out } = await admit(
      { cached: [vmi(['red', 'blue'])] },
      admissionReview(launcher(['red', 'blue'], { refs: { red: 'vm2.red' } }), 'UPDATE', running),
    );
    assertDenied(out, 403, /from vm1\.red to vm2\.red/);
  });

  it('a hotplugged element (new at this UPDATE) is decided as at CREATE: waits for its claim, then denied while it is missing; the old reference is carried all the same', async () => {
    const { out, claimCalls } = await admit(
      { cached: [vmi(['red', 'hot'])], claims: [claim('vm1.red')], claimWaitMs: 60 },
      admissionReview(launcher(['red', 'hot']), 'UPDATE', launcher(['red'], { refs: { red: 'vm1.red' } })),
    );
    assertDenied(out, 0, /vm1\.hot/);
    assert.ok(claimCalls.includes(`${NS}/vm1.hot`), 'the API had the last word');
    const { handle: ready } = handler({ cached: [vmi(['red', 'hot'])] });
    const pod = launcher(['red', 'hot']);
    const ok = await ready(admissionReview(pod, 'UPDATE', launcher(['red'], { refs: { red: 'vm1.red' } })));
    assert.deepEqual(patchedRefs(pod, ok), ['vm1.red', 'vm1.hot']);
  });

  it("an element that gains a reference (the controller pointing a running pod at a claim made after it started) is checked: this VM's claim is admitted, another is refused", async () => {
    const { handle } = handler({ cached: [vmi(['red', 'blue'])] });
    const bare = launcher(['red', 'blue']);
    const ours = await handle(admissionReview(launcher(['red', 'blue'], { refs: { red: 'vm1.red' } }), 'UPDATE', bare));
    assertUnchanged(ours);
    const theirs = await handle(admissionReview(launcher(['red', 'blue'], { refs: { red: 'vm2.red' } }), 'UPDATE', bare));
    assert.equal(theirs.response?.allowed, false);
    const gateOff = await handler({ cached: [vmi(['red', 'blue'])], gate: false }).handle(
      admissionReview(launcher(['red', 'blue'], { refs: { red: 'vm1.red' } }), 'UPDATE', bare),
    );
    assert.equal(gateOff.response?.allowed, false);
  });
});

describe("pod admission handler: a pod that is not its VMI's (copied, hand-made) is never pointed at a claim", () => {
  const copied = (options: Parameters<typeof launcher>[1] = {}): Pod => {
    const pod = launcher(['red'], options);
    delete pod.metadata.ownerReferences;
    return pod;
  };

  it('no controller owner reference to the VMI: admitted unchanged, although kubevirt.io/domain names a VMI whose claim is there', async () => {
    const { out, calls } = await admit({ cached: [vmi(['red'])] }, admissionReview(copied()));
    assertUnchanged(out, /no controller owner reference/);
    assert.deepEqual(calls, []);
  });

  it("a copy that carries the VM's reference (kubectl debug --copy-to copies annotations): refused", async () => {
    const { handle } = handler({ cached: [vmi(['red'])] });
    const out = await handle(admissionReview(copied({ refs: { red: 'vm1.red' } })));
    assertDenied(out, 0, /names IPAMClaim vm1\.red.*no controller owner reference/);
    const legacy = await handle(admissionReview(copied({ annotations: { 'k8s.ovn.org/primary-udn-ipamclaim': 'vm1.default' } })));
    assert.equal(legacy.response?.allowed, false);
  });

  it("an owner reference with another uid than the VMI's, carrying a reference: refused", async () => {
    const { out } = await admit({ cached: [vmi(['red'])] }, admissionReview(launcher(['red'], { ownerUid: 'someone-else', refs: { red: 'vm1.red' } })));
    assertDenied(out, 0);
  });
});

describe('pod admission handler: a claim name that can collide (two or more dots) is confirmed by the API at CREATE', () => {
  const dotted = vmi(['red']);
  dotted.spec!.networks = [{ name: 'r.ed', multus: { networkName: 'red' } }];
  dotted.spec!.domain!.devices!.interfaces = [{ name: 'r.ed', bridge: {} }];
  const pod = launcher(['red'], { annotations: { [NETWORKS]: JSON.stringify([{ name: 'red', namespace: NS, interface: podInterfaceName('r.ed') }]) } });

  it("the cache shows the claim as this VM's: one API read before the pod is pointed at it; a plain name needs none", async () => {
    const { out, claimCalls } = await admit({ cached: [dotted], claims: [claim('vm1.r.ed')] }, admissionReview(pod));
    assert.equal(out.response?.patchType, 'JSONPatch');
    assert.ok(claimCalls.includes(`${NS}/vm1.r.ed`), `read ${claimCalls.join(', ')}`);
    const { handle: plain, claimCalls: none } = handler({ cached: [vmi(['red'])] });
    await plain(admissionReview(launcher(['red'])));
    assert.deepEqual(none, []);
  });

  it("the API shows the claim as another VM's (the cache lagged): not pointed at it", async () => {
    const other = claim('vm1.r.ed', { ownerKind: 'VirtualMachine', ownerUid: 'uid-of-vm1.r' });
    other.metadata.ownerReferences![0]!.name = 'vm1.r';
    const { out } = await admit({ cached: [dotted], claims: [claim('vm1.r.ed')], apiClaims: [other] }, admissionReview(pod));
    assertDenied(out, 0);
  });
});

describe('pod admission handler: a pod that names a claim is never waved through', () => {
  const named = (options: Parameters<typeof launcher>[1] = {}): Pod => launcher(['red'], { ...options, refs: { red: 'vm2.red' } });
  it('with the gate off, at CREATE: refused', async () => {
    const out = await handler({ cached: [vmi(['red'])], gate: false }).handle(admissionReview(named()));
    assertDenied(out, 0, /gate is off/);
  });
  it('an UPDATE that drops the launcher label and adds a reference: refused', async () => {
    const unlabelled = named({ labels: { app: 'x' } });
    const out = await handler({ cached: [vmi(['red'])] }).handle(admissionReview(unlabelled, 'UPDATE', launcher(['red'])));
    assertDenied(out, 0, /not a virt-launcher pod/);
  });
});

describe('pod admission handler: no pod but a launcher pod of the VM may name its claim (claim-guard.ts)', () => {
  const asStatus = (review: AdmissionReview): AdmissionReview => ({ ...review, request: { ...review.request!, subResource: 'status' } });
  const plain = (annotations: Record<string, string>): Pod => ({ metadata: { name: 'web', namespace: NS, labels: { app: 'web' }, annotations } });
  const reference = JSON.stringify([{ name: 'red', namespace: NS, 'ipam-claim-reference': 'vm1.red' }]);

  it('a plain pod naming a claim: refused 403 naming pod and claim, without any lookup, even before the caches synced', async () => {
    const { out, calls, claimCalls, registry } = await admit({ api: 'error', synced: false }, admissionReview(plain({ [NETWORKS]: reference })));
    assertDenied(out, 403, /pod vms\/web names IPAMClaim vm1\.red .* not a virt-launcher pod/);
    assert.deepEqual([calls, claimCalls], [[], []]);
    assert.match(await registry.metrics(), /persistent_ips_webhook_admissions_total\{result="denied"\} 1/);
  });

  it('a plain pod without a reference: admitted unchanged, no lookup', async () => {
    const { out, calls } = await admit({ api: 'error' }, admissionReview(plain({ [NETWORKS]: 'red' })));
    assert.deepEqual(out.response, { uid: 'req-1', allowed: true });
    assert.deepEqual(calls, []);
  });

  it('pods/status UPDATE adding a reference to a plain pod: refused; one keeping its old reference: admitted', async () => {
    const { handle } = handler({});
    const out = await handle(asStatus(admissionReview(plain({ [NETWORKS]: reference }), 'UPDATE', plain({ [NETWORKS]: 'red' }))));
    assert.equal(out.response?.status?.code, 403);
    const keeping = asStatus(admissionReview(plain({ [NETWORKS]: reference, note: 'x' }), 'UPDATE', plain({ [NETWORKS]: reference })));
    assert.equal((await handle(keeping)).response?.allowed, true);
  });

  it('pods/status UPDATE of a launcher pod goes through the same carry-over as pods: a changed reference is refused', async () => {
    const running = launcher(['red'], { refs: { red: 'vm1.red' } });
    const review = asStatus(admissionReview(launcher(['red'], { refs: { red: 'vm2.red' } }), 'UPDATE', running));
    const { out } = await admit({ cached: [vmi(['red'])] }, review);
    assertDenied(out, 0, /would change its IPAMClaim reference from vm1\.red to vm2\.red/);
  });

  it('a Binding carrying a claim annotation: refused; a Binding without: admitted', async () => {
    const { handle } = handler({});
    // What the API server sends for pods/binding: the Binding as the object, the pod's name as the request's.
    const binding = (annotations?: Record<string, string>) => {
      const review = admissionReview({ metadata: { name: 'virt-launcher-vm1-x', ...(annotations ? { annotations } : {}) } });
      const object = { apiVersion: 'v1', kind: 'Binding', ...review.request!.object!, target: { kind: 'Node', name: 'n1' } };
      return { ...review, request: { ...review.request!, kind: { group: '', version: 'v1', kind: 'Binding' }, subResource: 'binding', object } };
    };
    const out = await handle(binding({ 'k8s.ovn.org/primary-udn-ipamclaim': 'vm1.red' }));
    assert.equal(out.response?.status?.code, 403);
    // The older namespaced `bindings` resource does the same as pods/binding, with no subresource.
    const legacy = binding({ 'k8s.ovn.org/primary-udn-ipamclaim': 'vm1.red' });
    const viaBindings = { ...legacy, request: { ...legacy.request, resource: { group: '', version: 'v1', resource: 'bindings' }, subResource: undefined } };
    assert.equal((await handle(viaBindings)).response?.status?.code, 403);
    assert.match(out.response?.status?.message ?? '', /Binding of pod vms\/virt-launcher-vm1-x may not carry annotation k8s\.ovn\.org\/primary-udn-ipamclaim/);
    assert.deepEqual((await handle(binding())).response, { uid: 'req-1', allowed: true });
  });

  it('a launcher pod whose reference is spelled in another letter case (what Go reads, JSON.parse does not): refused', async () => {
    const pod = launcher(['red'], {
      annotations: { [NETWORKS]: `[{"name":"red","namespace":"${NS}","interface":"${podInterfaceName('red')}","IPAM-Claim-Reference":"vm2.red"}]` },
    });
    const { out } = await admit({ cached: [vmi(['red'])] }, admissionReview(pod));
    assert.equal(out.response?.status?.code, 403);
    assert.match(out.response?.status?.message ?? '', /spells "ipam-claim-reference" as "IPAM-Claim-Reference"/);
  });
});
