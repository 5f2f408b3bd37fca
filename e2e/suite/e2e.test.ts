// The end-to-end suite of persistent-ips: every lifecycle rule of spec §5 (docs: /work/shared/spec or
// e2e/suite/README.md for the row → test map) against a real kube-apiserver with the real garbage collector, the
// KubeVirt stand-in doing virt-controller's part, and the controller as a separate process (dist/cli/main.js).
//
// ONE control plane for the whole suite (this file's `before`); one namespace per case. Run after `npm run build`:
//   node_modules/.bin/node --test --test-reporter=spec --test-concurrency=1 "e2e/suite/**/*.test.ts"
// PERSISTENT_IPS_EXISTING_KUBECONFIG=PATH runs it against an existing cluster instead (without real KubeVirt).
import { after, before, describe } from 'node:test';
import { SuiteEnv } from './env.ts';
import { registerCreateVm } from './rows/create-vm.ts';

const env = new SuiteEnv();

describe('persistent-ips end to end (spec §5 lifecycle rules)', { timeout: 30 * 60_000 }, () => {
  before(() => env.setUp(), { timeout: 300_000 });
  after(() => env.tearDown(), { timeout: 300_000 });

  registerCreateVm(env);
});

// The acceptance line: how many end-to-end cases ran, against which Kubernetes version (printed in the summary).
after((t) => {
  const { ran, passed, failed, todo } = env.tally;
  const wall = env.startedAt ? ` in ${((Date.now() - env.startedAt) / 1000).toFixed(0)} s` : '';
  t.diagnostic(`e2e: ${ran} cases against Kubernetes ${env.cluster?.version ?? '(no cluster)'} (${passed} passed, ${failed} failed; ${todo} todo checks)${wall}`);
});
