// Issue 26, section 6: the controller started before its namespace exists (a kustomize overlay that renamed it, a
// Helm release into a namespace not created yet). The webhook certificate Secret cannot be stored: the operator gets
// ONE clear error line naming the namespace and what to do, not several retries a second with a stack trace; the
// retries back off quietly, and the controller recovers by itself once the namespace is created.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { CONTROLLER_NAMESPACE, controllerNamespace } from '../local/webhook-config.ts';
import { freePort } from '../harness/index.ts';
import type { LogLine } from '../local/controller-process.ts';
import { operabilityCase, summaryAtEnd } from './cases.ts';
import { World } from './world.ts';

const world = new World('missing-namespace', { controllerNamespace: false });
/** How long the controller runs without its namespace: long enough for several retries at the old rate (4/s). */
const WITHOUT_NAMESPACE_MS = 12_000;

describe('operability: the controller namespace does not exist yet', { timeout: 4 * 60_000 }, () => {
  before(() => world.setUp(), { timeout: 120_000 });
  after(() => world.tearDown(), { timeout: 60_000 });
  summaryAtEnd(world);

  operabilityCase(world, 'one error line naming the namespace and the fix, quiet retries with backoff, recovery once it is created', async (t) => {
    const controller = await world.startController({
      name: 'no-namespace',
      webhookPort: await freePort(),
      waitReady: false,
    });
    // Lines about the namespace itself (the Secret's name also holds it, on lines about other things).
    const isAbout = (l: LogLine) => l['namespace'] === CONTROLLER_NAMESPACE || String(l.msg).includes(`namespace ${CONTROLLER_NAMESPACE}`);
    const isLoud = (l: LogLine) => ['warn', 'error', 'fatal'].includes(String(l['level']));
    const isRetry = (l: LogLine) => l.msg === 'the controller namespace still does not exist';
    // The window starts at the first complaint, not at the start: on a loaded machine the process alone may take
    // seconds to come up, and a window from the start would then hold fewer retries than the backoff gives.
    await controller.waitForLog('its first complaint about the namespace', (l) => isAbout(l) && isLoud(l), { timeoutMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, WITHOUT_NAMESPACE_MS));
    // The retries go on, at debug: a second one comes (the first after 1 s, the second 2 s later).
    await controller.waitForLog('a second retry', (l) => isRetry(l) && controller.logs.filter(isRetry).indexOf(l) >= 1, { timeoutMs: 30_000 });
    const about = controller.logs.filter(isAbout);
    const loud = about.filter(isLoud);
    t.diagnostic(
      `${about.length} lines name ${CONTROLLER_NAMESPACE} in ${WITHOUT_NAMESPACE_MS / 1000} s; at warn or above: ${loud.map((l) => l.msg).join(' | ')}`,
    );
    assert.equal(loud.length, 1, `one warn/error line about the missing namespace, got ${loud.length}`);
    assert.equal(loud[0]!['level'], 'error');
    assert.match(String(loud[0]!.msg), new RegExp(`namespace ${CONTROLLER_NAMESPACE} does not exist.*create the namespace`));
    assert.equal(JSON.stringify(loud[0]).includes('"stack"'), false, 'no stack trace');
    const retries = controller.logs.filter(isRetry);
    // Backoff: the delays between retries grow (1 s, 2 s, 4 s, ... up to 30 s), so 12 s holds only a handful.
    assert.ok(retries.length <= 5, `backoff: at most 5 retries in ${WITHOUT_NAMESPACE_MS / 1000} s, got ${retries.length}`);
    const delays = retries.map((l) => Number(l['retryInMs']));
    assert.deepEqual(
      delays,
      [...delays].sort((a, b) => a - b),
      `growing delays: ${delays.join(', ')}`,
    );

    const from = controller.logs.length;
    await world.ensureNamespace(controllerNamespace);
    await controller.waitForLog('recovery', (l) => l.msg === 'the controller namespace exists now; the webhook certificate is provisioned', {
      from,
      timeoutMs: 60_000,
    });
  });
});
