import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import type { Pod, VirtualMachineInstance } from '../kube/types.ts';
import { Subject } from '../streams/rx.ts';
import { createLogger } from '../telemetry/logger.ts';
import { createPodAdmissionHandler } from './admission.ts';
import { admissionReview, claim, ovnNad } from '../../test/objects.ts';
import { FakeCache } from '../../test/fake-cache.ts';
import { createWebhookMetrics } from './metrics.ts';
import type { PodMutationReport } from './pod-mutation.ts';
import { aggregateReports } from './report-aggregation.ts';

const unknown = (i: number): PodMutationReport => ({ reason: 'UnknownNetworkElement', message: `element ${i} matches nothing` });

describe('aggregateReports', () => {
  it('keeps a few reports of a reason as they are', () => {
    const reports = [unknown(0), unknown(1), { reason: 'PersistenceBlocked', network: 'red', message: 'blocked' } as PodMutationReport, unknown(2)];
    assert.deepEqual(aggregateReports(reports), [unknown(0), unknown(1), unknown(2), reports[2]]);
  });

  it('folds many of one reason into one report that counts them and shows the first', () => {
    const reports = Array.from({ length: 998 }, (_, i) => unknown(i));
    const out = aggregateReports(reports);
    assert.equal(out.length, 1);
    assert.equal(out[0]!.reason, 'UnknownNetworkElement');
    assert.equal(
      out[0]!.message,
      '998 of the same kind (UnknownNetworkElement), the first 3: element 0 matches nothing; element 1 matches nothing; element 2 matches nothing; and 995 more',
    );
  });
});

describe('admission of a pod with many unknown network elements', () => {
  it('one warning to the API server and one log line, not one per element', async () => {
    const NS = 'vms';
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write: (chunk: Buffer, _e, done) => {
        for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const red = ovnNad('red');
    const owner = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', name: 'vm1', uid: 'vmi-uid', controller: true };
    const vmi: VirtualMachineInstance = {
      metadata: { name: 'vm1', namespace: NS, uid: 'vmi-uid' },
      spec: { networks: [{ name: 'red', multus: { networkName: 'red' } }], domain: { devices: { interfaces: [{ name: 'red', bridge: {} }] } } },
    };
    const elements = Array.from({ length: 998 }, (_, i) => ({ name: `ghost-${i}`, namespace: NS, interface: `pod${i}` }));
    const pod: Pod = {
      metadata: {
        name: 'virt-launcher-vm1-x',
        namespace: NS,
        labels: { 'kubevirt.io': 'virt-launcher' },
        annotations: { 'kubevirt.io/domain': 'vm1', 'k8s.v1.cni.cncf.io/networks': JSON.stringify(elements) },
        ownerReferences: [owner],
      },
    };
    const handle = createPodAdmissionHandler({
      logger: createLogger('debug', sink),
      gateEnabled: () => true,
      vmis: new FakeCache([vmi]),
      nads: new FakeCache([red]),
      // The VM's own claim, so that the pod is admitted (docs/webhook-behaviour.md, which claim a pod may be pointed at).
      claims: new FakeCache([claim({ name: 'vm1.red', owners: [owner], network: 'net-red' })]),
      claimEvents: new Subject(),
      fetchClaim: async () => undefined,
      fetchVmi: async () => vmi,
      metrics: createWebhookMetrics(new Registry()),
    });
    const out = await handle(admissionReview(pod));
    await new Promise((r) => setImmediate(r));
    assert.equal(out.response?.allowed, true);
    const unknownWarnings = (out.response?.warnings ?? []).filter((w) => /UnknownNetworkElement|matches no network/.test(w));
    assert.equal(unknownWarnings.length, 1, JSON.stringify(out.response?.warnings));
    assert.match(unknownWarnings[0]!, /^persistent-ips: 998 of the same kind \(UnknownNetworkElement\)/);
    const logged = lines.filter((l) => l['reason'] === 'UnknownNetworkElement');
    assert.equal(logged.length, 1);
    assert.equal(logged[0]!['level'], 'warn');
  });
});
