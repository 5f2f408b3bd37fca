import type { KubeClient } from '../kube/client.ts';
import { ifFound } from '../kube/errors.ts';
import { resources } from '../kube/resources.ts';
import type { LeaseClient } from './elector.ts';
import type { Lease, LeaseRef } from './lease.ts';

/** The elector's three Lease calls on the API client; an update is a PUT guarded by the Lease's resourceVersion. */
export function kubeLeaseClient(client: Pick<KubeClient, 'get' | 'create' | 'replace'>, lease: LeaseRef): LeaseClient {
  return {
    get: (signal) => ifFound(client.get<Lease>(resources.leases, lease.namespace, lease.name, { signal })),
    create: (l, signal) => client.create<Lease>(resources.leases, l, { signal }),
    update: (l, signal) => client.replace(resources.leases, l as Lease & { metadata: { name: string } }, { signal }),
  };
}
