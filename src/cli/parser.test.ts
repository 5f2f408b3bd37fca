import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultBindAddress, parseBindAddress } from './addresses.ts';
import { EXIT } from './exit-codes.ts';
import { parseCommandLine, UsageError } from './parser.ts';

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
