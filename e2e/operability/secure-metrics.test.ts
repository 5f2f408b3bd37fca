// Secure metrics on a real control plane: the built controller runs with a token of its ServiceAccount and only the
// permissions of manifests/rbac (which include creating TokenReviews and SubjectAccessReviews), with the Deployment's
// metrics settings (HTTPS, the default --metrics-secure). A token the cluster does not know gets 401, a
// ServiceAccount without rights 403, one bound to ClusterRole persistent-ips-metrics-reader the metrics.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { kubeconfigYaml, startControlPlane, type ControlPlane } from '../harness/index.ts';
import { CLI, ControllerProcess, parsePrometheus, REPO_ROOT } from '../local/controller-process.ts';

const NS = 'persistent-ips-system';
const scratch = mkdtempSync(join(tmpdir(), 'pips-secure-metrics-'));

function scrape(port: number, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    // The certificate is self-signed (no --metrics-cert-dir), as Prometheus sees it: verification skipped, the token
    // is what is checked.
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/metrics',
        rejectUnauthorized: false,
        agent: false,
        headers: token ? { authorization: `Bearer ${token}` } : {},
        timeout: 10_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('operability: secure metrics (TokenReview + SubjectAccessReview)', { timeout: 5 * 60_000 }, () => {
  let cp: ControlPlane;
  let controller: ControllerProcess;
  let metricsPort = 0;
  const tokens: Record<string, string> = {};

  // cp.kubectl throws, naming the command and its stderr, when kubectl fails.
  const kubectl = async (args: string[], input?: string): Promise<string> => (await cp.kubectl(args, input === undefined ? {} : { input })).stdout.trim();

  before(
    async () => {
      cp = await startControlPlane({ dir: join(scratch, 'cp') });
      await kubectl(['create', 'namespace', NS]);
      await kubectl(['apply', '-k', join(REPO_ROOT, 'manifests', 'rbac')]);
      await kubectl(['create', 'namespace', 'monitoring']);
      for (const sa of ['prometheus', 'nobody']) await kubectl(['create', 'serviceaccount', sa, '-n', 'monitoring']);
      await kubectl([
        'create',
        'clusterrolebinding',
        'prometheus-persistent-ips-metrics',
        '--clusterrole=persistent-ips-metrics-reader',
        '--serviceaccount=monitoring:prometheus',
      ]);
      tokens.prometheus = await kubectl(['create', 'token', 'prometheus', '-n', 'monitoring']);
      tokens.nobody = await kubectl(['create', 'token', 'nobody', '-n', 'monitoring']);
      const controllerToken = await kubectl(['create', 'token', 'persistent-ips-controller', '-n', NS, '--duration', '1h']);
      const kubeconfig = join(scratch, 'kubeconfig-controller');
      writeFileSync(kubeconfig, kubeconfigYaml(cp.server, cp.caFile, controllerToken), { mode: 0o600 });

      // The Deployment's metrics settings: HTTPS with the default --metrics-secure (not the suites' plain HTTP).
      controller = await ControllerProcess.start({
        name: 'secure-metrics',
        kubeconfig,
        logDir: scratch,
        webhookPort: 0,
        command: (probePort, port) => ({
          args: [
            CLI,
            'run',
            '--kubeconfig',
            kubeconfig,
            '--controller-namespace',
            NS,
            '--feature-gates',
            'PersistentIPs=true',
            '--metrics-bind-address',
            `127.0.0.1:${port}`,
            '--health-probe-bind-address',
            `127.0.0.1:${probePort}`,
            '--webhook-bind-address',
            '0',
          ],
          env: process.env,
        }),
      });
      metricsPort = controller.metricsPort;
    },
    { timeout: 180_000 },
  );

  after(
    async () => {
      await controller?.stop(15_000);
      await cp?.stop();
      rmSync(scratch, { recursive: true, force: true });
    },
    { timeout: 60_000 },
  );

  it('no token: 401', async () => {
    const r = await scrape(metricsPort);
    assert.equal(r.status, 401, r.body);
    assert.doesNotMatch(r.body, /controller_runtime/);
  });

  it('a token the cluster does not accept: 401', async () => {
    const forged = `${tokens.nobody!.slice(0, -8)}AAAAAAAA`;
    assert.equal((await scrape(metricsPort, forged)).status, 401);
  });

  it('a ServiceAccount without the metrics-reader role: 403', async () => {
    const r = await scrape(metricsPort, tokens.nobody);
    assert.equal(r.status, 403, r.body);
    assert.match(r.body, /system:serviceaccount:monitoring:nobody/);
    assert.doesNotMatch(r.body, /controller_runtime/);
  });

  it('a ServiceAccount bound to persistent-ips-metrics-reader: the metrics', async () => {
    const r = await scrape(metricsPort, tokens.prometheus);
    assert.equal(r.status, 200, r.body);
    const samples = parsePrometheus(r.body);
    assert.ok(
      samples.some((s) => s.name === 'persistent_ips_feature_gate_enabled' && s.labels.name === 'PersistentIPs' && s.value === 1),
      'the gate gauge, on',
    );
    assert.ok(samples.some((s) => s.name === 'process_resident_memory_bytes'));
    // The reviews went through the controller's own client, with the manifests' RBAC: visible in its API counters.
    const reviews = samples.filter(
      (s) => s.name === 'persistent_ips_api_requests_total' && ['tokenreviews', 'subjectaccessreviews'].includes(s.labels.resource ?? ''),
    );
    assert.deepEqual(
      reviews.filter((s) => s.labels.code !== '201').map((s) => s.labels),
      [],
      'no review refused',
    );
    assert.deepEqual([...new Set(reviews.map((s) => s.labels.resource))].sort(), ['subjectaccessreviews', 'tokenreviews']);
  });

  it('the feature gate is in the start-up log at info, and in the metrics', async () => {
    const line = controller.logs.find((l) => l.msg === 'feature gate PersistentIPs is on (set by --feature-gates)');
    assert.ok(line, controller.tail(20));
    assert.equal(line.level, 'info');
  });

  it('plain HTTP is not served', async () => {
    await assert.rejects(fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) }));
  });
});
