import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { load } from 'js-yaml';
import { defaultBindAddress, parseBindAddress } from './addresses.ts';
import { EXIT } from './exit-codes.ts';
import { parseCommandLine, UsageError } from './parser.ts';
import { defaultNetworkNad } from './run-flags.ts';

const outside: NodeJS.ProcessEnv = {};
const inPod: NodeJS.ProcessEnv = { KUBERNETES_SERVICE_HOST: '10.96.0.1' };

async function usageError(argv: string[]): Promise<UsageError> {
  const printed: string[] = [];
  try {
    const parsed = await parseCommandLine(argv, { env: outside, print: (t) => printed.push(t) });
    assert.fail(`${argv.join(' ')} parsed as ${JSON.stringify(parsed)}`);
  } catch (err) {
    assert.ok(err instanceof UsageError, `${argv.join(' ')}: ${String(err)}`);
    assert.equal(err.exitCode, EXIT.usage);
    assert.doesNotMatch(err.message, /\n/, 'one line');
    assert.equal(printed.length, 0, 'nothing printed while failing');
    return err;
  }
}

describe('command line', () => {
  const runs: { name: string; argv: string; env: NodeJS.ProcessEnv; options: Record<string, unknown> }[] = [
    {
      name: 'defaults, and loopback addresses outside a pod; metrics over HTTPS with authn/authz unless asked otherwise',
      argv: 'run',
      env: outside,
      options: {
        concurrency: 16,
        qps: 200,
        burst: 400,
        leaderElect: false,
        metricsBindAddress: '127.0.0.1:8443',
        metricsSecure: true,
        healthProbeBindAddress: '127.0.0.1:8081',
        webhookBindAddress: '127.0.0.1:9443',
        defaultNetworkNad: { namespace: 'ovn-kubernetes', name: 'default' },
      },
    },
    {
      name: 'in a pod listens on all interfaces by default',
      argv: 'run',
      env: inPod,
      options: { metricsBindAddress: ':8443', healthProbeBindAddress: ':8081', webhookBindAddress: ':9443' },
    },
    {
      name: 'flags as given, repeatable --webhook-cert-host collected',
      argv: 'run --leader-elect --concurrency 8 --webhook-cert-host a.example --webhook-cert-host 127.0.0.1 --no-allocator --feature-gates PersistentIPs=true',
      env: outside,
      options: { leaderElect: true, concurrency: 8, webhookCertHosts: ['a.example', '127.0.0.1'], allocator: false, featureGates: 'PersistentIPs=true' },
    },
    {
      name: 'TLS flags in the Kubernetes spelling, suites comma-separated or repeated',
      argv: 'run --tls-min-version VersionTLS13 --tls-cipher-suites TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384 --tls-cipher-suites TLS_CHACHA20_POLY1305_SHA256',
      env: outside,
      options: { tlsMinVersion: 'VersionTLS13', tlsCipherSuites: ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'] },
    },
    {
      name: '--default-network-nad sets the cluster default network NAD',
      argv: 'run --default-network-nad openshift-ovn-kubernetes/default',
      env: outside,
      options: { defaultNetworkNad: { namespace: 'openshift-ovn-kubernetes', name: 'default' } },
    },
    { name: '--metrics-secure=false asks for plain HTTP', argv: 'run --metrics-secure=false', env: outside, options: { metricsSecure: false } },
  ];
  for (const row of runs) {
    it(`run: ${row.name}`, async () => {
      const parsed = await parseCommandLine(row.argv.split(' '), { env: row.env });
      assert.ok(parsed.command === 'run');
      const picked = Object.fromEntries(Object.keys(row.options).map((key) => [key, parsed.options[key as keyof typeof parsed.options]]));
      assert.deepEqual(picked, row.options);
    });
  }

  it('status: positional VM and short flags', async () => {
    const parsed = await parseCommandLine(['status', 'vm1', '-n', 'ns', '-o', 'json'], { env: outside });
    assert.deepEqual(parsed, { command: 'status', options: { namespace: 'ns', vm: 'vm1', allNamespaces: false, output: 'json' } });
    const networks = await parseCommandLine(['status', '--networks', '-A'], { env: outside });
    assert.deepEqual(networks, { command: 'status', options: { networks: true, allNamespaces: true, output: 'table' } });
  });

  it('--help prints the usage and runs nothing', async () => {
    const printed: string[] = [];
    const parsed = await parseCommandLine(['run', '--help'], { env: outside, print: (t) => printed.push(t) });
    assert.deepEqual(parsed, { command: 'none' });
    assert.match(printed.join('\n'), /--leader-elect/);
  });

  const misuse: [string[], RegExp][] = [
    [['run', '--leader-elec'], /^unknown argument: leader-elec$/],
    [['status', '--bogus'], /^unknown argument: bogus$/],
    [['run', 'extra'], /unknown argument: extra/],
    [['bogus'], /unknown argument: bogus/],
    [[], /name a command/],
    [['run', '--concurrency', '0'], /--concurrency must be a whole number of at least 1 \(got 0\)/],
    [['run', '--concurrency', '1.5'], /--concurrency/],
    [['run', '--concurrency', 'many'], /--concurrency/],
    [['run', '--concurrency', '2', '--concurrency', '3'], /--concurrency given more than once/],
    [['run', '--qps', '0'], /--qps must be a positive number/],
    [['run', '--burst', '0'], /--burst/],
    [['run', '--resync-period', '-1'], /--resync-period/],
    [['run', '--graceful-shutdown-timeout', '-1'], /--graceful-shutdown-timeout/],
    [['run', '--webhook-cert-validity', '0'], /--webhook-cert-validity/],
    [['run', '--metrics-bind-address', 'everywhere'], /--metrics-bind-address: invalid bind address "everywhere"/],
    [['run', '--health-probe-bind-address', '127.0.0.1:99999'], /--health-probe-bind-address/],
    [['run', '--webhook-bind-address', '127.0.0.1:'], /--webhook-bind-address/],
    [['run', '--log-level', 'loud'], /invalid values?:.*log-level/i],
    [['run', '--webhook-cert-provisioning', 'magic'], /webhook-cert-provisioning/],
    [['run', '--feature-gates', 'PersistentIPs=yes'], /invalid --feature-gates entry "PersistentIPs=yes"/],
    [['run', '--kubeconfig'], /kubeconfig/],
    [['run', '--kubeconfig', ''], /--kubeconfig must not be empty/],
    [['status', '-n', 'a', '-A'], /--namespace and --all-namespaces exclude each other/],
    [['status', '-o', 'yaml'], /output/],
    [['run', '--default-network-nad', 'default'], /NAMESPACE\/NAME/],
    [['status', 'vm1', '--networks'], /--networks shows networks, not one VM/],
    [['run', '--metrics-secure=false', '--metrics-cert-dir', '/certs'], /--metrics-cert-dir goes with --metrics-secure/],
    [['run', '--tls-min-version', 'VersionTLS10'], /--tls-min-version: unknown version "VersionTLS10"/],
    [
      ['run', '--tls-cipher-suites', 'TLS_AES_128_GCM_SHA256,TLS_RSA_WITH_3DES_EDE_CBC_SHA'],
      /--tls-cipher-suites: unknown or unsupported cipher suite "TLS_RSA_WITH_3DES_EDE_CBC_SHA"/,
    ],
  ];
  for (const [argv, expected] of misuse) {
    it(`usage error: ${argv.join(' ') || '(nothing)'}`, async () => {
      const err = await usageError(argv);
      assert.match(err.message, expected);
      assert.match(err.usage, /^persistent-ips /, 'the usage of the command comes with it');
    });
  }
});

describe('bind addresses', () => {
  it('parses host:port, :port, [v6]:port and 0', () => {
    assert.deepEqual(parseBindAddress(':8080'), { host: '0.0.0.0', port: 8080 });
    assert.deepEqual(parseBindAddress('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
    assert.deepEqual(parseBindAddress('[::1]:9443'), { host: '::1', port: 9443 });
    assert.equal(parseBindAddress('0'), undefined);
    for (const bad of ['', 'x', ':', 'h:p', ':65536', ':-1']) assert.throws(() => parseBindAddress(bad), /invalid bind address/, bad);
  });

  it('defaults to loopback unless in a pod', () => {
    assert.equal(defaultBindAddress(8080, {}), '127.0.0.1:8080');
    assert.equal(defaultBindAddress(8080, { KUBERNETES_SERVICE_HOST: 'fd00::1' }), ':8080');
  });
});

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
