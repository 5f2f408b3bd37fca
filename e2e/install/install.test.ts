// Issue 12: the two install paths, kustomize (manifests/default, what install.yaml is rendered from) and the Helm
// chart (charts/persistent-ips), give the same working controller.
//   - the chart lints (--strict), its values.schema.json refuses misspelt and mistyped values, and it renders the same
//     objects as the kustomize overlays (default, cert-manager, with-crds; claimReferencePolicy.enabled adds those of
//     manifests/claim-reference-policy, and the monitoring values those of manifests/prometheus), apart from Helm's
//     bookkeeping labels and the Namespace, which Helm leaves to `--create-namespace`;
//   - each is installed into a real control plane (kubectl apply / helm install, the helm built from its Go module by
//     scripts/helm/build.sh), and the controller, run with the installed Deployment's args and env and a token of
//     the installed ServiceAccount (its RBAC, nothing more), becomes ready, publishes the webhook caBundle, and
//     creates the claim of a new VM; the chart is installed with the monitoring values on (stand-in Prometheus
//     Operator CRDs, monitoring-crds.yaml), and the rule and dashboard in the cluster are those of manifests/prometheus.
// There is no kubelet: the controller runs as a local process (the built CLI). e2e/install/image-smoke.ts does the
// same with the container image's own root filesystem.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { pinnedVersions, startControlPlane, type ControlPlane } from '../harness/index.ts';
import { preparedTool } from '../harness/prepare.ts';
import { REPO_ROOT } from '../local/controller-process.ts';
import { expectClaimFor, kustomize, launchBuiltCli, NAMESPACE, parseYaml, readInstalled, waitReady, type KubeObject, type Launched } from './installed.ts';

const exec = promisify(execFile);
const CHART = join(REPO_ROOT, 'charts', 'persistent-ips');

/** The helm binary built by scripts/helm/build.sh (before the tests: a build never runs under a test timeout). */
const helmBinary = async (): Promise<string> => process.env['HELM'] || (await preparedTool('helm'));
/** `--set` for each value. */
const sets = (values: readonly string[]): string[] => values.flatMap((s) => ['--set', s]);

// Labels and annotations that say who rendered an object, not what it is.
const BOOKKEEPING_LABELS = ['app.kubernetes.io/managed-by', 'app.kubernetes.io/instance', 'app.kubernetes.io/version', 'helm.sh/chart'];
const BOOKKEEPING_ANNOTATIONS = ['helm.sh/resource-policy'];

function normalize(objects: KubeObject[]): Map<string, KubeObject> {
  const out = new Map<string, KubeObject>();
  for (const o of objects) {
    const c = structuredClone(o);
    for (const l of BOOKKEEPING_LABELS) delete c.metadata.labels?.[l];
    for (const a of BOOKKEEPING_ANNOTATIONS) delete c.metadata.annotations?.[a];
    if (c.metadata.labels && Object.keys(c.metadata.labels).length === 0) delete c.metadata.labels;
    if (c.metadata.annotations && Object.keys(c.metadata.annotations).length === 0) delete c.metadata.annotations;
    out.set(`${c.kind} ${c.metadata.namespace ?? ''}/${c.metadata.name}`, c);
  }
  return out;
}

describe('install paths: kustomize and the Helm chart', { timeout: 10 * 60_000 }, () => {
  let helm: string;
  let cp: ControlPlane | undefined;
  let dir: string;
  const launched: Launched[] = [];
  const kubeVersion = pinnedVersions().kubernetes;

  const kustomized = async (overlay: string) => parseYaml(await kustomize(cp!, overlay));
  const helmTemplate = async (...set: string[]) =>
    parseYaml(
      (await exec(helm, ['template', 'persistent-ips', CHART, '--namespace', NAMESPACE, '--kube-version', kubeVersion, ...sets(set)], { maxBuffer: 1 << 24 }))
        .stdout,
    );

  before(
    async () => {
      helm = await helmBinary();
      dir = mkdtempSync(join(tmpdir(), 'persistent-ips-install-'));
      cp = await startControlPlane({ dir: join(dir, 'cp') });
    },
    { timeout: 180_000 },
  );

  after(
    async () => {
      for (const l of launched) await l.stop();
      await cp?.stop();
      if (dir && !process.env['PERSISTENT_IPS_E2E_KEEP']) rmSync(dir, { recursive: true, force: true });
    },
    { timeout: 120_000 },
  );

  // Every value set to something other than its default, in the shapes values.yaml documents: the schema must take
  // them all (a schema too strict for a real setting is as wrong as one that lets a typo through).
  const everyOption = [
    'tls.mode=cert-manager',
    'ipamClaimCrd.install=true',
    'serviceMonitor.enabled=true',
    'serviceMonitor.labels.release=kube-prometheus-stack',
    'prometheusRule.enabled=true',
    'prometheusRule.labels.release=kube-prometheus-stack',
    'grafanaDashboard.enabled=true',
    'grafanaDashboard.labels.team=platform',
    'claimReferencePolicy.enabled=true',
    'defaultNetworkNad=ns/primary',
    'extraArgs={--concurrency=8}',
    'image.tag=v1.2.3',
    'image.pullPolicy=Always',
    'imagePullSecrets[0].name=registry',
    'replicas=3',
    'resources.limits.cpu=1',
    'mallocArenaMax=4',
    'logLevel=debug',
    'leaderElect=false',
    'tolerations[0].key=node-role.kubernetes.io/control-plane',
    'tolerations[0].operator=Exists',
    'tolerations[0].effect=NoSchedule',
    'podAnnotations.team=platform',
    'nodeSelector.pool=infra',
    'priorityClassName=',
  ];

  it('helm lint --strict passes for the default values and with every option set', async () => {
    for (const set of [[], everyOption]) {
      const { stdout } = await exec(helm, ['lint', '--strict', CHART, '--kube-version', kubeVersion, ...sets(set)]);
      assert.match(stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    }
    assert.ok((await helmTemplate(...everyOption)).length > 0);
  });

  it('values.schema.json refuses misspelt and mistyped values, at every level', async () => {
    // Worded as the pinned helm (e2e/controlplane/go.mod) words them; helm 3.18+ validates the same draft-07 schema
    // with another library and other words.
    for (const [set, why] of [
      ['replica=3', '- (root): Additional property replica is not allowed'],
      ['serviceMonitor.enable=true', '- serviceMonitor: Additional property enable is not allowed'],
      ['grafanaDashboard.enabled=yes', '- grafanaDashboard.enabled: Invalid type. Expected: boolean, given: string'],
      ['claimReferencePolicy.allowedServiceAccounts[0].nmae=x', '- claimReferencePolicy.allowedServiceAccounts.0: Additional property nmae is not allowed'],
      ['tolerations[0].efect=NoSchedule', '- tolerations.0: Additional property efect is not allowed'],
      ['replicas=two', '- replicas: Invalid type. Expected: integer, given: string'],
      ['tls.mode=none', '- tls.mode: tls.mode must be one of the following: "self-managed", "cert-manager"'],
      ['logLevel=verbose', '- logLevel: logLevel must be one of the following:'],
      ['resources.limits.memory=lots', '- resources.limits.memory: Does not match pattern'],
      ['defaultNetworkNad=primary', '- defaultNetworkNad: Does not match pattern'],
    ] as const) {
      await assert.rejects(helmTemplate(set), (err: Error) => {
        assert.ok(err.message.includes("values don't meet the specifications of the schema"), `${set}: ${err.message}`);
        assert.ok(err.message.includes(why), `${set}: expected "${why}" in ${err.message}`);
        return true;
      });
    }
    // Without the schema (--skip-schema-validation) the templates still refuse what would break the install: an
    // unknown TLS mode, and names that would end up inside the claim-reference policy's CEL expression.
    const unchecked = (...set: string[]) => exec(helm, ['template', 'x', CHART, '--kube-version', kubeVersion, '--skip-schema-validation', ...sets(set)]);
    await assert.rejects(unchecked('tls.mode=none'), /tls.mode must be self-managed or cert-manager/);
    await assert.rejects(
      unchecked(
        'claimReferencePolicy.enabled=true',
        "claimReferencePolicy.allowedServiceAccounts[0].namespace=a'])||true||(['",
        'claimReferencePolicy.allowedServiceAccounts[0].name=x',
      ),
      /is not a \{namespace, name\} of a ServiceAccount/,
    );
  });

  for (const [overlay, set] of [
    ['default', []],
    ['cert-manager', ['tls.mode=cert-manager']],
    ['with-crds', ['ipamClaimCrd.install=true']],
  ] as const) {
    it(`helm template ${set.join(' ') || '(defaults)'} renders the objects of manifests/${overlay}`, async () => {
      const k = normalize(await kustomized(overlay));
      const h = normalize(await helmTemplate(...set));
      // The chart leaves the namespace to Helm (--create-namespace); everything else must match.
      const ns = [...k.keys()].filter((key) => key.startsWith('Namespace '));
      assert.deepEqual(ns, [`Namespace /${NAMESPACE}`]);
      for (const key of ns) k.delete(key);
      assert.deepEqual([...h.keys()].sort(), [...k.keys()].sort(), 'the same objects');
      for (const [key, obj] of k) assert.deepEqual(h.get(key), obj, `${key} is the same`);
    });
  }

  it('the chart pins the image to v<appVersion> and passes its values as flags', async () => {
    const pkg = (await import(join(REPO_ROOT, 'package.json'), { with: { type: 'json' } })).default as { version: string };
    const dep = (await helmTemplate('defaultNetworkNad=ns/primary', 'replicas=3', 'logLevel=debug', 'extraArgs={--concurrency=8}')).find(
      (o) => o.kind === 'Deployment',
    ) as KubeObject & {
      spec: { replicas: number; template: { spec: { containers: { image: string; args: string[] }[] } } };
    };
    const c = dep.spec.template.spec.containers[0]!;
    assert.equal(c.image, `ghcr.io/persistent-ips/persistent-ips:v${pkg.version}`);
    assert.equal(dep.spec.replicas, 3);
    for (const a of ['--default-network-nad=ns/primary', '--log-level=debug', '--concurrency=8'])
      assert.ok(c.args.includes(a), `args include ${a}: ${c.args.join(' ')}`);
  });

  it('serviceMonitor, prometheusRule and grafanaDashboard each add exactly their object of manifests/prometheus', async () => {
    const without = normalize(await helmTemplate());
    const fromKustomize = normalize(await kustomized('prometheus'));
    const added: string[] = [];
    for (const [value, key] of [
      ['serviceMonitor.enabled=true', `ServiceMonitor ${NAMESPACE}/persistent-ips-controller`],
      ['prometheusRule.enabled=true', `PrometheusRule ${NAMESPACE}/persistent-ips`],
      ['grafanaDashboard.enabled=true', `ConfigMap ${NAMESPACE}/persistent-ips-grafana-dashboard`],
    ] as const) {
      const withIt = normalize(await helmTemplate(value));
      assert.deepEqual(
        [...withIt.keys()].filter((k) => !without.has(k)),
        [key],
        value,
      );
      assert.deepEqual(withIt.get(key), fromKustomize.get(key), `${key} is the same as manifests/prometheus renders it`);
      added.push(key);
    }
    assert.deepEqual(added.sort(), [...fromKustomize.keys()].sort(), 'the chart has every object of manifests/prometheus');
    // The labels a Prometheus' ruleSelector or Grafana's sidecar may need are added, the object's own kept.
    const labelled = await helmTemplate(
      'prometheusRule.enabled=true',
      'prometheusRule.labels.release=kps',
      'grafanaDashboard.enabled=true',
      'grafanaDashboard.labels.team=platform',
    );
    const ruleLabels = labelled.find((o) => o.kind === 'PrometheusRule')?.metadata.labels;
    assert.equal(ruleLabels?.['release'], 'kps');
    assert.equal(ruleLabels?.['app.kubernetes.io/component'], 'metrics');
    const dashboardLabels = labelled.find((o) => o.metadata.name === 'persistent-ips-grafana-dashboard')?.metadata.labels;
    assert.equal(dashboardLabels?.['grafana_dashboard'], '1');
    assert.equal(dashboardLabels?.['team'], 'platform');
  });

  it('claimReferencePolicy.enabled adds exactly the objects of manifests/claim-reference-policy; its ServiceAccounts are values', async () => {
    const withPolicy = normalize(await helmTemplate('claimReferencePolicy.enabled=true'));
    const without = normalize(await helmTemplate());
    const added = [...withPolicy.keys()].filter((k) => !without.has(k)).sort();
    const fromKustomize = normalize(await kustomized('claim-reference-policy'));
    assert.deepEqual(added, [...fromKustomize.keys()].sort());
    for (const key of added) assert.deepEqual(withPolicy.get(key), fromKustomize.get(key), `${key} is the same`);
    // Other virt-controller ServiceAccounts (OpenShift's); the controller's own is always allowed.
    const custom = normalize(
      await helmTemplate(
        'claimReferencePolicy.enabled=true',
        'claimReferencePolicy.allowedServiceAccounts[0].namespace=openshift-cnv',
        'claimReferencePolicy.allowedServiceAccounts[0].name=kubevirt-controller',
      ),
    );
    const policy = custom.get('ValidatingAdmissionPolicy /persistent-ips-claim-references') as KubeObject & {
      spec: { matchConditions: { name: string; expression: string }[] };
    };
    assert.equal(
      policy.spec.matchConditions.find((c) => c.name === 'not-a-trusted-writer')?.expression,
      `!(request.userInfo.username in ['system:serviceaccount:openshift-cnv:kubevirt-controller', 'system:serviceaccount:${NAMESPACE}:persistent-ips-controller'])`,
    );
    // The names end up inside a CEL expression: anything but a ServiceAccount's namespace and name is refused.
    await assert.rejects(
      helmTemplate(
        'claimReferencePolicy.enabled=true',
        "claimReferencePolicy.allowedServiceAccounts[0].namespace=a'])||true||(['",
        'claimReferencePolicy.allowedServiceAccounts[0].name=x',
      ),
      /: Does not match pattern/,
    );
    await assert.rejects(
      exec(helm, ['template', 'x', CHART, '--kube-version', '1.29.0', '--set', 'claimReferencePolicy.enabled=true']),
      /needs Kubernetes 1.30 or newer/,
    );
  });

  const installs: { path: string; args: string[]; rules: unknown }[] = [];

  async function expectWorkingController(path: string, vm: string): Promise<void> {
    assert.ok(cp);
    const spec = await readInstalled(cp);
    const l = await launchBuiltCli(cp, spec, dir, path);
    launched.push(l);
    await waitReady(l);
    const { claim, vmUid } = await expectClaimFor(cp, vm, l);
    const owner = claim.metadata.ownerReferences?.find((r) => r.kind === 'VirtualMachine');
    assert.equal(owner?.uid, vmUid, 'the claim is owned by its VM (by uid)');
    assert.equal(claim.spec.network, 'tenantblue');
    // Self-managed certificate: the controller published its CA in every entry of the installed webhook configuration,
    // the two that keep other pods and Bindings from naming a claim (issue 43) included.
    const config = JSON.parse((await cp.kubectl(['get', 'mutatingwebhookconfiguration', 'persistent-ips-launcher-pods', '-o', 'json'])).stdout) as {
      webhooks: { name: string; clientConfig: { caBundle?: string } }[];
    };
    assert.deepEqual(
      config.webhooks.map((w) => w.name),
      ['launcher-pods-create', 'launcher-pods-hotplug', 'claim-references', 'pod-bindings'].map((w) => `${w}.persistent-ips.kubevirt.io`),
    );
    for (const w of config.webhooks) assert.ok((w.clientConfig.caBundle ?? '').length > 100, `${w.name}: caBundle set by the controller`);
    const rules = JSON.parse((await cp.kubectl(['get', 'clusterrole', 'persistent-ips-controller', '-o', 'jsonpath={.rules}'])).stdout) as unknown;
    installs.push({ path, args: spec.args, rules });
    await l.stop();
    assert.equal(l.proc.exitCode, 0, `the controller stops cleanly on SIGTERM (log: ${l.logFile})`);
  }

  it('kustomize: kubectl apply of manifests/default gives a controller that becomes ready and creates a claim', async () => {
    assert.ok(cp);
    const render = await kustomize(cp, 'default');
    await cp.kubectl(['apply', '--server-side', '-f', '-'], { input: render });
    await expectWorkingController('kustomize', 'vm-kustomize');
    // Make room for the chart: the same names, cluster-scoped ones included. The namespace stays (Helm's to reuse).
    const names = parseYaml(render)
      .filter((o) => o.kind !== 'Namespace')
      .map((o) => `${o.kind.toLowerCase()}/${o.metadata.name}`);
    await cp.kubectl(['-n', NAMESPACE, 'delete', '--wait=true', ...names]);
  });

  it('helm install of the chart gives the same controller: ready, creates a claim, same args and RBAC', async () => {
    assert.ok(cp);
    assert.ok(existsSync(CHART));
    // With the monitoring values on: the Prometheus Operator's kinds come from stand-in CRDs (no operator here).
    const crds = await cp.kubectl(['apply', '--server-side', '-f', join(REPO_ROOT, 'e2e', 'install', 'monitoring-crds.yaml')]);
    assert.equal(crds.code, 0, crds.stderr);
    const established = await cp.kubectl([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/servicemonitors.monitoring.coreos.com',
      'crd/prometheusrules.monitoring.coreos.com',
    ]);
    assert.equal(established.code, 0, established.stderr);
    const monitoring = sets(['serviceMonitor.enabled=true', 'prometheusRule.enabled=true', 'grafanaDashboard.enabled=true']);
    const { stdout } = await exec(helm, ['install', 'persistent-ips', CHART, '--namespace', NAMESPACE, '--kubeconfig', cp.kubeconfigPath, ...monitoring]);
    assert.match(stdout, /STATUS: deployed/);
    // What the cluster holds is what manifests/prometheus holds.
    const get = async (what: string) => {
      const r = await cp!.kubectl(['-n', NAMESPACE, 'get', what, '-o', 'json']);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout) as { spec?: unknown; data?: Record<string, string> };
    };
    const rule = parseYaml(readFileSync(join(REPO_ROOT, 'manifests', 'prometheus', 'prometheus_rule.yaml'), 'utf8'))[0] as KubeObject & { spec: unknown };
    assert.deepEqual((await get('prometheusrule/persistent-ips')).spec, rule.spec);
    assert.equal(
      (await get('configmap/persistent-ips-grafana-dashboard')).data?.['persistent-ips.json'],
      readFileSync(join(REPO_ROOT, 'manifests', 'prometheus', 'grafana-dashboard.json'), 'utf8'),
    );
    await get('servicemonitor/persistent-ips-controller');
    await expectWorkingController('helm', 'vm-helm');
    const [k, h] = installs;
    assert.ok(k && h && k.path === 'kustomize' && h.path === 'helm', 'both installs ran');
    assert.deepEqual(h.args, k.args, 'the same controller flags');
    assert.deepEqual(h.rules, k.rules, 'the same ClusterRole');
    await exec(helm, ['uninstall', 'persistent-ips', '--namespace', NAMESPACE, '--kubeconfig', cp.kubeconfigPath]);
  });
});
