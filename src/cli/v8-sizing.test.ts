import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { STEADY_STATE_AT_THE_LATEST_MS, sizeV8ForMemory, steadyState, whenSteady } from './v8-sizing.ts';

/** whenSteady's timer is unref'd (it must not keep a controller alive); a test waiting on it holds the loop open. */
async function holdingTheLoop<T>(wait: Promise<T>): Promise<T> {
  const hold = setInterval(() => undefined, 1000);
  try {
    return await wait;
  } finally {
    clearInterval(hold);
  }
}

describe('V8 sized for memory once start-up is over', () => {
  const table: [string, Parameters<typeof steadyState>[0], boolean][] = [
    ['caches still listing', { synced: false, queuesIdle: true, sinceSyncedMs: 0 }, false],
    ['synced, the cold start still writing', { synced: true, queuesIdle: false, sinceSyncedMs: 5_000 }, false],
    ['synced and drained', { synced: true, queuesIdle: true, sinceSyncedMs: 5_000 }, true],
    ['synced with nothing to do (no VMs)', { synced: true, queuesIdle: true, sinceSyncedMs: 0 }, true],
    [
      'a standby, or a leader under constant churn: never drained, but long enough',
      { synced: true, queuesIdle: false, sinceSyncedMs: STEADY_STATE_AT_THE_LATEST_MS },
      true,
    ],
    ['just short of the fallback', { synced: true, queuesIdle: false, sinceSyncedMs: STEADY_STATE_AT_THE_LATEST_MS - 1 }, false],
  ];
  for (const [name, input, want] of table) {
    it(`${name}: ${want ? 'steady' : 'not yet'}`, () => assert.equal(steadyState(input), want));
  }

  it('sets --optimize-for-size once, and never when PERSISTENT_IPS_V8_DEFAULTS=1', () => {
    const set: string[] = [];
    const record = (flags: string): void => void set.push(flags);
    assert.equal(sizeV8ForMemory({ PERSISTENT_IPS_V8_DEFAULTS: '1' }, record), false);
    assert.deepEqual(set, []);
    assert.equal(sizeV8ForMemory({}, record), true);
    assert.equal(sizeV8ForMemory({}, record), false);
    assert.deepEqual(set, ['--optimize-for-size']);
  });

  it('whenSteady calls back once, the first time the queues are idle', { timeout: 5000 }, async () => {
    const idle = [false, false, true, true, true];
    let checks = 0;
    let calls = 0;
    await holdingTheLoop(
      new Promise<void>((resolve) => {
        whenSteady({
          everyMs: 1,
          queuesIdle: () => idle[Math.min(checks++, idle.length - 1)]!,
          onSteady: () => {
            calls++;
            setTimeout(resolve, 20); // room for a wrong second call
          },
        });
      }),
    );
    assert.equal(calls, 1);
    assert.equal(checks, 3);
  });

  it('whenSteady calls back after the fallback time when the queues never drain', { timeout: 5000 }, async () => {
    let t = 0;
    let calls = 0;
    await holdingTheLoop(
      new Promise<void>((resolve) => {
        whenSteady({
          everyMs: 1,
          now: () => t,
          queuesIdle: () => {
            t += 30_000; // each check is 30 s later
            return false;
          },
          onSteady: () => {
            calls++;
            resolve();
          },
        });
      }),
    );
    assert.equal(calls, 1);
    assert.ok(t >= STEADY_STATE_AT_THE_LATEST_MS);
  });

  it('whenSteady never calls back once stopped', { timeout: 5000 }, async () => {
    let calls = 0;
    const stop = whenSteady({ everyMs: 1, queuesIdle: () => true, onSteady: () => calls++ });
    stop();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(calls, 0);
  });
});
