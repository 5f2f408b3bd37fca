// The one object key of the caches, their indexes and the work queues: `namespace/name`, or `name` for a
// cluster-scoped object (the convention of client-go's MetaNamespaceKeyFunc). Names and namespaces cannot hold a
// `/`, so the first one separates; a key without one is cluster-scoped.

/** The namespace and name of a Kubernetes object; the empty namespace for a cluster-scoped one. */
export interface ObjectKey {
  namespace: string;
  name: string;
}

/** The key of an object, or of its metadata: `keyString(obj.metadata)`. */
export function keyString(ref: { readonly namespace?: string | undefined; readonly name: string }): string {
  return ref.namespace ? `${ref.namespace}/${ref.name}` : ref.name;
}

/** The object a key names. Also reads the `/name` keys of cluster-wide requests, as the empty namespace. */
export function parseKey(key: string): ObjectKey {
  const slash = key.indexOf('/');
  return slash < 0 ? { namespace: '', name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
