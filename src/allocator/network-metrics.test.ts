import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IPAMClaim, NetworkAttachmentDefinition } from '../kube/types.ts';
import { Registry } from '../telemetry/prom.ts';
import { claim, ovnNad } from '../../test/objects.ts';
import { registerNetworkMetrics } from './network-metrics.ts';

function setup(nads: NetworkAttachmentDefinition[], claims: IPAMClaim[]) {
  const registry = new Registry();
  const warnings: string[] = [];
  const metrics = registerNetworkMetrics(registry, { nads: () => nads, claims: () => claims }, {
    warn: (_: object, msg: string) => warnings.push(msg),
  } as never);
  const lines = async () => (await registry.metrics()).split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  return { lines, warnings, metrics };
}

describe('registerNetworkMetrics', () => {
  it('exports capacity, held and free per family, and claims by state and reason, as last computed from the caches', async () => {
    const refused: IPAMClaim = {
      ...claim({ name: 'vm3.blue', network: 'blue' }),
      status: { ips: [], conditions: [{ type: 'IPsAllocated', status: 'False', reason: 'SubnetExhausted' }] },
    };
    const claims = [claim({ name: 'vm1.blue', network: 'blue', ips: ['10.100.0.1/29'] }), refused];
    const { lines, metrics } = setup([ovnNad('blue', { networkName: 'blue', subnets: '10.100.0.0/29' })], claims);
    assert.deepEqual(await lines(), [], 'nothing before the caches have synced (start): partial caches would give partial figures');
    metrics.start();
    try {
      assert.deepEqual(await lines(), [
        'persistent_ips_network_addresses{network="blue",family="ipv4",state="held"} 1',
        'persistent_ips_network_addresses{network="blue",family="ipv4",state="capacity"} 6',
        'persistent_ips_network_addresses{network="blue",family="ipv4",state="free"} 5',
        'persistent_ips_network_claims{network="blue",state="allocated",reason=""} 1',
        'persistent_ips_network_claims{network="blue",state="pending",reason=""} 0',
        'persistent_ips_network_claims{network="blue",state="refused",reason="SubnetExhausted"} 1',
      ]);
      claims.pop();
      assert.match((await lines()).join('\n'), /reason="SubnetExhausted"\} 1/, 'a scrape shows the last computation, it does not compute');
      metrics.refresh();
      assert.doesNotMatch((await lines()).join('\n'), /SubnetExhausted/, 'the next computation (the timer) drops the series');
    } finally {
      metrics.stop();
    }
  });

  it('an unknown capacity has no capacity or free series; a network that goes away leaves no series behind', async () => {
    const nads = [ovnNad('nosub', { networkName: 'nosub', subnets: null })];
    const { lines, metrics } = setup(nads, [claim({ name: 'vm1.nosub', network: 'nosub', ips: ['10.0.0.9/24'] })]);
    metrics.refresh();
    assert.deepEqual(
      (await lines()).filter((l) => l.startsWith('persistent_ips_network_addresses')),
      ['persistent_ips_network_addresses{network="nosub",family="ipv4",state="held"} 1'],
    );
    nads.length = 0;
    metrics.refresh();
    assert.deepEqual(await lines(), []);
  });

  it('logs a problem once while it lasts, and again when it comes back, scraped or not', () => {
    const nads = [ovnNad('bad', { networkName: 'bad', subnets: '10.0.0.0/24,10.0.0.0/25' })];
    const { warnings, metrics } = setup(nads, []);
    metrics.refresh();
    metrics.refresh();
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0] ?? '', /address space of network bad: .*overlap/);
    const bad = nads.pop()!;
    metrics.refresh();
    nads.push(bad);
    metrics.refresh();
    assert.equal(warnings.length, 2);
  });
});
