// Issue 15: the API server goes away and comes back. The informers must reconnect (a relist after 410 must not
// inherit the outage's backoff), and the controller must catch up with what it missed: a VM created after the
// outage gets its claim, a VM deleted after it releases its claim. Asserted on the outcome, not on a time: how fast
// the controller catches up is measured by `npm run bench`, not here.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { CLAIM_FINALIZER } from '../../src/claims/constants.ts';
import { buildVM } from '../kubevirt/launcher-fixture.ts';
import { operabilityCase, summaryAtEnd } from './cases.ts';
import type { ControllerProcess } from '../local/controller-process.ts';
import { paths, World } from './world.ts';

const world = new World('apiserver-restart');
/** Long enough for every informer to fail several times in a row and back off. */
const OUTAGE_MS = 20_000;
let controller: ControllerProcess | undefined;
let ns = '';

const vm = (name: string) => buildVM({ namespace: ns, name, networks: [{ name: 'red', nadName: 'nad-red' }] });

describe('operability: the API server stops and comes back', { timeout: 10 * 60_000 }, () => {
  before(
    async () => {
      await world.setUp();
      ns = await world.namespace('ar');
      await world.createNad(ns, 'nad-red', { network: 'red' });
      controller = await world.startController({ name: 'restart' });
    },
    { timeout: 120_000 },
  );

  after(() => world.tearDown(), { timeout: 120_000 });

  operabilityCase(
    world,
    'after an outage of the API server the controller reconnects and catches up: a new VM gets its claim, a deleted VM releases its claim',
    async (t) => {
      const c = controller!;
      await world.api.create(paths.vms(ns), vm('before'));
      const [claim] = await world.waitForClaims(ns, ['before.red']);
      assert.deepEqual(claim?.metadata.finalizers, [CLAIM_FINALIZER]);

      const logsBefore = c.logs.length;
      await world.cp.stopApiServer();
      await new Promise((r) => setTimeout(r, OUTAGE_MS));
      await world.cp.startApiServer();
      // The informers did lose the server (the outage was real for the controller, not skipped over).
      assert.ok(
        c.logsMatching((l) => /watch failed; reconnecting|list failed; retrying/.test(String(l.msg)), logsBefore).length > 0,
        `the controller noticed the outage:\n${c.tail(20)}`,
      );

      await world.api.create(paths.vms(ns), vm('after'));
      await world.api.delete(paths.vms(ns, 'before'));
      // A generous bound only so that a broken controller fails the test instead of hanging it.
      await world.waitForClaims(ns, ['after.red'], 120_000);
      const [fresh] = await world.api.claims(ns);
      assert.equal(fresh?.metadata.ownerReferences?.[0]?.name, 'after');
      assert.equal(c.diedReason(), undefined, 'the controller kept running through the outage');
      t.diagnostic(`controller warnings during the outage: ${c.logsMatching((l) => String(l.level) === 'warn', logsBefore).length}`);
    },
    { timeoutMs: 300_000 },
  );

  summaryAtEnd(world);
});
