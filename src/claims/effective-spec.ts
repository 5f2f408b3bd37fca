// The networks a VMI really has. KubeVirt (virt-api's defaulting, and virt-controller's VM controller itself) gives
// a VMI whose spec lists no networks and no interfaces the pod network, `networks: [{name: default, pod: {}}]` and an
// interface `default` (its binding per cluster config, which does not matter for claims), unless
// `domain.devices.autoattachPodInterface` is false. It does that to the VMI, never to the VM, so a VM template with
// no networks runs with a pod network its template does not show. In a namespace with a persistent primary
// user-defined network that pod network needs a claim, and the controller (reading the VM template) and the webhook
// (reading the VMI) must agree on it: both read every spec through this function.

import type { VmiSpecLike } from '../kube/types.ts';

export const DEFAULT_POD_NETWORK = 'default';

/** The spec as KubeVirt runs it: `spec` itself, or with the implicit pod network added. Pure, idempotent. */
export function effectiveVmiSpec(spec: VmiSpecLike | undefined): VmiSpecLike | undefined {
  if (!spec) return spec;
  const devices = spec.domain?.devices;
  if (devices?.autoattachPodInterface === false) return spec;
  if ((spec.networks?.length ?? 0) > 0 || (devices?.interfaces?.length ?? 0) > 0) return spec;
  return {
    ...spec,
    networks: [{ name: DEFAULT_POD_NETWORK, pod: {} }],
    domain: { ...spec.domain, devices: { ...devices, interfaces: [{ name: DEFAULT_POD_NETWORK, masquerade: {} }] } },
  };
}
