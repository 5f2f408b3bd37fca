import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { load } from 'js-yaml';
import { parseCommandLine } from './parser.ts';
import { parseRunFast } from './run-flags.ts';

const outside: NodeJS.ProcessEnv = {};
const inPod: NodeJS.ProcessEnv = { KUBERNETES_SERVICE_HOST: '10.96.0.1' };
const quiet = { print: () => {} };

/** What yargs makes of a command line: the run options, or undefined for anything else (help, an error). */
async function viaYargs(argv: string[], env: NodeJS.ProcessEnv): Promise<unknown> {
  try {
    const parsed = await parseCommandLine(argv, { env, ...quiet });
    return parsed.command === 'run' ? parsed.options : undefined;
  } catch {
    return undefined;
  }
}

function deploymentArgs(): string[] {
  const doc = load(readFileSync(new URL('../../manifests/controller/deployment.yaml', import.meta.url), 'utf8')) as {
    spec: { template: { spec: { containers: { name: string; args?: string[] }[] } } };
  };
  return doc.spec.template.spec.containers.find((c) => c.name === 'controller')?.args ?? [];
}

describe('run flags without yargs', () => {
  it("the shipped Deployment's command line is parsed without yargs, to what yargs makes of it", async () => {
    const args = deploymentArgs();
    assert.equal(args[0], 'run');
    const fast = parseRunFast(args, inPod);
    assert.ok(fast, `not taken by the fast path: ${args.join(' ')}`);
    assert.deepEqual(fast, await viaYargs(args, inPod));
  });

  const same: string[][] = [
    ['run'],
    ['run', '--leader-elect', '--concurrency', '8', '--webhook-cert-host', 'a.example', '--webhook-cert-host', '127.0.0.1', '--no-allocator', '--feature-gates', 'PersistentIPs=true'],
    ['run', '--tls-min-version=VersionTLS13', '--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384', '--tls-cipher-suites', 'TLS_CHACHA20_POLY1305_SHA256'],
    ['run', '--metrics-secure=false', '--qps=50.5', '--burst=100', '--namespace', 'ns', '--leader-elect=true', '--log-level=debug'],
    ['run', '--webhook-cert-provisioning', 'external', '--webhook-cert-dir=/certs', '--webhook-cert-validity=3600', '--default-network-nad=a/b'],
  ];
  for (const argv of same) {
    it(`same answer as yargs: ${argv.join(' ')}`, async () => {
      const fast = parseRunFast(argv, outside);
      assert.ok(fast, 'taken by the fast path');
      assert.deepEqual(fast, await viaYargs(argv, outside));
    });
  }

  const leftToYargs: string[][] = [
    ['status'],
    ['run', '--help'],
    ['run', '--version'],
    ['run', 'extra'],
    ['run', '--leader-elec'],
    ['run', '--concurrency', '0'],
    ['run', '--concurrency', '2', '--concurrency', '3'],
    ['run', '--concurrency=1e3'],
    ['run', '--leader-elect', 'false'],
    ['run', '--metrics-secure=no'],
    ['run', '--webhook-cert-host', 'a', 'b'],
    ['run', '--kubeconfig'],
    ['run', '--kubeconfig='],
    ['run', '--log-level=loud'],
    ['run', '--no-namespace'],
    ['run', '--'],
    ['run', '-n', 'x'],
  ];
  for (const argv of leftToYargs) {
    it(`left to yargs: ${argv.join(' ')}`, () => {
      assert.equal(parseRunFast(argv, outside), undefined);
    });
  }

  it('whatever it takes, yargs parses the same way (random command lines)', async () => {
    const strings = ['ns', 'a.example', '', '-x', '127.0.0.1', 'x=y'];
    const numbers = ['0', '1', '8', '16', '1.5', '2.50', '-1', '1e3', '0x10', '08', 'many', ''];
    const values: Record<string, string[]> = {
      kubeconfig: strings, context: strings, namespace: strings, 'controller-namespace': strings, 'metrics-cert-dir': strings,
      'webhook-cert-dir': strings, 'webhook-service-name': strings, 'webhook-configuration-name': strings, 'webhook-cert-host': strings,
      concurrency: numbers, qps: numbers, burst: numbers, 'resync-period': numbers, 'graceful-shutdown-timeout': numbers,
      'webhook-cert-validity': numbers, 'webhook-ca-validity': numbers,
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
    const booleans = ['leader-elect', 'metrics-secure', 'allocator'];
    const valued = fc.tuple(fc.constantFrom(...Object.keys(values)), fc.boolean(), fc.nat()).map(([name, joined, i]) => {
      const pool = values[name]!;
      const value = pool[i % pool.length]!;
      return joined ? [`--${name}=${value}`] : [`--${name}`, value];
    });
    const flag = fc.tuple(fc.constantFrom(...booleans), fc.constantFrom('', '=true', '=false', '=yes', ' false', 'no')).map(([name, form]) =>
      form === 'no' ? [`--no-${name}`] : form === ' false' ? [`--${name}`, 'false'] : [`--${name}${form}`],
    );
    const stray = fc.constantFrom(['extra'], ['--bogus'], ['--help'], ['--'], ['-n', 'x']);
    const token = fc.oneof({ arbitrary: valued, weight: 6 }, { arbitrary: flag, weight: 3 }, { arbitrary: stray, weight: 1 });
    let taken = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(token, { maxLength: 6 }), fc.boolean(), async (tokens, pod) => {
        const argv = ['run', ...tokens.flat()];
        const env = pod ? inPod : outside;
        runs++;
        const fast = parseRunFast(argv, env);
        if (fast === undefined) return;
        taken++;
        assert.deepEqual(fast, await viaYargs(argv, env), argv.join(' '));
      }),
      { numRuns: 400 },
    );
    assert.ok(taken > runs / 10, `the fast path took ${taken} of ${runs} command lines: the property says little`);
  });
});
