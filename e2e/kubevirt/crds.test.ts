// Unit tests of the KubeVirt CRD subset a world without virt-controller installs (test infrastructure; no cluster).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CONTROLLER_KUBEVIRT_CRDS, kubevirtCrdDocuments } from './kubevirt.ts';

// The shape print-crds writes: each document starts with `---`, metadata's labels may come before its name, and the
// spec holds nested `name:` keys of its own.
const crd = (name: string, labelled: boolean): string =>
  [
    '---',
    'apiVersion: apiextensions.k8s.io/v1',
    'kind: CustomResourceDefinition',
    'metadata:',
    ...(labelled ? ['  labels:', '    operator.kubevirt.io: ""', '    name: not-this-one'] : []),
    `  name: ${name}`,
    'spec:',
    '  group: kubevirt.io',
    '  versions:',
    '  - name: v1',
    '    served: true',
    '',
  ].join('\n');

const PRINTED = [
  crd('kubevirts.kubevirt.io', true),
  crd('virtualmachineinstances.kubevirt.io', true),
  crd('virtualmachineinstancereplicasets.kubevirt.io', false),
  crd('virtualmachines.kubevirt.io', false),
  crd('virtualmachinepools.pool.kubevirt.io', true),
].join('');

describe("KubeVirt's CRDs for a world without virt-controller", () => {
  it('keeps exactly the named documents, unchanged and in their order', () => {
    const out = kubevirtCrdDocuments(PRINTED, CONTROLLER_KUBEVIRT_CRDS);
    assert.equal(
      out,
      [crd('kubevirts.kubevirt.io', true), crd('virtualmachineinstances.kubevirt.io', true), crd('virtualmachines.kubevirt.io', false)].join(''),
    );
  });

  it('reads the name of the CRD, not a label or a nested key called name', () => {
    assert.throws(() => kubevirtCrdDocuments(PRINTED, ['not-this-one']), /no not-this-one/);
    assert.throws(() => kubevirtCrdDocuments(PRINTED, ['v1']), /no v1/);
  });

  it('refuses a list naming a CRD that print-crds did not write, naming it', () => {
    assert.throws(
      () => kubevirtCrdDocuments(PRINTED, ['virtualmachines.kubevirt.io', 'virtualmachineclones.clone.kubevirt.io']),
      /no virtualmachineclones\.clone\.kubevirt\.io/,
    );
  });
});
