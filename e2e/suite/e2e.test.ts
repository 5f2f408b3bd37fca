// The end-to-end suite of persistent-ips: every lifecycle rule of spec §5 (e2e/suite/README.md maps each row to
// its test) against a real kube-apiserver with the real garbage collector, KubeVirt's real virt-controller (the
// world of e2e/kubevirt, with its node and virt-api stand-ins), and the controller as a separate process
// (dist/cli/main.js).
//
// ONE world for the whole suite (this file's `before`); one namespace per case. Run after `npm run build`:
//   node_modules/.bin/node --test --test-reporter=spec --test-concurrency=1 "e2e/suite/**/*.test.ts"
import { after, before, describe } from 'node:test';
import { summaryAtEnd } from '../kubevirt/world.ts';
import { SuiteEnv } from './env.ts';
import { registerCreateVm } from './rows/create-vm.ts';
import { registerSteadyState } from './rows/steady-state.ts';
import { registerRestart } from './rows/restart.ts';
import { registerHotplug } from './rows/hotplug.ts';
import { registerFeatureGate } from './rows/feature-gate.ts';
import { registerNads } from './rows/nads.ts';
import { registerExistingClaims } from './rows/existing-claims.ts';
import { registerStopStartMigrate } from './rows/stop-start-migrate.ts';
import { registerDeletion } from './rows/deletion.ts';

const env = new SuiteEnv();

describe('persistent-ips end to end (spec §5 lifecycle rules)', { timeout: 30 * 60_000 }, () => {
  before(() => env.setUp(), { timeout: 300_000 });
  after(() => env.tearDown(), { timeout: 300_000 });

  // in the order of the spec's table
  registerCreateVm(env);
  registerStopStartMigrate(env);
  registerDeletion(env);
  registerHotplug(env);
  registerFeatureGate(env);
  registerNads(env);
  registerExistingClaims(env);
  registerRestart(env);
  // last: it measures the whole cluster once every case above has converged
  registerSteadyState(env);
});

// The acceptance line: how many end-to-end cases ran, against which Kubernetes version (printed in the summary).
summaryAtEnd(env, 'e2e');
