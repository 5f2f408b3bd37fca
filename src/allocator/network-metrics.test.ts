import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';
import { Registry } from '../telemetry/prom.ts';
import { claim, ovnNad } from '../../test/objects.ts';
import { REFRESH_MS, registerNetworkMetrics } from './network-metrics.ts';

function setup(nads: NetworkAttachmentDefinition[], claims: IPAMClaim[]) {
  const registry = new Registry();
  const warnings: string[] = [];
  let clock = 0;
  registerNetworkMetrics(registry, { nads: () => nads, claims: () => claims }, { warn: (_: object, msg: string) => warnings.push(msg) } as never, () => clock);
  /** One scrape, then time moves past the window in which scrapes show the last figures. */
  const lines = async () => {
    const text = await registry.metrics();
    clock += REFRESH_MS;
    return text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  };
  return { lines, warnings };
}

describe('registerNetworkMetrics', () => {
  it('exports capacity, held and free per family, and claims by state and reason, from the caches at scrape time', async () => {
    const refused: IPAMClaim = {
      ...claim({ name: 'vm3.blue', network: 'blue' }),
      status: { ips: [], conditions: [{ type: 'IPsAllocated', status: 'False', reason: 'SubnetExhausted' }] },
    };
    const claims = [claim({ name: 'vm1.blue', network: 'blue', ips: ['10.100.0.1/29'] }), refused];
    const { lines } = setup([ovnNad('blue', { networkName: 'blue', subnets: '10.100.0.0/29' })], claims);
    assert.deepEqual(await lines(), [
      'persistent_ips_network_addresses{network="blue",family="ipv4",state="held"} 1',
      'persistent_ips_network_addresses{network="blue",family="ipv4",state="capacity"} 6',
      'persistent_ips_network_addresses{network="blue",family="ipv4",state="free"} 5',
      'persistent_ips_network_claims{network="blue",state="allocated",reason=""} 1',
      'persistent_ips_network_claims{network="blue",state="pending",reason=""} 0',
      'persistent_ips_network_claims{network="blue",state="refused",reason="SubnetExhausted"} 1',
    ]);
  });

  it('an unknown capacity has no capacity or free series; a network that goes away leaves no series behind', async () => {
    const nads = [ovnNad('nosub', { networkName: 'nosub', subnets: null })];
    const { lines } = setup(nads, [claim({ name: 'vm1.nosub', network: 'nosub', ips: ['10.0.0.9/24'] })]);
    assert.deepEqual(
      (await lines()).filter((l) => l.startsWith('persistent_ips_network_addresses')),
      ['persistent_ips_network_addresses{network="nosub",family="ipv4",state="held"} 1'],
    );
    nads.length = 0;
    assert.deepEqual(await lines(), []);
  });

  it('a scrape within REFRESH_MS of the last computation shows its figures; the next one computes afresh', async () => {
    const registry = new Registry();
    const claims: IPAMClaim[] = [];
    let clock = 0;
    registerNetworkMetrics(
      registry,
      { nads: () => [ovnNad('blue', { networkName: 'blue', subnets: '10.100.0.0/29' })], claims: () => claims },
      { warn: () => undefined },
      () => clock,
    );
    const held = async () =>
      (await registry.getSingleMetric('persistent_ips_network_addresses')?.get())?.values.find((v) => v.labels['state'] === 'held')?.value;
    assert.equal(await held(), 0);
    claims.push(claim({ name: 'vm1.blue', network: 'blue', ips: ['10.100.0.1/29'] }));
    clock += REFRESH_MS - 1;
    assert.equal(await held(), 0, 'within the window: the last figures');
    clock += 1;
    assert.equal(await held(), 1, 'past it: computed afresh');
  });

  it('logs a problem once while it lasts, and again when it comes back', async () => {
    const nads = [ovnNad('bad', { networkName: 'bad', subnets: '10.0.0.0/24,10.0.0.0/25' })];
    const { lines, warnings } = setup(nads, []);
    const scrape = lines;
    await scrape();
    await scrape();
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0] ?? '', /address space of network bad: .*overlap/);
    const bad = nads.pop()!;
    await scrape();
    nads.push(bad);
    await scrape();
    assert.equal(warnings.length, 2);
  });
});
