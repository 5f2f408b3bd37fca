// JSON patches (RFC 6902) whose `test` operations make a write conditional on what the caller last saw, so that a
// finalizer change never clobbers a concurrent one.

export type JsonPatchOp =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; from: string; path: string };

/** Escapes one reference token of a JSON pointer (RFC 6901): `~` → `~0`, `/` → `~1`. */
export function escapeJsonPointer(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Removes `finalizer` only if the finalizer list is still exactly `current`; otherwise the server answers with a
 * failed test (classified as a conflict) and the caller re-reads. Undefined when there is nothing to remove.
 */
export function removeFinalizerPatch(current: readonly string[] | undefined, finalizer: string): JsonPatchOp[] | undefined {
  if (!current?.includes(finalizer)) return undefined;
  return [
    { op: 'test', path: '/metadata/finalizers', value: [...current] },
    { op: 'replace', path: '/metadata/finalizers', value: current.filter((f) => f !== finalizer) },
  ];
}
