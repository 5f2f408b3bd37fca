import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type Logger, pino } from 'pino';
import type { EventInput } from '../kube/client.ts';
import { EventRecorder, type EventSink, namespaceGoing, type EventTarget } from './events.ts';
import { KubeApiError } from '../kube/errors.ts';
import { createMetrics } from '../telemetry/metrics.ts';

const vm: EventTarget = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', namespace: 'ns', name: 'vm-a', uid: 'u1' };
const missing = { reason: 'NetworkAttachmentDefinitionNotFound', message: 'NAD ns/blue not found' };
const layer3 = { reason: 'UnsupportedTopology', message: 'NAD ns/red is layer3' };

/** A recorder whose Events are kept in `sent` (refused while failing), or go to `options.sink`. */
function setup(options: { fail?: boolean; sink?: EventSink; log?: Logger } = {}) {
  const sent: EventInput[] = [];
  let failing = options.fail ?? false;
  const sink = async (e: EventInput) => {
    if (failing) throw new Error('apiserver down');
    sent.push(e);
  };
  const metrics = createMetrics({ defaultMetrics: false });
  const recorder = new EventRecorder(options.sink ?? sink, options.log ?? pino({ level: 'silent' }), metrics, { instance: 'test', now: () => new Date(0) });
  return {
    sent,
    recorder,
    metrics,
    heal: () => {
      failing = false;
    },
  };
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
    assert.deepEqual(
      values.map((v) => [v.labels.reason, v.value]),
      [['NetworkAttachmentDefinitionNotFound', 1]],
    );
  });

  it('reports each distinct cause once, and again after it cleared and came back', async () => {
    const { sent, recorder } = setup();
    await recorder.report(vm, [missing, layer3]);
    await recorder.report(vm, [layer3]);
    await recorder.report(vm, []);
    await recorder.report(vm, [missing]);
    assert.deepEqual(
      sent.map((e) => e.reason),
      ['NetworkAttachmentDefinitionNotFound', 'UnsupportedTopology', 'NetworkAttachmentDefinitionNotFound'],
    );
  });

  it('retries an event that could not be delivered on the next report', async () => {
    const { sent, recorder, heal } = setup({ fail: true });
    await recorder.report(vm, [missing]);
    assert.equal(sent.length, 0);
    heal();
    await recorder.report(vm, [missing]);
    assert.equal(sent.length, 1);
  });

  it('a namespace being deleted: no error line, counted, not retried; other failures stay errors', async () => {
    const lines: { level: number; msg: string }[] = [];
    const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
    const terminating = new KubeApiError({
      reason: 'forbidden',
      code: 403,
      verb: 'create',
      object: { kind: 'Event', namespace: 'ns' },
      status: {
        message: 'events "vm-a." is forbidden: unable to create new content in namespace ns because it is being terminated',
        details: { causes: [{ reason: 'NamespaceTerminating', field: 'metadata.namespace' }] },
      },
    });
    let calls = 0;
    let failWith: unknown = terminating;
    const sink = async () => {
      calls++;
      throw failWith;
    };
    const { recorder, metrics } = setup({ sink, log });
    for (let i = 0; i < 50; i++) await recorder.report(vm, [missing]);
    assert.equal(calls, 1, 'not retried: the namespace will not take it');
    assert.equal(lines.filter((l) => l.level >= 50).length, 0, 'no error line');
    assert.equal(lines.filter((l) => l.msg === 'event not recorded: the namespace is being deleted').length, 1);
    assert.equal(lines.find((l) => l.msg === 'event not recorded: the namespace is being deleted')!.level, 20, 'debug');

    failWith = new Error('apiserver down');
    await recorder.report({ ...vm, uid: 'u2' }, [missing]);
    assert.equal(lines.filter((l) => l.level === 50 && l.msg === 'could not record event').length, 1);
    const dropped = (await metrics.eventsDropped.get()).values.map((v) => [v.labels.reason, v.value]);
    assert.deepEqual(dropped.sort(), [
      ['error', 1],
      ['namespace_terminating', 1],
    ]);
  });

  it('recognises a deleted or gone namespace, and nothing else', () => {
    const err = (code: number, status?: object) =>
      new KubeApiError({ reason: code === 404 ? 'notFound' : 'forbidden', code, verb: 'create', object: { kind: 'Event' }, ...(status ? { status } : {}) });
    assert.equal(namespaceGoing(err(404)), true);
    assert.equal(namespaceGoing(err(403, { message: 'unable to create new content in namespace x because it is being terminated' })), true);
    assert.equal(namespaceGoing(err(403, { message: 'User cannot create events' })), false);
    assert.equal(namespaceGoing(new Error('x')), false);
  });

  it('a named scope holds causes on several objects: each is reported once, and only what cleared is forgotten', async () => {
    const { sent, recorder } = setup();
    const nad: EventTarget = { apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', namespace: 'ns', name: 'blue' };
    const onVm = { target: vm, reason: 'AddressRefused', message: 'no address' };
    const onNad = { target: nad, type: 'Normal' as const, reason: 'AllocatorPoolWarning', message: 'x'.repeat(2000) };
    await recorder.report('network:blue', [onVm, onNad]);
    await recorder.report('network:blue', [onNad]);
    await recorder.report('network:blue', [onVm, onNad]);
    assert.deepEqual(
      sent.map((e) => [e.involvedObject.kind, e.type, e.reason]),
      [
        ['VirtualMachine', 'Warning', 'AddressRefused'],
        ['NetworkAttachmentDefinition', 'Normal', 'AllocatorPoolWarning'],
        ['VirtualMachine', 'Warning', 'AddressRefused'],
      ],
    );
    assert.equal(sent[1]!.message.length, 1024, 'cut to what the API server takes');
    assert.equal('uid' in sent[1]!.involvedObject, false);
  });
});
