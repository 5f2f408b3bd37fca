// manifests/prometheus checked with Prometheus' own tool (promtool, built from its Go module by e2e/promtool/build.sh
// in the prepare phase of `npm test`):
// the PrometheusRule's groups pass `promtool check rules`, each alert fires on its situation and stays quiet on a
// healthy controller (`promtool test rules` with alerts_test.yaml), and every metric the rules and the Grafana
// dashboard query is one the controller exports (or one from Prometheus / kube-state-metrics).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { loadYaml } from '@kubernetes/client-node';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { createWebhookMetrics } from '../../src/webhook/metrics.ts';
import { registerNetworkMetrics } from '../../src/allocator/network-metrics.ts';
import { preparedTool } from '../harness/prepare.ts';
import { REPO_ROOT } from '../local/controller-process.ts';

const run = promisify(execFile);
const DIR = join(REPO_ROOT, 'manifests', 'prometheus');
const scratch = mkdtempSync(join(tmpdir(), 'pips-promtool-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  annotations?: Record<string, string>;
}
const ruleSpec = loadYaml<{ kind: string; spec: { groups: { name: string; rules: Rule[] }[] } }>(readFileSync(join(DIR, 'prometheus_rule.yaml'), 'utf8')).spec;

// Looked up on first use: without promtool, only the tests that run it fail (with the one line naming its step).
let promtoolBin: Promise<string> | undefined;

async function promtool(args: string[]): Promise<string> {
  promtoolBin ??= preparedTool('promtool');
  const bin = await promtoolBin;
  try {
    const { stdout, stderr } = await run(bin, args, { timeout: 60_000 });
    return stdout + stderr;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/** Metric names in PromQL selectors (`name{...}`). */
const selectors = (expr: string): string[] => [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)].map((m) => m[1]!);

describe('manifests/prometheus', () => {
  it('the PrometheusRule passes promtool check rules', async () => {
    const file = join(scratch, 'rules.yaml');
    writeFileSync(file, JSON.stringify(ruleSpec));
    const out = await promtool(['check', 'rules', file]);
    assert.match(out, /SUCCESS: 9 rules found/);
    const alerts = ruleSpec.groups.flatMap((g) => g.rules.map((r) => r.alert));
    for (const wanted of [
      'PersistentIPsClaimsBlocked',
      'PersistentIPsReconcileErrors',
      'PersistentIPsWebhookDenials',
      'PersistentIPsWebhookErrors',
      'PersistentIPsNoLeader',
      'PersistentIPsMemoryNearLimit',
    ]) {
      assert.ok(alerts.includes(wanted), `alert ${wanted}`);
    }
  });

  it('each alert fires on its situation and not on a healthy controller (promtool test rules)', async () => {
    // Annotations are templates checked above; the unit tests compare labels only, so that a reworded description
    // does not need the test rewritten.
    const dir = mkdtempSync(join(scratch, 'test-'));
    const bare = { groups: ruleSpec.groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _a, ...rule }) => rule) })) };
    writeFileSync(join(dir, 'rules.yaml'), JSON.stringify(bare));
    copyFileSync(join(DIR, 'alerts_test.yaml'), join(dir, 'alerts_test.yaml'));
    const out = await promtool(['test', 'rules', join(dir, 'alerts_test.yaml')]);
    assert.match(out, /SUCCESS/);
  });

  it('the rules and the dashboard query only metrics that exist', () => {
    const metrics = createMetrics();
    createWebhookMetrics(metrics.registry);
    registerNetworkMetrics(metrics.registry, { nads: () => [], claims: () => [] }, { warn: () => undefined });
    const exported = new Set<string>();
    for (const m of metrics.registry.getMetricsAsArray()) {
      exported.add(m.name);
      if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${m.name}${suffix}`);
    }
    const external = new Set(['up', 'kube_pod_container_resource_limits']);
    const dashboard = JSON.parse(readFileSync(join(DIR, 'grafana-dashboard.json'), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const queries = [
      ...ruleSpec.groups.flatMap((g) => g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }))),
      ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
    ];
    assert.ok(queries.length > 20);
    const unknown = queries.flatMap(({ where, expr }) =>
      selectors(expr)
        .filter((n) => !exported.has(n) && !external.has(n))
        .map((n) => `${where}: ${n}`),
    );
    assert.deepEqual(unknown, []);
  });
});
