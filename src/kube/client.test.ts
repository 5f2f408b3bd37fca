import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock, flushPromises } from '../../test/fake-clock.ts';
import { FAILED_TEST_OP_STATUS } from '../../test/json-patch.ts';
import { KubeClient } from './client.ts';
import { ClusterUnreachableError, KubeConfigError, loadKubeConfig } from './load-kubeconfig.ts';
import { KubeApiError, isConflict, isGone } from './errors.ts';
import { removeFinalizerPatch } from './patch.ts';
import { resources } from './resources.ts';
import type { HttpRequest, HttpResponse, Transport } from './transport.ts';
import type { WatchEvent } from './watch-stream.ts';

type Handler = (req: HttpRequest) => HttpResponse | Promise<HttpResponse>;

/** An answer whose body is `body`, streamed in `chunks` (default: all at once). */
function respond(status: number, body: unknown, headers: Record<string, string> = {}, chunks?: string[]): HttpResponse {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return { status, headers, text: async () => text, stream: () => streamOf(chunks ?? [text]) };
}

async function* streamOf(chunks: string[]): AsyncGenerator<Uint8Array> {
  for (const c of chunks) yield new TextEncoder().encode(c);
}

function scripted(...handlers: Handler[]): Transport & { requests: HttpRequest[] } {
  const requests: HttpRequest[] = [];
  return {
    server: 'https://127.0.0.1:6443',
    requests,
    async request(req) {
      requests.push(req);
      const h = handlers.shift();
      if (!h) throw new Error(`unexpected request ${req.method} ${req.path}`);
      return h(req);
    },
  };
}

const statusBody = (code: number, reason: string, message = reason): object => ({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message });

describe('KubeClient', () => {
  it('lists one page with selectors, limit and resourceVersion', async () => {
    const t = scripted(() =>
      respond(200, { items: [{ metadata: { name: 'a' } }], metadata: { resourceVersion: '42', continue: 'tok', remainingItemCount: 3 } }),
    );
    const page = await new KubeClient(t).list(resources.ipamClaims, { namespace: 'ns1', labelSelector: 'kubevirt.io/vm=vm1', limit: 1, resourceVersion: '0' });
    assert.deepEqual(page, { items: [{ metadata: { name: 'a' } }], resourceVersion: '42', continue: 'tok', remainingItemCount: 3 });
    const req = t.requests[0] as HttpRequest;
    assert.equal(req.method, 'GET');
    assert.equal(req.path, '/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims');
    assert.equal(req.query?.labelSelector, 'kubevirt.io/vm=vm1');
    assert.equal(req.query?.limit, 1);
    assert.equal(req.query?.resourceVersion, '0');
  });

  it('paginates listAll with continue tokens from one snapshot, without resourceVersion on later pages', async () => {
    const t = scripted(
      () => respond(200, { items: [{ n: 1 }, { n: 2 }], metadata: { resourceVersion: '10', continue: 'c1' } }),
      () => respond(200, { items: [{ n: 3 }], metadata: { resourceVersion: '10' } }),
    );
    const all = await new KubeClient(t).listAll(resources.virtualMachines, { pageSize: 2, resourceVersion: '5' });
    assert.deepEqual(all, { items: [{ n: 1 }, { n: 2 }, { n: 3 }], resourceVersion: '10' });
    assert.equal(t.requests[1]?.query?.continue, 'c1');
    assert.equal(t.requests[1]?.query?.resourceVersion, undefined);
    assert.equal(t.requests[0]?.path, '/apis/kubevirt.io/v1/virtualmachines', 'no namespace: all namespaces');
  });

  it('falls back to one unpaginated list when a continue token has expired', async () => {
    const t = scripted(
      () => respond(200, { items: [{ n: 1 }], metadata: { resourceVersion: '10', continue: 'c1' } }),
      () => respond(410, statusBody(410, 'Expired', 'continue token expired')),
      () => respond(200, { items: [{ n: 1 }, { n: 2 }], metadata: { resourceVersion: '20' } }),
    );
    const all = await new KubeClient(t).listAll(resources.virtualMachines, { pageSize: 1 });
    assert.deepEqual(all, { items: [{ n: 1 }, { n: 2 }], resourceVersion: '20' });
    assert.equal(t.requests[2]?.query?.limit, undefined);
    assert.equal(t.requests[2]?.query?.continue, undefined);
  });

  it('streams watch events split across chunks, asking for bookmarks', async () => {
    const lines = [
      JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '11' } } }),
      JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '12' } } }),
      JSON.stringify({ type: 'ERROR', object: statusBody(410, 'Expired') }),
    ];
    const text = lines.join('\n') + '\n';
    const t = scripted(() => respond(200, '', {}, [text.slice(0, 17), text.slice(17, 90), text.slice(90)]));
    const got: WatchEvent[] = [];
    for await (const ev of new KubeClient(t).watch(resources.virtualMachineInstances, { namespace: 'ns1', resourceVersion: '10', timeoutSeconds: 300 }))
      got.push(ev);
    assert.deepEqual(
      got.map((e) => e.type),
      ['ADDED', 'BOOKMARK', 'ERROR'],
    );
    const q = t.requests[0]?.query ?? {};
    assert.equal(q.watch, true);
    assert.equal(q.allowWatchBookmarks, true);
    assert.equal(q.resourceVersion, '10');
    assert.equal(q.timeoutSeconds, 300);
    assert.equal(t.requests[0]?.streaming, true);
  });

  it('reports a watch refused with 410 as gone', async () => {
    const t = scripted(() => respond(410, statusBody(410, 'Expired', 'too old resource version')));
    const it = new KubeClient(t).watch(resources.ipamClaims, { resourceVersion: '1' });
    await assert.rejects(it.next(), (e: unknown) => isGone(e) && (e as KubeApiError).object.kind === 'IPAMClaim');
  });

  it('reports a corrupt watch stream as a transient error', async () => {
    const t = scripted(() => respond(200, '', {}, ['{"type":"ADDED","object":{}}\nnot json\n']));
    const it = new KubeClient(t).watch(resources.ipamClaims, {});
    await it.next();
    await assert.rejects(it.next(), (e: unknown) => e instanceof KubeApiError && e.reason === 'transient');
  });

  it('deletes with preconditions and a propagation policy in the body', async () => {
    const t = scripted(() => respond(200, statusBody(200, '')));
    await new KubeClient(t).delete(resources.ipamClaims, 'ns1', 'vm1.net1', {
      preconditions: { uid: 'u1', resourceVersion: '7' },
      propagationPolicy: 'Foreground',
    });
    const req = t.requests[0] as HttpRequest;
    assert.equal(req.method, 'DELETE');
    assert.equal(req.path, '/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims/vm1.net1');
    assert.deepEqual(JSON.parse(req.body as string), {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      preconditions: { uid: 'u1', resourceVersion: '7' },
      propagationPolicy: 'Foreground',
    });
  });

  it('reports a failed delete precondition as a conflict naming the object', async () => {
    const t = scripted(() => respond(409, statusBody(409, 'Conflict', 'Precondition failed: UID in precondition: u1, UID in object meta: u2')));
    await assert.rejects(new KubeClient(t).delete(resources.ipamClaims, 'ns1', 'vm1.net1', { preconditions: { uid: 'u1' } }), (e: unknown) => {
      assert.ok(isConflict(e));
      assert.deepEqual((e as KubeApiError).object, { kind: 'IPAMClaim', namespace: 'ns1', name: 'vm1.net1' });
      return true;
    });
  });

  it('sends JSON patches with their content type; a failed test is a conflict', async () => {
    const t = scripted(() => respond(422, FAILED_TEST_OP_STATUS));
    const ops = removeFinalizerPatch(['a', 'kubevirt.io/persistent-ipam'], 'kubevirt.io/persistent-ipam') ?? [];
    await assert.rejects(new KubeClient(t).jsonPatch(resources.ipamClaims, 'ns1', 'c', ops), (e: unknown) => isConflict(e));
    const req = t.requests[0] as HttpRequest;
    assert.equal(req.method, 'PATCH');
    assert.equal(req.headers?.['Content-Type'], 'application/json-patch+json');
    assert.deepEqual(JSON.parse(req.body as string), ops);
    assert.equal(req.query?.fieldManager, 'persistent-ips');
  });

  it('sends merge patches, to a subresource when asked', async () => {
    const t = scripted(() => respond(200, { metadata: { name: 'c' }, status: { ips: ['10.0.0.5/24'] } }));
    const out = await new KubeClient(t, { fieldManager: 'allocator' }).mergePatch<{ status: { ips: string[] } }>(
      resources.ipamClaims,
      'ns1',
      'c',
      { status: { ips: ['10.0.0.5/24'] } },
      { subresource: 'status' },
    );
    assert.deepEqual(out.status.ips, ['10.0.0.5/24']);
    const req = t.requests[0] as HttpRequest;
    assert.equal(req.path, '/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims/c/status');
    assert.equal(req.headers?.['Content-Type'], 'application/merge-patch+json');
    assert.equal(req.query?.fieldManager, 'allocator');
  });

  it('creates objects in their namespace; 409 on create is alreadyExists', async () => {
    const t = scripted(() => respond(409, statusBody(409, 'AlreadyExists')));
    const obj = {
      apiVersion: 'k8s.cni.cncf.io/v1alpha1',
      kind: 'IPAMClaim',
      metadata: { name: 'vm1.net1', namespace: 'ns1' },
      spec: { network: 'n', interface: '' },
    };
    await assert.rejects(
      new KubeClient(t).create(resources.ipamClaims, obj),
      (e: unknown) => e instanceof KubeApiError && e.reason === 'alreadyExists' && e.object.name === 'vm1.net1',
    );
    assert.equal(t.requests[0]?.path, '/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims');
    assert.equal(t.requests[0]?.method, 'POST');
  });

  it('creates Events, generating a name from the involved object when none is given', async () => {
    const t = scripted((req) => respond(201, JSON.parse(req.body as string)));
    await new KubeClient(t).createEvent({
      metadata: { namespace: 'ns1' },
      involvedObject: { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine', namespace: 'ns1', name: 'vm1', uid: 'u1' },
      reason: 'ClaimOwnedByOther',
      message: 'IPAMClaim vm1.net1 belongs to another VM',
      type: 'Warning',
    });
    const req = t.requests[0] as HttpRequest;
    assert.equal(req.path, '/api/v1/namespaces/ns1/events');
    const body = JSON.parse(req.body as string);
    assert.equal(body.apiVersion, 'v1');
    assert.equal(body.kind, 'Event');
    assert.equal(body.metadata.generateName, 'vm1.');
  });

  it('turns network failures into transient errors naming the object, and reports metrics', async () => {
    const codes: string[] = [];
    const t = scripted(() => {
      throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
    });
    const client = new KubeClient(t, { onRequest: (verb, resource, code) => codes.push(`${verb} ${resource} ${code}`) });
    await assert.rejects(client.get(resources.virtualMachines, 'ns1', 'vm1'), (e: unknown) => {
      assert.ok(e instanceof KubeApiError);
      assert.equal(e.reason, 'transient');
      assert.deepEqual(e.object, { kind: 'VirtualMachine', namespace: 'ns1', name: 'vm1' });
      return true;
    });
    assert.deepEqual(codes, ['get virtualmachines error']);
  });

  it('hands back the caller’s abort reason untouched', async () => {
    const ac = new AbortController();
    const t = scripted(() => {
      ac.abort(new Error('stopping'));
      throw new DOMException('aborted', 'AbortError');
    });
    await assert.rejects(new KubeClient(t).get(resources.virtualMachines, 'ns1', 'vm1', { signal: ac.signal }), /stopping/);
  });

  it('version() distinguishes an unreachable server from an error answer', async () => {
    const down = scripted(() => {
      throw new TypeError('fetch failed', { cause: Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }) });
    });
    await assert.rejects(new KubeClient(down).version(), (e: unknown) => e instanceof ClusterUnreachableError && e.server === 'https://127.0.0.1:6443');
    const denied = scripted(() => respond(401, statusBody(401, 'Unauthorized')));
    await assert.rejects(new KubeClient(denied).version(), (e: unknown) => e instanceof KubeApiError && e.reason === 'unauthorized');
    const up = scripted(() => respond(200, { major: '1', minor: '34', gitVersion: 'v1.34.1' }));
    assert.equal((await new KubeClient(up).version()).gitVersion, 'v1.34.1');
  });

  it('throttles requests through the token bucket when a rate limit is set', async () => {
    const clock = new FakeClock();
    const t = scripted(
      () => respond(200, {}),
      () => respond(200, {}),
      () => respond(200, {}),
    );
    const client = new KubeClient(t, { rateLimit: { qps: 2, burst: 2 }, clock });
    const all = Promise.all([0, 1, 2].map(() => client.get(resources.pods, 'ns1', 'p')));
    await flushPromises();
    assert.equal(t.requests.length, 2, 'burst passes at once');
    clock.advance(500);
    await all;
    assert.equal(t.requests.length, 3);
  });
});

describe('loadKubeConfig', () => {
  let dir: string;
  const kubeconfig = (server: string, ns = 'default'): string => `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "${server}", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u, namespace: ${ns}}
- name: other
  context: {cluster: c, user: u, namespace: elsewhere}
current-context: ctx
`;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kcfg-'));
    writeFileSync(join(dir, 'explicit'), kubeconfig('https://explicit:6443'));
    writeFileSync(join(dir, 'env'), kubeconfig('https://env:6443'));
    mkdirSync(join(dir, 'home', '.kube'), { recursive: true });
    writeFileSync(join(dir, 'home', '.kube', 'config'), kubeconfig('https://home:6443'));
    mkdirSync(join(dir, 'sa', 'var/run/secrets/kubernetes.io/serviceaccount'), { recursive: true });
    writeFileSync(join(dir, 'sa', 'var/run/secrets/kubernetes.io/serviceaccount', 'token'), 'tok');
    writeFileSync(join(dir, 'sa', 'var/run/secrets/kubernetes.io/serviceaccount', 'namespace'), 'kubevirt\n');
    writeFileSync(join(dir, 'broken'), 'clusters: [: nope');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('uses an explicit path first', () => {
    const got = loadKubeConfig({ path: join(dir, 'explicit'), env: { KUBECONFIG: join(dir, 'env') }, homeDir: join(dir, 'home') });
    assert.equal(got.source, 'explicit');
    assert.equal(got.server, 'https://explicit:6443');
    assert.equal(got.namespace, 'default');
  });

  it('does not fall back when an explicit path is missing', () => {
    assert.throws(() => loadKubeConfig({ path: join(dir, 'missing'), homeDir: join(dir, 'home') }), KubeConfigError);
  });

  it('prefers the in-cluster service account over $KUBECONFIG', () => {
    const got = loadKubeConfig({
      env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443', KUBECONFIG: join(dir, 'env') },
      serviceAccountRoot: join(dir, 'sa'),
      homeDir: join(dir, 'home'),
    });
    assert.equal(got.source, 'in-cluster');
    assert.equal(got.server, 'https://[fd00::1]:443');
    assert.equal(got.namespace, 'kubevirt');
  });

  it('then $KUBECONFIG (skipping missing entries), then ~/.kube/config', () => {
    const env = loadKubeConfig({
      env: { KUBECONFIG: `${join(dir, 'nope')}:${join(dir, 'env')}` },
      homeDir: join(dir, 'home'),
      serviceAccountRoot: join(dir, 'none'),
    });
    assert.equal(env.source, 'KUBECONFIG');
    assert.equal(env.server, 'https://env:6443');
    const home = loadKubeConfig({ env: {}, homeDir: join(dir, 'home'), serviceAccountRoot: join(dir, 'none') });
    assert.equal(home.source, 'home');
    assert.equal(home.server, 'https://home:6443');
  });

  it('switches context on request and rejects an unknown one', () => {
    const got = loadKubeConfig({ path: join(dir, 'explicit'), context: 'other' });
    assert.equal(got.context, 'other');
    assert.equal(got.namespace, 'elsewhere');
    assert.throws(() => loadKubeConfig({ path: join(dir, 'explicit'), context: 'nope' }), /context nope not found/);
  });

  it('says everything it tried when nothing is found', () => {
    assert.throws(
      () => loadKubeConfig({ env: {}, homeDir: join(dir, 'nohome'), serviceAccountRoot: join(dir, 'none') }),
      (e: unknown) => e instanceof KubeConfigError && e.tried.length === 3 && /no Kubernetes configuration found/.test(e.message),
    );
  });

  it('reports an unreadable file as a KubeConfigError', () => {
    assert.throws(() => loadKubeConfig({ path: join(dir, 'broken') }), KubeConfigError);
  });
});
