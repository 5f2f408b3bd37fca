// What the real API server answers an Event create in a namespace being deleted, and that the EventRecorder takes it
// for what it is: expected (debug, counted, not retried), not an error. A ConfigMap with a finalizer holds the
// namespace in Terminating long enough to ask.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { EventRecorder, namespaceGoing } from '../../src/controller/events.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { loadKubeConfig } from '../../src/kube/load-kubeconfig.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { poll, startControlPlane, type ControlPlane } from '../harness/index.ts';

const NS = 'going-away';
const scratch = mkdtempSync(join(tmpdir(), 'pips-ns-terminating-'));

describe('operability: Events into a namespace being deleted', { timeout: 3 * 60_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient;
  // cp.kubectl throws, naming the command and its stderr, when kubectl fails.
  const kubectl = async (args: string[], input?: string): Promise<string> => (await cp.kubectl(args, input === undefined ? {} : { input })).stdout.trim();

  before(
    async () => {
      cp = await startControlPlane({ dir: join(scratch, 'cp') });
      client = KubeClient.fromKubeConfig(loadKubeConfig({ path: cp.kubeconfigPath }).connection);
      await kubectl(['create', 'namespace', NS]);
      await kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'hold', namespace: NS, finalizers: ['example.com/hold'] } }),
      );
      await kubectl(['delete', 'namespace', NS, '--wait=false']);
      await poll('namespace Terminating', 30_000, async () =>
        (await kubectl(['get', 'namespace', NS, '-o', 'jsonpath={.status.phase}'])) === 'Terminating' ? true : undefined,
      );
    },
    { timeout: 120_000 },
  );

  after(
    async () => {
      if (cp) await cp.kubectl(['patch', 'configmap', 'hold', '-n', NS, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
      await cp?.stop();
      rmSync(scratch, { recursive: true, force: true });
    },
    { timeout: 60_000 },
  );

  it('the API server refuses the Event, and namespaceGoing() recognises its answer', async () => {
    const event = {
      metadata: { generateName: 'vm1.', namespace: NS },
      involvedObject: { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', namespace: NS, name: 'vm1', uid: 'u-1' },
      reason: 'NetworkAttachmentDefinitionNotFound',
      message: 'test',
      type: 'Warning',
    };
    const err = await client.createEvent(event).then(
      () => assert.fail('the Event was accepted in a terminating namespace'),
      (e: unknown) => e,
    );
    assert.equal(namespaceGoing(err), true, String(err));
  });

  it('the EventRecorder logs no error and does not retry', async () => {
    const lines: { level: number; msg: string }[] = [];
    const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as { level: number; msg: string }) });
    const metrics = createMetrics({ defaultMetrics: false });
    let sent = 0;
    const recorder = new EventRecorder(
      async (e) => {
        sent++;
        await client.createEvent(e);
      },
      log,
      metrics,
    );
    const target = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', namespace: NS, name: 'vm1', uid: 'u-1' };
    for (let i = 0; i < 20; i++) await recorder.report(target, [{ reason: 'NetworkAttachmentDefinitionNotFound', message: 'NAD going-away/blue not found' }]);
    assert.equal(sent, 1, 'one attempt');
    assert.deepEqual(
      lines.filter((l) => l.level >= 50).map((l) => l.msg),
      [],
    );
    assert.equal((await metrics.eventsDropped.get()).values.find((v) => v.labels.reason === 'namespace_terminating')?.value, 1);
  });
});
