import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { EventRecorder, type CoreEvent, type EventTarget } from './events.ts';
import { createMetrics } from '../telemetry/metrics.ts';

const vm: EventTarget = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', namespace: 'ns', name: 'vm-a', uid: 'u1' };
const missing = { reason: 'NetworkAttachmentDefinitionNotFound', message: 'NAD ns/blue not found' };
const layer3 = { reason: 'UnsupportedTopology', message: 'NAD ns/red is layer3' };

function setup(fail = false) {
  const sent: CoreEvent[] = [];
  let failing = fail;
  const sink = async (e: CoreEvent) => {
    if (failing) throw new Error('apiserver down');
    sent.push(e);
  };
  const metrics = createMetrics({ defaultMetrics: false });
  const recorder = new EventRecorder(sink, pino({ level: 'silent' }), metrics, { instance: 'test', now: () => new Date(0) });
  return { sent, recorder, metrics, heal: () => { failing = false; } };
}

describe('EventRecorder', () => {
  it('emits a Warning event on the VM for a new cause, with a stable reason', async () => {
    const { sent, recorder } = setup();
    await recorder.report(vm, [missing]);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.type, 'Warning');
    assert.equal(sent[0]!.reason, 'NetworkAttachmentDefinitionNotFound');
    assert.deepEqual(sent[0]!.involvedObject, vm);
    assert.equal(sent[0]!.metadata.namespace, 'ns');
  });

  it('does not repeat an event while the same cause persists (no storm on resync)', async () => {
    const { sent, recorder, metrics } = setup();
    for (let i = 0; i < 5; i++) await recorder.report(vm, [missing, missing]);
    assert.equal(sent.length, 1);
    const values = (await metrics.persistenceBlocked.get()).values;
    assert.deepEqual(values.map((v) => [v.labels.reason, v.value]), [['NetworkAttachmentDefinitionNotFound', 1]]);
  });

  it('reports each distinct cause once, and again after it cleared and came back', async () => {
    const { sent, recorder } = setup();
    await recorder.report(vm, [missing, layer3]);
    await recorder.report(vm, [layer3]);
    await recorder.report(vm, []);
    await recorder.report(vm, [missing]);
    assert.deepEqual(sent.map((e) => e.reason), ['NetworkAttachmentDefinitionNotFound', 'UnsupportedTopology', 'NetworkAttachmentDefinitionNotFound']);
  });

  it('retries an event that could not be delivered on the next report', async () => {
    const { sent, recorder, heal } = setup(true);
    await recorder.report(vm, [missing]);
    assert.equal(sent.length, 0);
    heal();
    await recorder.report(vm, [missing]);
    assert.equal(sent.length, 1);
  });
});
