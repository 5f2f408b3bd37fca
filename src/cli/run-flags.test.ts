import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { load } from 'js-yaml';
import { parseCommandLine } from './parser.ts';
import { defaultNetworkNad } from './run-flags.ts';

const outside: NodeJS.ProcessEnv = {};
const inPod: NodeJS.ProcessEnv = { KUBERNETES_SERVICE_HOST: '10.96.0.1' };
const quiet = { print: () => {} };

/** The run options of a command line, or the usage error's message. */
async function outcome(argv: string[], env: NodeJS.ProcessEnv): Promise<unknown> {
  try {
    const parsed = await parseCommandLine(argv, { env, ...quiet });
    return parsed.command === 'run' ? parsed.options : parsed;
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function deploymentArgs(): string[] {
  const doc = load(readFileSync(new URL('../../manifests/controller/deployment.yaml', import.meta.url), 'utf8')) as {
    spec: { template: { spec: { containers: { name: string; args?: string[] }[] } } };
  };
  return doc.spec.template.spec.containers.find((c) => c.name === 'controller')?.args ?? [];
}

describe('run flags', () => {
  it("the shipped Deployment's command line: its flags over the defaults, in a pod", async () => {
    const args = deploymentArgs();
    assert.equal(args[0], 'run');
    const parsed = await parseCommandLine(args, { env: inPod, ...quiet });
    assert.ok(parsed.command === 'run', `${args.join(' ')} parsed as ${JSON.stringify(parsed)}`);
    assert.deepEqual(parsed.options, {
      concurrency: 16,
      logLevel: 'info',
      leaderElect: true,
      metricsBindAddress: ':8443',
      healthProbeBindAddress: ':8081',
      qps: 200,
      burst: 400,
      resyncPeriod: 600,
      gracefulShutdownTimeout: 30,
      webhookBindAddress: ':9443',
      webhookCertProvisioning: 'self',
      webhookCertDir: '/tmp/k8s-webhook-server/serving-certs',
      webhookServiceName: 'persistent-ips-webhook',
      webhookConfigurationName: 'persistent-ips-launcher-pods',
      webhookCertHosts: [],
      allocator: true,
      defaultNetworkNad: { namespace: 'ovn-kubernetes', name: 'default' },
      metricsSecure: true,
      tlsMinVersion: 'VersionTLS12',
      tlsCipherSuites: [],
    });
  });

  it('--no-FLAG, --FLAG=false and --FLAG=true, --FLAG are the same', async () => {
    for (const name of ['leader-elect', 'metrics-secure', 'allocator']) {
      assert.deepEqual(await outcome(['run', `--no-${name}`], outside), await outcome(['run', `--${name}=false`], outside), name);
      assert.deepEqual(await outcome(['run', `--${name}`], outside), await outcome(['run', `--${name}=true`], outside), name);
    }
    const off = await outcome(['run', '--no-allocator', '--no-leader-elect', '--no-metrics-secure'], outside);
    assert.deepEqual(
      [(off as { allocator: boolean }).allocator, (off as { leaderElect: boolean }).leaderElect, (off as { metricsSecure: boolean }).metricsSecure],
      [false, false, false],
    );
  });

  it('a value written --FLAG=VALUE or --FLAG VALUE gives the same answer (or both are refused), whatever the flags (random command lines)', async () => {
    const strings = ['ns', 'a.example', '', '127.0.0.1', 'x=y'];
    const numbers = ['0', '1', '8', '16', '1.5', '2.50', '1e3', '0x10', '08', 'many', ''];
    const each = (names: string[], list: string[]) => Object.fromEntries(names.map((name) => [name, list]));
    const values: Record<string, string[]> = {
      ...each(['kubeconfig', 'context', 'namespace', 'controller-namespace', 'metrics-cert-dir', 'webhook-cert-dir'], strings),
      ...each(['webhook-service-name', 'webhook-configuration-name', 'webhook-cert-host'], strings),
      ...each(['concurrency', 'qps', 'burst', 'resync-period', 'graceful-shutdown-timeout', 'webhook-cert-validity', 'webhook-ca-validity'], numbers),
      'feature-gates': ['PersistentIPs=true', 'PersistentIPs=false', 'PersistentIPs=yes', ''],
      'log-level': ['info', 'debug', 'silent', 'loud'],
      'metrics-bind-address': ['127.0.0.1:0', ':8443', '0', 'everywhere', '[::1]:9443'],
      'health-probe-bind-address': [':8081', '0', '127.0.0.1:99999'],
      'webhook-bind-address': [':9443', '0', '127.0.0.1:'],
      'webhook-cert-provisioning': ['self', 'external', 'magic'],
      'tls-min-version': ['VersionTLS12', 'VersionTLS13', 'VersionTLS10'],
      'tls-cipher-suites': ['TLS_AES_128_GCM_SHA256', 'TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384', 'TLS_RSA_WITH_3DES_EDE_CBC_SHA'],
      'default-network-nad': ['ovn-kubernetes/default', 'a/b', 'default'],
    };
    const flag = fc.tuple(fc.constantFrom(...Object.keys(values)), fc.nat()).map(([name, i]) => [name, values[name]![i % values[name]!.length]!] as const);
    let accepted = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(flag, { maxLength: 5 }), fc.boolean(), async (flags, pod) => {
        const env = pod ? inPod : outside;
        const joined = await outcome(['run', ...flags.map(([name, value]) => `--${name}=${value}`)], env);
        const separate = await outcome(['run', ...flags.flatMap(([name, value]) => [`--${name}`, value])], env);
        runs++;
        const shown = flags.map(([n, v]) => `--${n} ${v}`).join(' ');
        // Both refused, not necessarily in the same words: "--x ''" is a missing value, "--x=" an empty one.
        if ('error' in (joined as object)) return void assert.ok('error' in (separate as object), `${shown}: ${JSON.stringify(separate)}`);
        accepted++;
        assert.deepEqual(separate, joined, shown);
      }),
      { numRuns: 300 },
    );
    assert.ok(accepted > runs / 10, `${accepted} of ${runs} command lines were accepted: the property says little`);
  });
});

describe('--default-network-nad', () => {
  it('NAMESPACE/NAME', () => {
    assert.deepEqual(defaultNetworkNad('ovn-kubernetes/default'), { namespace: 'ovn-kubernetes', name: 'default' });
    assert.deepEqual(defaultNetworkNad('openshift-ovn-kubernetes/default'), { namespace: 'openshift-ovn-kubernetes', name: 'default' });
  });
  it('anything else is refused', () => {
    for (const bad of ['default', 'a/b/c', '/default', 'ns/', 'NS/default', 'ns/Default', '']) assert.equal(defaultNetworkNad(bad), undefined, bad);
  });
});
