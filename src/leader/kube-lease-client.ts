import type { KubeClient } from '../kube/client.ts';
import { isNotFound } from '../kube/errors.ts';
import { resources } from '../kube/resources.ts';
import type { LeaseClient } from './elector.ts';
import type { Lease, LeaseRef } from './lease.ts';

/** The elector's three Lease calls on the API client; an update is a PUT guarded by the Lease's resourceVersion. */
export function kubeLeaseClient(client: Pick<KubeClient, 'get' | 'create' | 'replace'>, lease: LeaseRef): LeaseClient {
  return {
    get: async (signal) => {
      try {
        return await client.get<Lease>(resources.leases, lease.namespace, lease.name, { signal });
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    create: (l, signal) => client.create<Lease>(resources.leases, l, { signal }),
    update: (l, signal) => client.replace(resources.leases, l as Lease & { metadata: { name: string } }, { signal }),
  };
}
