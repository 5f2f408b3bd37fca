// VIRT-API STAND-IN: TEST INFRASTRUCTURE, NOT KUBEVIRT.
//
// virt-api is not run here (its image, certificates and aggregated API are out of reach). Of its admission
// webhooks, one part changes what the controller under test sees: the VMI mutator (pkg/virt-api/webhooks/
// mutating-webhook/mutators/vmi-mutator.go) adds the finalizer `kubevirt.io/foregroundDeleteVirtualMachine` to every
// VMI it admits and sets the phase Pending. That finalizer is what keeps a deleted VMI in the API until
// virt-controller has seen all its launcher pods gone (lifecycle.go, the IsFinal case); without it a standalone VMI
// vanishes at once, its pod still running. This webhook does exactly those two things, on VMI CREATE, and nothing
// else (no defaulting, no validation: virt-controller's own behaviour is what the suite exercises).
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Cluster } from '../harness/index.ts';
import { selfSignedCertificate } from './certificate.ts';
import { VMI_FINALIZER } from './launcher-fixture.ts';

const CONFIG_NAME = 'virt-api-standin-mutator';

interface Review {
  request?: { uid: string; object?: { metadata?: { finalizers?: string[] }; status?: { phase?: string } } };
}

export class VirtApiStandIn {
  #server: Server | undefined;

  /** Serves the webhook on 127.0.0.1 and registers it (failurePolicy Fail, as KubeVirt ships its mutators). */
  async start(cluster: Cluster, dir: string): Promise<void> {
    const { cert, key } = selfSignedCertificate(dir, 'virt-api-standin');
    const server = createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (d: string) => (body += d));
      req.on('end', () => {
        const review = JSON.parse(body) as Review;
        const obj = review.request?.object;
        const ops: unknown[] = [];
        if (!obj?.metadata?.finalizers) ops.push({ op: 'add', path: '/metadata/finalizers', value: [VMI_FINALIZER] });
        else if (!obj.metadata.finalizers.includes(VMI_FINALIZER)) ops.push({ op: 'add', path: '/metadata/finalizers/-', value: VMI_FINALIZER });
        ops.push(obj?.status ? { op: 'add', path: '/status/phase', value: 'Pending' } : { op: 'add', path: '/status', value: { phase: 'Pending' } });
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            apiVersion: 'admission.k8s.io/v1',
            kind: 'AdmissionReview',
            response: { uid: review.request?.uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops)).toString('base64') },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.#server = server;
    const port = (server.address() as AddressInfo).port;
    const config = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: CONFIG_NAME },
      webhooks: [
        {
          name: 'virtualmachineinstances-mutator.kubevirt.io',
          admissionReviewVersions: ['v1'],
          clientConfig: { url: `https://127.0.0.1:${port}/virtualmachineinstances-mutate`, caBundle: readFileSync(cert).toString('base64') },
          rules: [{ apiGroups: ['kubevirt.io'], apiVersions: ['v1'], resources: ['virtualmachineinstances'], operations: ['CREATE'] }],
          failurePolicy: 'Fail',
          sideEffects: 'None',
        },
      ],
    };
    await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(config) });
  }

  async stop(): Promise<void> {
    const s = this.#server;
    this.#server = undefined;
    if (!s) return;
    s.closeAllConnections(); // the API server keeps its connections to webhooks alive
    await new Promise<void>((r) => s.close(() => r()));
  }
}
