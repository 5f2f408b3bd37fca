// Issue 4, acceptance 5: the install manifests render (`kubectl kustomize`, the version-matched kubectl) and the
// real API server accepts what they render (server-side dry run: schema, defaulting, admission with Pod Security,
// webhook-configuration validation), through manifests/verify.sh, the project's own check.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { kubectlPath } from '../harness/index.ts';
import { operabilityCase, summaryAtEnd } from './cases.ts';
import { REPO_ROOT } from '../local/controller-process.ts';
import { World } from './world.ts';

const world = new World('manifests', { controllerNamespace: false });

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, out }));
  });
}

describe('operability: install manifests render and are accepted by the API server', { timeout: 10 * 60_000 }, () => {
  // A fresh control plane WITHOUT the controller namespace: verify.sh then creates it from the render, with its Pod
  // Security labels (enforce: restricted), so that the Deployment is judged as it would be on install.
  before(() => world.setUp(), { timeout: 120_000 });
  after(() => world.tearDown(), { timeout: 120_000 });

  operabilityCase(
    world,
    'manifests/verify.sh --kubeconfig: default, with-crds, ipamclaim-crd, cert-manager, claim-reference-policy (and every base) render, and their objects pass a server-side dry run',
    async (t) => {
      const kubectl = kubectlPath(world.cp.binDir);
      const { code, out } = await run('bash', [join(REPO_ROOT, 'manifests', 'verify.sh'), '--kubeconfig', world.cp.kubeconfigPath], {
        ...process.env,
        KUBECTL: kubectl,
      });
      const lines = out.trimEnd().split('\n');
      for (const line of lines) t.diagnostic(line);
      const last = lines.at(-1) ?? '';
      const m = /^(\d+) passed, (\d+) failed, (\d+) skipped$/.exec(last);
      assert.ok(m, `verify.sh ends with its summary line (got: ${last})`);
      assert.equal(Number(m[2]), 0, `0 failed:\n${lines.filter((l) => l.startsWith('FAIL') || l.startsWith('    ')).join('\n')}`);
      assert.equal(code, 0, 'verify.sh exits 0');
      for (const overlay of ['rbac', 'controller', 'webhook', 'ipamclaim-crd', 'default', 'with-crds', 'cert-manager', 'examples', 'claim-reference-policy']) {
        assert.ok(
          lines.some((l) => l.startsWith(`ok    render ${overlay} (`)),
          `kubectl kustomize manifests/${overlay} renders`,
        );
      }
      for (const overlay of ['default', 'with-crds', 'ipamclaim-crd', 'cert-manager', 'claim-reference-policy']) {
        assert.ok(
          lines.some((l) => new RegExp(`^ok    dry-run ${overlay}: \\d+/\\d+ objects accepted by the API server$`).test(l)),
          `manifests/${overlay} passes the server-side dry run`,
        );
      }
      assert.ok(
        lines.includes("ok    no CRD besides IPAMClaim's, and that one only in ipamclaim-crd and with-crds"),
        'manifests/ ships no KubeVirt or NAD CRD',
      );
      assert.ok(lines.includes('ok    no other kustomization installs the claim-reference policy'), 'the ValidatingAdmissionPolicy is opt-in');
      assert.ok(
        lines.some((l) => l.startsWith('ok    API server ready (v1.34.')),
        'the dry runs went to the harness API server',
      );
      // The only objects not judged: cert-manager's own kinds, whose CRDs this cluster (without cert-manager) lacks.
      const skips = lines.filter((l) => l.startsWith('skip'));
      for (const s of skips)
        assert.match(
          s,
          /^skip {2}dry-run cert-manager: \d+ object\(s\) of kinds the cluster does not serve: (?:"(?:Certificate|Issuer|ClusterIssuer)"@"cert-manager\.io\/v1" ?)+$/,
          'only cert-manager.io objects are skipped',
        );
      t.diagnostic(`verify.sh: ${last}`);
    },
  );
});

summaryAtEnd(world);
