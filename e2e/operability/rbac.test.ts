// Issue 4, acceptance 2: least privilege. manifests/rbac (kustomize) is applied to a real control plane (RBAC
// authorization on), the controller runs with a token of its ServiceAccount from the TokenRequest API and nothing
// else, and does its whole job: claims, finalizer release, Events, the webhook Secret and caBundle, the Lease. Then
// what the ServiceAccount may do (`kubectl auth can-i --list`) is compared with docs/rbac.md.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { CLAIM_FINALIZER } from '../../src/claims/constants.ts';
import { kubeconfigYaml, poll, runKubectl } from '../harness/index.ts';
import { buildVM } from '../kubevirt/launcher-fixture.ts';
import { operabilityCase, summaryAtEnd } from './cases.ts';
import { startLagProxy } from './lag-proxy.ts';
import type { CoreEvent } from '../suite/kube.ts';
import { isWarnOrWorse, REPO_ROOT, sumOf } from '../local/controller-process.ts';
import { coveredBy, docGrants, grantKey, parseCanIList, parseRbacDoc, type Grant } from './rbac-docs.ts';
import {
  claimReferences,
  CONTROLLER_NAMESPACE,
  expectedReferences,
  LEASE_NAME,
  paths,
  secretCertificates,
  World,
  WEBHOOK_SECRET,
  type Lease,
  type Secret,
} from './world.ts';

const world = new World('rbac', { virtController: true });
const SA_NAME = 'persistent-ips-controller';
const SA = `system:serviceaccount:${CONTROLLER_NAMESPACE}:${SA_NAME}`;

let saKubeconfig = '';
let ns = '';

describe('operability: least privilege (manifests/rbac, a TokenRequest token, docs/rbac.md)', { timeout: 10 * 60_000 }, () => {
  before(
    async () => {
      await world.setUp();
      const applied = await world.cp.kubectl(['apply', '-k', join(REPO_ROOT, 'manifests', 'rbac')]);
      console.log(`[operability:rbac] kubectl apply -k manifests/rbac:\n${applied.stdout.trim()}`);
      // TokenRequest API: a bound, expiring token of the ServiceAccount (what a projected volume gives a pod).
      const token = (await world.cp.kubectl(['create', 'token', SA_NAME, '-n', CONTROLLER_NAMESPACE, '--duration', '2h'])).stdout.trim();
      assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'a JWT');
      saKubeconfig = join(world.dir, 'kubeconfig-serviceaccount');
      writeFileSync(saKubeconfig, kubeconfigYaml(world.cp.server, world.cp.caFile, token), { mode: 0o600 });
      await world.installWebhookConfiguration(world.webhookPort);
      ns = await world.namespace('rbac');
      await world.createNad(ns, 'nad-red', { network: 'red' });
    },
    { timeout: 120_000 },
  );

  after(() => world.tearDown(), { timeout: 120_000 });

  operabilityCase(
    world,
    'the controller does its whole job with only the permissions of manifests/rbac (token from the TokenRequest API): claim, finalizer release, Event, webhook Secret + caBundle, Lease',
    async (t) => {
      const whoami = await runKubectl(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'], { kubeconfig: saKubeconfig, binDir: world.cp.binDir });
      assert.equal(whoami.stdout.trim(), SA, 'the kubeconfig authenticates as the ServiceAccount');

      const c = await world.startController({ name: 'serviceaccount', kubeconfig: saKubeconfig, leaderElect: true });
      try {
        // The Lease, taken with get/create/update on leases only.
        const lease = await poll('the leader Lease to be held', 30_000, async () => {
          const l = await world.api.get<Lease>(paths.leases(CONTROLLER_NAMESPACE, LEASE_NAME));
          return l?.spec?.holderIdentity ? l : undefined;
        });
        await poll('leader_election_master_status 1', 30_000, async () => ((await c.metric('leader_election_master_status')) === 1 ? true : undefined));
        // The Secret (created by name) and the caBundle (patched by name).
        const secret = await world.api.get<Secret>(paths.secrets(CONTROLLER_NAMESPACE, WEBHOOK_SECRET));
        assert.ok(secret?.data?.['tls.crt'] && secret.data['ca.crt'], 'the webhook Secret holds a CA and a serving certificate');
        const bundle = await world.waitForCaBundle();
        assert.equal(
          bundle,
          Buffer.from(secret.data['ca-bundle.crt'] ?? secret.data['ca.crt'], 'base64').toString('utf8'),
          "the caBundle is the Secret's CA bundle",
        );
        t.diagnostic(
          `Lease held by ${lease.spec!.holderIdentity}; Secret serving certificate serial ${secretCertificates(secret).servingSerial}; caBundle written`,
        );

        // A VM: claim with owner reference, finalizer and label; the launcher pod mutated through the webhook.
        const vm = await world.kv.createVM(buildVM({ namespace: ns, name: 'vm1', networks: [{ name: 'red', nadName: 'nad-red' }] }));
        const [claim] = await world.waitForClaims(ns, ['vm1.red']);
        assert.deepEqual(claim!.metadata.finalizers, [CLAIM_FINALIZER]);
        const owner = claim!.metadata.ownerReferences?.[0];
        assert.equal(owner?.uid, vm.metadata.uid);
        assert.equal(owner?.blockOwnerDeletion, true, 'blockOwnerDeletion set (virtualmachines/finalizers update)');
        const { pod } = await world.kv.waitForVMIRunning(ns, 'vm1', { timeoutMs: 30_000 });
        assert.deepEqual(claimReferences(pod), expectedReferences({ red: 'vm1.red' }));

        // An Event (events create/patch): a VM whose persistent network's NAD does not exist.
        await world.kv.createVM(buildVM({ namespace: ns, name: 'vm-missing-nad', running: false, networks: [{ name: 'blue', nadName: 'nad-missing' }] }));
        const event = await poll('an Event on vm-missing-nad', 30_000, async () => {
          const { items } = await world.api.list<CoreEvent>(paths.events(ns));
          return items.find((e) => e.involvedObject.name === 'vm-missing-nad');
        });
        t.diagnostic(`Event ${event.reason}: ${event.message}`);

        // Delete the VM: the finalizer is released once the VMI is gone, and garbage collection removes the claim.
        await world.kv.deleteVM(ns, 'vm1');
        await poll('claim vm1.red to be released and collected', 60_000, async () =>
          (await world.api.get(paths.claims(ns, 'vm1.red'))) === undefined ? true : undefined,
        );
        assert.ok((await c.metric('persistent_ips_finalizers_removed_total')) >= 1, 'the controller removed the finalizer');

        // Nothing was refused along the way.
        const m = await c.metrics();
        const forbidden = m.filter((s) => s.name === 'persistent_ips_api_requests_total' && (s.labels['code'] === '403' || s.labels['code'] === '401'));
        assert.deepEqual(forbidden, [], 'no API request of the controller was refused (401/403)');
        const calls = m
          .filter((s) => s.name === 'persistent_ips_api_requests_total')
          .map((s) => `${s.labels['verb']} ${s.labels['resource']} ${s.labels['code']}: ${s.value}`);
        t.diagnostic(`API requests: ${calls.join('; ')}`);
        // Word boundaries: a pid such as 14034 is not a 403.
        const complaints = c.logs.filter((l) => isWarnOrWorse(l) && /\bforbidden\b|\b40[13]\b|unauthori[sz]ed/i.test(JSON.stringify(l)));
        assert.deepEqual(complaints, [], 'no log line about a refused request');
        assert.equal(sumOf(m, 'persistent_ips_webhook_admissions_total', { result: 'denied' }), 0);
        assert.deepEqual(await world.rejectedLauncherPods(ns), [], 'virt-controller had no launcher pod refused');
      } finally {
        await c.stop();
      }
      // A graceful stop releases the Lease (update by name).
      const released = await world.api.get<Lease>(paths.leases(CONTROLLER_NAMESPACE, LEASE_NAME));
      assert.equal(released?.spec?.holderIdentity ?? '', '', 'the Lease was released on shutdown');
    },
  );

  operabilityCase(world, "the webhook's API fallback (a GET of a VMI its cache has not seen yet) works with only these permissions", async (t) => {
    // The controller's watch is made to lag (see lag-proxy.ts), so the webhook must GET the VMI.
    const proxy = await startLagProxy(world.cp.server, 500);
    const token = (await world.cp.kubectl(['create', 'token', SA_NAME, '-n', CONTROLLER_NAMESPACE, '--duration', '1h'])).stdout.trim();
    const kubeconfig = proxy.writeKubeconfig(join(world.dir, 'kubeconfig-serviceaccount-lagging'), world.cp.caFile, token);
    const c = await world.startController({ name: 'serviceaccount-lagging', kubeconfig });
    try {
      const direct = await world.namespace('rbac-direct');
      await world.createNad(direct, 'nad-red', { network: 'red' });
      const vmi = await world.createVmi(direct, 'vmi-cold', [{ name: 'red', nadName: 'nad-red' }]);
      // As KubeVirt does, a 503 (the claim not made yet, or an API read through the lagging proxy running past the
      // admission's 3 s budget on a loaded machine) is retried; a refusal for any other reason fails.
      let created = await world.createLauncherPod(vmi, 'create');
      for (let attempt = 2; !created.ok && created.status === 503 && attempt <= 10; attempt++) {
        t.diagnostic(`attempt ${attempt - 1} refused (retried as KubeVirt would): ${created.message}`);
        await new Promise((r) => setTimeout(r, 1000));
        created = await world.createLauncherPod(vmi, `create-${attempt}`);
      }
      assert.ok(created.ok, `launcher pod admitted: ${created.ok ? '' : `HTTP ${created.status} ${created.message}`}`);
      assert.deepEqual(claimReferences(created.pod), expectedReferences({ red: 'vmi-cold.red' }));
      const m = await c.metrics();
      assert.ok(sumOf(m, 'persistent_ips_webhook_vmi_lookups_total', { source: 'api' }) >= 1, 'the VMI was read from the API');
      const forbidden = m.filter((s) => s.name === 'persistent_ips_api_requests_total' && ['401', '403'].includes(s.labels['code'] ?? ''));
      assert.deepEqual(forbidden, [], 'no request refused');
      const gets = m
        .filter((s) => s.name === 'persistent_ips_api_requests_total' && s.labels['verb'] === 'get')
        .map((s) => `${s.labels['resource']} ${s.labels['code']}`);
      t.diagnostic(`webhook reads: ${gets.join(', ')}; pod admitted in ${created.ms} ms`);
    } finally {
      await c.stop();
      await proxy.close();
    }
  });

  operabilityCase(
    world,
    'kubectl auth can-i --list for the ServiceAccount shows nothing beyond docs/rbac.md (cluster-wide and in the controller namespace), and everything documented is granted',
    async (t) => {
      const rules = parseRbacDoc(readFileSync(join(REPO_ROOT, 'docs', 'rbac.md'), 'utf8'));
      assert.ok(rules.length >= 10, `docs/rbac.md tables parsed (${rules.length} rules)`);
      const canI = async (as: string, namespace: string) =>
        parseCanIList((await world.cp.kubectl(['auth', 'can-i', '--list', `--as=${as}`, '-n', namespace])).stdout);

      // What every authenticated ServiceAccount may do (built-in discovery, selfsubject* reviews, OIDC discovery): a
      // ServiceAccount of the same namespace with no binding at all.
      const nobody = `system:serviceaccount:${CONTROLLER_NAMESPACE}:nobody-${world.runId}`;
      const scopes: { where: string; namespace: string; docScope: ('cluster' | 'namespace')[] }[] = [
        { where: 'cluster-wide (namespace default)', namespace: 'default', docScope: ['cluster'] },
        { where: `namespace ${CONTROLLER_NAMESPACE}`, namespace: CONTROLLER_NAMESPACE, docScope: ['cluster', 'namespace'] },
      ];
      const problems: string[] = [];
      for (const scope of scopes) {
        const baseline = await canI(nobody, scope.namespace);
        // The baseline must be only the built-ins, or ignoring it could hide something.
        const odd = baseline.grants.filter((g) => !/^selfsubject\w*reviews$/.test(g.resource) || g.verb !== 'create');
        assert.deepEqual(odd.map(grantKey), [], `the unbound ServiceAccount may only create selfsubject*reviews (${scope.where})`);
        assert.ok(
          baseline.urls.every((u) => u.startsWith('get /')),
          'and get non-resource URLs',
        );
        const builtIn = new Set(baseline.grants.map(grantKey));

        const sa = await canI(SA, scope.namespace);
        const extraUrls = sa.urls.filter((u) => !baseline.urls.includes(u));
        if (extraUrls.length) problems.push(`${scope.where}: non-resource URLs beyond the built-ins: ${extraUrls.join(', ')}`);
        const docRules = rules.filter((r) => scope.docScope.includes(r.scope));
        const granted = sa.grants.filter((g) => !builtIn.has(grantKey(g)));
        for (const g of granted) if (!coveredBy(g, docRules)) problems.push(`${scope.where}: granted but not documented: ${grantKey(g)}`);
        // And the other way: a documented permission the install does not grant is a wrong document.
        const grantedKeys = new Set(granted.map(grantKey));
        for (const d of docGrants(docRules)) if (!grantedKeys.has(grantKey(d))) problems.push(`${scope.where}: documented but not granted: ${grantKey(d)}`);
        t.diagnostic(`${scope.where}: ${granted.length} permissions beyond the built-ins, all documented: ${granted.map(grantKey).join(', ')}`);
      }
      assert.deepEqual(problems, [], 'auth can-i --list and docs/rbac.md agree');

      // The ServiceAccount's own view (its token, no impersonation) is the same as the impersonated one.
      const own = parseCanIList(
        (await runKubectl(['auth', 'can-i', '--list', '-n', CONTROLLER_NAMESPACE], { kubeconfig: saKubeconfig, binDir: world.cp.binDir })).stdout,
      );
      const asSa = await canI(SA, CONTROLLER_NAMESPACE);
      const keys = (l: { grants: Grant[] }) => [...new Set(l.grants.map(grantKey))].sort();
      assert.deepEqual(keys(own), keys(asSa), 'the token sees what --as shows');

      // The spot checks of docs/rbac.md. One is written differently from the doc: `update
      // virtualmachines.kubevirt.io/finalizers` asks kubectl about a VM NAMED "finalizers" (answer: no); the
      // subresource is asked for with --subresource.
      const may = async (args: string[]) => (await world.cp.kubectl(['auth', 'can-i', `--as=${SA}`, ...args], { check: false })).stdout.trim();
      const spot: [string[], string][] = [
        [['create', 'ipamclaims.k8s.cni.cncf.io', '-n', 'vm-demo'], 'yes'],
        [['update', 'virtualmachines.kubevirt.io', '--subresource=finalizers', '-n', 'vm-demo'], 'yes'],
        [['update', 'virtualmachineinstances.kubevirt.io', '--subresource=finalizers', '-n', 'vm-demo'], 'yes'],
        [['update', 'virtualmachines.kubevirt.io/finalizers', '-n', 'vm-demo'], 'no'],
        [['update', 'virtualmachines.kubevirt.io', '-n', 'vm-demo'], 'no'],
        [['get', 'pods', '-n', 'vm-demo'], 'no'],
        [['list', 'pods', '-n', 'vm-demo'], 'yes'],
        [['patch', 'pods', '-n', 'vm-demo'], 'yes'],
        [['delete', 'pods', '-n', 'vm-demo'], 'no'],
        [['get', `secrets/${WEBHOOK_SECRET}`, '-n', CONTROLLER_NAMESPACE], 'yes'],
        [['get', 'secrets', '-n', CONTROLLER_NAMESPACE], 'no'],
        [['list', 'secrets', '-n', CONTROLLER_NAMESPACE], 'no'],
        [['delete', `leases/${LEASE_NAME}`, '-n', CONTROLLER_NAMESPACE], 'no'],
        [['update', 'mutatingwebhookconfigurations/someone-elses'], 'no'],
        [['create', 'leases', '-n', 'default'], 'no'],
      ];
      for (const [args, want] of spot) assert.equal(await may(args), want, `kubectl auth can-i --as=$SA ${args.join(' ')}`);
    },
  );

  operabilityCase(
    world,
    'the namespace-only variant of docs/rbac.md (--namespace NS, RoleBinding in NS): launcher pods of other namespaces are still admitted, unchanged',
    async (t) => {
      // docs/rbac.md "Watching one namespace only": the ClusterRole is bound by a RoleBinding in NS instead of the
      // ClusterRoleBinding, plus a cluster-wide grant for kubevirts. Last case of the file: it changes the bindings.
      const watched = await world.namespace('rbac-watched');
      const other = await world.namespace('rbac-other');
      await world.createNad(watched, 'nad-red', { network: 'red' });
      await world.createNad(other, 'nad-red', { network: 'red' });
      await world.api.delete('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/persistent-ips-controller');
      const subject = [{ kind: 'ServiceAccount', name: SA_NAME, namespace: CONTROLLER_NAMESPACE }];
      await world.api.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${watched}/rolebindings`, {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'persistent-ips-controller', namespace: watched },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'persistent-ips-controller' },
        subjects: subject,
      });
      await world.api.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'persistent-ips-kubevirts' },
        rules: [{ apiGroups: ['kubevirt.io'], resources: ['kubevirts'], verbs: ['get', 'list', 'watch'] }],
      });
      await world.api.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'persistent-ips-kubevirts' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'persistent-ips-kubevirts' },
        subjects: subject,
      });
      // RBAC changes apply within a moment; wait until the ServiceAccount can list VMIs in NS and not elsewhere.
      await poll('the namespace-only bindings to apply', 30_000, async () => {
        const may = async (n: string) =>
          (await world.cp.kubectl(['auth', 'can-i', `--as=${SA}`, 'list', 'virtualmachineinstances.kubevirt.io', '-n', n], { check: false })).stdout.trim();
        return (await may(watched)) === 'yes' && (await may(other)) === 'no' ? true : undefined;
      });
      const c = await world.startController({
        name: 'serviceaccount-namespaced',
        kubeconfig: saKubeconfig,
        extraArgs: ['--namespace', watched],
      });
      try {
        // In NS: the usual.
        const mine = await world.createVmi(watched, 'vmi-in', [{ name: 'red', nadName: 'nad-red' }]);
        const inside = await world.createLauncherPod(mine, 'create');
        assert.ok(inside.ok, `launcher pod in ${watched} admitted: ${inside.ok ? '' : inside.message}`);
        assert.deepEqual(claimReferences(inside.pod), expectedReferences({ red: 'vmi-in.red' }));
        await world.waitForClaims(watched, ['vmi-in.red']);
        // Elsewhere: a VM this controller does not manage must still start, without references.
        const theirs = await world.createVmi(other, 'vmi-out', [{ name: 'red', nadName: 'nad-red' }]);
        const outside = await world.createLauncherPod(theirs, 'create');
        const m = await c.metrics();
        t.diagnostic(
          `launcher pod in ${other}: ${outside.ok ? `admitted with ${JSON.stringify(claimReferences(outside.pod))}` : `REFUSED, HTTP ${outside.status}: ${outside.message}`}; ` +
            `webhook outcomes ${JSON.stringify(Object.fromEntries(m.filter((x) => x.name === 'persistent_ips_webhook_admissions_total').map((x) => [x.labels['result'], x.value])))}; ` +
            `vmi lookups ${JSON.stringify(Object.fromEntries(m.filter((x) => x.name === 'persistent_ips_webhook_vmi_lookups_total').map((x) => [x.labels['source'], x.value])))}`,
        );
        assert.ok(
          outside.ok,
          `the launcher pod of a VM outside the watched namespace is admitted (got HTTP ${outside.ok ? 201 : outside.status}: ${outside.ok ? '' : outside.message})`,
        );
        assert.deepEqual(claimReferences(outside.pod), expectedReferences({ red: undefined }), 'and left unchanged');
      } finally {
        await c.stop();
      }
    },
  );
});

summaryAtEnd(world);
