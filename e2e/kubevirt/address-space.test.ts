// Issue 41: an operator sees each network's address space, and why a VM waits. On the real OVN-Kubernetes cluster
// manager and on the built-in allocator, a small subnet is filled by VMs: the metrics and `status --networks` show
// capacity and held exactly; the next VM's claim is refused (SubnetExhausted) and that VM carries an
// Warning (IPAllocationRefused from the controller on OVN-K networks; the allocator's own, SubnetExhausted, on its
// networks, and then not both); deleting a VM frees a place, the waiting VM gets the address and its claim's
// condition turns True. And two VMs asking for one address on an allocator network: the refused VM's Event names the
// claim that holds it.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { ADDRESSES_ANNOTATION } from '../../src/claims/constants.ts';
import { createPersistentNad } from '../suite/fixtures.ts';
import { type CoreEvent, eventsFor, type IPAMClaim } from '../suite/kube.ts';
import { allocatorAnnotations, bridgeNad, ipsAllocated, statusOutput, waitForClaim, waitForEvents } from './flows.ts';
import { buildVM, type Vm } from './launcher-fixture.ts';
import { waitFor, World, worldCase } from './world.ts';

const world = new World({ ovnKubernetes: true });
/** OVN-K retries a pod whose allocation failed about every 30 s; a freed address reaches the waiting VM after that. */
const FREED_MS = 150_000;

interface NetworkItem {
  network: string;
  ipam: string;
  families: Record<string, { capacity?: string; held: number; free?: string }>;
  claims: { allocated: number; pending: number; refused: Record<string, number> };
  refusedClaims: { claim: string; reason: string }[];
}

function createVM(ns: string, name: string, nad: string, addresses?: string[]): Promise<Vm> {
  const annotations = addresses ? { annotations: { [ADDRESSES_ANNOTATION]: JSON.stringify({ data: addresses }) } } : {};
  return world.kv.createVM(buildVM({ namespace: ns, name, podNetwork: false, networks: [{ name: 'data', nadName: nad }], ...annotations }));
}

/** Waits until the claim's IPsAllocated condition has `status` (True: with addresses), and returns it. */
function waitForCondition(ns: string, name: string, status: 'True' | 'False', timeoutMs = 90_000): Promise<IPAMClaim> {
  const reached = (c: IPAMClaim) => ipsAllocated(c)?.status === status && (status === 'False' || !!c.status?.ips?.length);
  return waitForClaim(world.api, ns, name, `IPsAllocated ${status}`, reached, timeoutMs);
}

/** The controller's figures for `network`, once they equal `want` (its caches follow the API within moments). */
async function metricsShow(network: string, want: { capacity: number; held: number; free: number; refused: Record<string, number> }): Promise<void> {
  const read = async () => {
    const samples = await world.controller.metrics();
    const value = (name: string, labels: Record<string, string>) =>
      samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    const figure = (state: string) => value('persistent_ips_network_addresses', { network, family: 'ipv4', state });
    const refused = Object.fromEntries(
      samples
        .filter((s) => s.name === 'persistent_ips_network_claims' && s.labels['network'] === network && s.labels['state'] === 'refused')
        .map((s) => [s.labels['reason'], s.value]),
    );
    return { capacity: figure('capacity'), held: figure('held'), free: figure('free'), refused };
  };
  let last: unknown;
  await waitFor(`metrics of network ${network} to show ${JSON.stringify(want)}`, async () => isDeepStrictEqual((last = await read()), want), {
    timeoutMs: 30_000,
    intervalMs: 500,
  }).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; last seen ${JSON.stringify(last)}`);
  });
}

async function statusNetworks(ns: string, network: string): Promise<NetworkItem> {
  const out = await statusOutput(world.cp.kubeconfigPath, ns, '--networks', '-o', 'json');
  const item = (JSON.parse(out) as { items: NetworkItem[] }).items.find((i) => i.network === network);
  assert.ok(item, `status --networks lists network ${network}: ${out}`);
  return item;
}

/** The VM's Warnings of `reason`, once there is one. */
async function warnings(ns: string, vm: string, reason: string): Promise<string[]> {
  const uid = (await world.kv.getVM(ns, vm))?.metadata.uid ?? '';
  const on = (e: CoreEvent) => e.involvedObject.uid === uid && e.reason === reason;
  const events = await waitForEvents(world.api, ns, `a ${reason} Event on VirtualMachine ${ns}/${vm}`, on, { timeoutMs: 60_000 });
  return events.map((e) => `${e.type} ${e.message}`);
}

/** Who tells a refused VM, on each IPAM's networks, and how the message starts. */
const REFUSAL = {
  'ovn-kubernetes': {
    reason: 'IPAllocationRefused',
    message: /^Warning the IPAM refused addresses for IPAMClaim vm-c\.data \(network "data"\): SubnetExhausted/,
  },
  allocator: { reason: 'SubnetExhausted', message: /^Warning IPAMClaim .*\/vm-c\.data on network ".*": / },
};

/** Fills a two-address network with vm-a and vm-b, then shows vm-c refused, then freed by deleting vm-a. */
async function fillAndFree(ns: string, nad: string, network: string, ipam: keyof typeof REFUSAL): Promise<void> {
  const refusal = REFUSAL[ipam];
  for (const name of ['vm-a', 'vm-b']) await createVM(ns, name, nad);
  for (const name of ['vm-a', 'vm-b']) await waitForCondition(ns, `${name}.data`, 'True');
  await metricsShow(network, { capacity: 2, held: 2, free: 0, refused: {} });
  const full = await statusNetworks(ns, network);
  assert.equal(full.ipam, ipam);
  assert.deepEqual(full.families, { ipv4: { capacity: '2', held: 2, free: '0' } }, 'status --networks: capacity and held exactly');
  assert.deepEqual(full.claims, { allocated: 2, pending: 0, refused: {} });

  await createVM(ns, 'vm-c', nad);
  const refused = await waitForCondition(ns, 'vm-c.data', 'False');
  assert.equal(ipsAllocated(refused)?.reason, 'SubnetExhausted');
  const events = await warnings(ns, 'vm-c', refusal.reason);
  assert.equal(events.length, 1, `one Event while the refusal lasts: ${events.join('\n')}`);
  assert.match(events[0] ?? '', refusal.message);
  if (ipam === 'allocator') {
    const uid = (await world.kv.getVM(ns, 'vm-c'))?.metadata.uid ?? '';
    assert.deepEqual(await eventsFor(world.cp, ns, uid, 'IPAllocationRefused'), [], 'the allocator tells the VM itself: not twice');
  }
  await metricsShow(network, { capacity: 2, held: 2, free: 0, refused: { SubnetExhausted: 1 } });
  assert.deepEqual(
    (await statusNetworks(ns, network)).refusedClaims.map((r) => [r.claim, r.reason]),
    [[`${ns}/vm-c.data`, 'SubnetExhausted']],
  );

  await world.kv.deleteVM(ns, 'vm-a');
  await waitFor(`IPAMClaim ${ns}/vm-a.data gone`, async () => (await world.api.claim(ns, 'vm-a.data')) === undefined || undefined, { timeoutMs: 60_000 });
  const allocated = await waitForCondition(ns, 'vm-c.data', 'True', FREED_MS);
  assert.equal(allocated.status?.ips?.length, 1, 'the waiting VM got the freed address');
  await world.kv.waitForVMIRunning(ns, 'vm-c', { timeoutMs: 60_000 });
  await metricsShow(network, { capacity: 2, held: 2, free: 0, refused: {} });
  assert.equal((await warnings(ns, 'vm-c', refusal.reason)).length, 1, 'no new Event once allocated');
}

describe('the address space of each network, and why a VM waits (issue 41)', { timeout: 20 * 60_000 }, () => {
  before(() => world.setUp(), { timeout: 300_000 });
  after(() => world.tearDown(), { timeout: 120_000 });

  worldCase(world, 'OVN-Kubernetes /30: two VMs fill it, the third is refused (SubnetExhausted) until one is deleted', async ({ namespace }) => {
    const ns = await namespace('space-ovnk');
    const network = `space-ovnk-${world.runId}`;
    await createPersistentNad(world, ns, 'blue', { network, subnets: '10.205.0.0/30' });
    await fillAndFree(ns, 'blue', network, 'ovn-kubernetes');
  });

  worldCase(world, 'built-in allocator /30: two VMs fill it, the third is refused (SubnetExhausted) until one is deleted', async ({ namespace }) => {
    const ns = await namespace('space-alloc');
    const network = `space-alloc-${world.runId}`;
    await bridgeNad(world.api, ns, 'green', network, allocatorAnnotations('10.206.0.0/30'));
    await fillAndFree(ns, 'green', network, 'allocator');
  });

  worldCase(world, 'allocator network: two VMs ask for one address; the refused VM is told which claim holds it', async ({ namespace }) => {
    const ns = await namespace('space-static');
    const network = `space-static-${world.runId}`;
    await bridgeNad(world.api, ns, 'red', network, allocatorAnnotations('10.207.0.0/28'));
    await createVM(ns, 'vm-x', 'red', ['10.207.0.5']);
    const held = await waitForCondition(ns, 'vm-x.data', 'True');
    assert.deepEqual(held.status?.ips, ['10.207.0.5/28']);
    await createVM(ns, 'vm-y', 'red', ['10.207.0.5']);
    const refused = await waitForCondition(ns, 'vm-y.data', 'False');
    assert.equal(ipsAllocated(refused)?.reason, 'IPAddressConflict');
    const events = await warnings(ns, 'vm-y', 'AddressInUse');
    assert.match(events[0] ?? '', new RegExp(`10\\.207\\.0\\.5 is already held by ${ns}/vm-x\\.data`));
    assert.deepEqual((await statusNetworks(ns, network)).claims.refused, { IPAddressConflict: 1 });
  });
});
