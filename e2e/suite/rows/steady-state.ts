// Spec §6 "a steady state (resync, VMI status updates, pod churn) MUST cause zero writes", measured where it
// cannot be missed: the API server's own request counters (every client, every claim of every namespace of the
// suite), across VMI status updates, launcher pod churn (migrations, a stop/start), resyncs and a restart of the
// controller. It runs last, once every earlier case has converged.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { e2eCase, type SuiteEnv } from '../env.ts';
import { createRunningVM, waitForClaims, waitForResyncs, writeClaimIps, EVENTUALLY_MS, QUIET_WINDOW_MS, nadNamespace, RED, BLUE } from '../fixtures.ts';
import { apiserverClaimWrites, paths, type Sample } from '../kube.ts';
import { waitFor } from '../../kubevirt/virtctl.ts';

const VMS = 4;
/** How long convergence may take before the measurement starts. */
const SETTLE_DEADLINE_MS = 60_000;

const seriesKey = (s: Sample) => `${s.labels['verb']} ${s.labels['subresource'] || '-'} ${s.labels['code']}`;

function diff(before: Sample[], after: Sample[]): string[] {
  const was = new Map(before.map((s) => [seriesKey(s), s.value]));
  return after.filter((s) => s.value !== (was.get(seriesKey(s)) ?? 0)).map((s) => `${seriesKey(s)}: ${was.get(seriesKey(s)) ?? 0} → ${s.value}`);
}

export function registerSteadyState(env: SuiteEnv): void {
  describe('steady state (spec §6)', () => {
    e2eCase(
      env,
      'steady state: VMI status updates, launcher pod churn, resyncs and a controller restart cause zero writes on ipamclaims (API server /metrics)',
      async (c) => {
        const t0 = Date.now();
        const phase = (what: string) => c.t.diagnostic(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${what}`);
        const ns = await nadNamespace(c, 'steady-state', 'red', 'blue');
        const names = Array.from({ length: VMS }, (_, i) => `vm${i}`);
        for (const n of names) await createRunningVM(env, ns, n, [RED, BLUE]);
        const claimNames = names.flatMap((n) => [`${n}.red`, `${n}.blue`]);
        await waitForClaims(env, ns, claimNames);
        // what the IPAM plugin writes (before the measurement: those are its writes, not the controller's)
        for (const [i, name] of claimNames.entries()) await writeClaimIps(env, ns, name, [`10.${name.endsWith('red') ? 200 : 201}.0.${i + 10}/24`]);

        phase('set up');
        // Convergence: no write on ipamclaims anywhere for a whole quiet window.
        const settled = await waitFor(
          'no write on ipamclaims for a quiet window (convergence of every case so far)',
          async () => {
            const a = await apiserverClaimWrites(env.cp);
            await sleep(QUIET_WINDOW_MS); // a bounded observation window, see QUIET_WINDOW_MS
            const b = await apiserverClaimWrites(env.cp);
            return a.total === b.total ? b : undefined;
          },
          { timeoutMs: SETTLE_DEADLINE_MS, intervalMs: 0 },
        );
        phase('converged');
        const claimsBefore = new Map((await env.api.claims(ns)).map((x) => [x.metadata.name, x.metadata.resourceVersion]));
        const before = settled;
        c.t.diagnostic(`writes on ipamclaims so far: ${before.total}`);

        // 1. VMI status updates (virt-handler's bread and butter), three rounds
        const vmiStatusUpdate = async (round: number) => {
          for (const n of names) {
            // KubeVirt's VMI CRD has no status subresource: virt-handler writes status through the object itself
            await env.api.mergePatch(paths.vmis(ns, n), { status: { guestOSInfo: { id: 'fedora', versionId: `${40 + round}` } } });
          }
        };
        for (let round = 0; round < 3; round++) await vmiStatusUpdate(round);
        phase('VMI status updates');
        // 2. launcher pod churn: two live migrations, one stop/start
        await env.kv.migrate(ns, 'vm0', { timeoutMs: EVENTUALLY_MS });
        await env.kv.migrate(ns, 'vm1', { timeoutMs: EVENTUALLY_MS });
        await env.kv.stopVM(ns, 'vm2', { timeoutMs: EVENTUALLY_MS });
        await env.kv.startVM(ns, 'vm2', { timeoutMs: EVENTUALLY_MS });
        phase('pod churn');
        // 3. resyncs of the running controller
        const old = env.shared;
        await waitForResyncs(old, 2, old.logs.length);
        phase('resyncs');
        // 4. a controller restart: the new process lists everything and reconciles every key of every namespace
        const fresh = await env.restartShared();
        phase('restarted');
        await vmiStatusUpdate(3);
        await env.kv.migrate(ns, 'vm3', { timeoutMs: EVENTUALLY_MS }); // a launcher pod admitted by the new process
        phase('post-restart churn');
        await waitForResyncs(fresh, 2, 0);
        await sleep(QUIET_WINDOW_MS); // a bounded observation window, see QUIET_WINDOW_MS

        phase('window end');
        const after = await apiserverClaimWrites(env.cp);
        assert.deepEqual(diff(before.series, after.series), [], 'no POST/PUT/PATCH/DELETE on ipamclaims during the window');
        assert.equal(after.total - before.total, 0, 'zero writes on ipamclaims');
        const claimsAfter = new Map((await env.api.claims(ns)).map((x) => [x.metadata.name, x.metadata.resourceVersion]));
        assert.deepEqual(claimsAfter, claimsBefore, 'every claim of this case is unchanged');
        // the controller did work (so "no write" is not "no controller"): it reconciled, and wrote nothing itself
        assert.ok((await fresh.metric('controller_runtime_reconcile_total')) >= VMS, 'the restarted controller reconciled');
        const ownWrites = (await fresh.metrics()).filter(
          (s) =>
            s.name === 'persistent_ips_api_requests_total' &&
            s.labels['resource'] === 'ipamclaims' &&
            s.labels['verb'] !== 'list' &&
            s.labels['verb'] !== 'watch' &&
            s.labels['verb'] !== 'get',
        );
        assert.deepEqual(
          ownWrites.map((s) => `${s.labels['verb']} ${s.labels['code']} ${s.value}`),
          [],
          'the restarted controller sent no claim write',
        );
        c.t.diagnostic(`ipamclaims writes: ${before.total} before the window, ${after.total} after`);
      },
      { timeoutMs: 240_000 },
    );
  });
}
