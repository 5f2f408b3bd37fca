import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connectionFor, mergeKubeConfigs, needsClientNode, parseKubeConfig } from './kubeconfig.ts';

const doc = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://c:6443
    certificate-authority: ca.crt
    tls-server-name: api.internal
- name: d
  cluster: {server: "https://d:6443", certificate-authority-data: Q0E=, insecure-skip-tls-verify: true}
users:
- name: cert
  user: {client-certificate: certs/u.crt, client-key: /abs/u.key}
- name: tok
  user: {token: abc, as: someone}
- name: tf
  user: {tokenFile: tok}
- name: oidc
  user:
    auth-provider: {name: oidc, config: {idp-issuer-url: "https://issuer"}}
- name: ex
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: get-token}
contexts:
- name: a
  context: {cluster: c, user: cert, namespace: ns1}
- name: b
  context: {cluster: d, user: tok}
- name: e
  context: {cluster: d, user: ex}
- name: o
  context: {cluster: c, user: oidc}
- name: anon
  context: {cluster: c}
current-context: a
`;

describe('parseKubeConfig', () => {
  const kc = parseKubeConfig(doc, 'test', '/home/me/.kube');

  it('resolves relative file references against the file directory, as kubectl does', () => {
    const conn = connectionFor(kc);
    assert.ok(!('error' in conn));
    assert.equal(conn.cluster.caFile, '/home/me/.kube/ca.crt');
    assert.equal(conn.cluster.tlsServerName, 'api.internal');
    assert.equal(conn.user.certFile, '/home/me/.kube/certs/u.crt');
    assert.equal(conn.user.keyFile, '/abs/u.key');
    assert.equal(conn.context.namespace, 'ns1');
    assert.equal(kc.users.find((u) => u.name === 'tf')?.tokenFile, '/home/me/.kube/tok');
  });

  it('keeps inline data, skip-verify, tokens and impersonation', () => {
    const conn = connectionFor(kc, 'b');
    assert.ok(!('error' in conn));
    assert.deepEqual(conn.cluster, { name: 'd', server: 'https://d:6443', caData: 'Q0E=', skipTLSVerify: true });
    assert.deepEqual(conn.user, { name: 'tok', token: 'abc', impersonateUser: 'someone' });
    assert.equal(needsClientNode(conn), false);
  });

  it('hands exec and auth-provider users to @kubernetes/client-node, and only those', () => {
    const verdicts = ['a', 'b', 'e', 'o', 'anon'].map((name) => {
      const conn = connectionFor(kc, name);
      assert.ok(!('error' in conn), name);
      return needsClientNode(conn);
    });
    assert.deepEqual(verdicts, [false, false, true, true, false]);
  });

  it('connects a context without a user anonymously and reports an unknown context', () => {
    const anon = connectionFor(kc, 'anon');
    assert.ok(!('error' in anon));
    assert.deepEqual(anon.user, { name: '' });
    assert.deepEqual(connectionFor(kc, 'nope'), { error: 'context nope not found' });
  });

  it('rejects entries without the fields a connection needs', () => {
    assert.throws(() => parseKubeConfig('clusters: [{name: x, cluster: {}}]', 'f', '/'), /clusters\[0\]\.cluster\.server is missing/);
    assert.throws(() => parseKubeConfig('contexts: [{context: {cluster: x}}]', 'f', '/'), /contexts\[0\]\.name is missing/);
    assert.throws(() => parseKubeConfig('- a list', 'f', '/'), /not a kubeconfig/);
    assert.deepEqual(parseKubeConfig('', 'f', '/'), { clusters: [], users: [], contexts: [], currentContext: '' });
  });
});

describe('mergeKubeConfigs', () => {
  it('lets the first file that names an entry, and the first current-context, win', () => {
    const one = parseKubeConfig('clusters: [{name: c, cluster: {server: "https://one"}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]', 'one', '/');
    const two = parseKubeConfig(
      'clusters: [{name: c, cluster: {server: "https://two"}}, {name: d, cluster: {server: "https://d"}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: x',
      'two',
      '/',
    );
    const merged = mergeKubeConfigs([one, two]);
    assert.deepEqual(
      merged.clusters.map((c) => c.server),
      ['https://one', 'https://d'],
    );
    assert.equal(merged.currentContext, 'x');
    const conn = connectionFor(merged);
    assert.ok(!('error' in conn));
    assert.equal(conn.cluster.server, 'https://one');
    assert.equal(conn.user.token, 't');
  });
});
