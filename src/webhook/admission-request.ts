// Which requests the webhook decides, and what claim-guard.ts is given for them: a pure reading of the
// AdmissionRequest, so that the guard's rules run on every request before anything else decides.

import { isObject } from '../claims/nad-config.ts';
import type { Pod } from '../kube/types.ts';
import type { AdmissionRequest } from './admission-types.ts';
import { annotationsOf, type GuardInput } from './claim-guard.ts';
import { isLauncherPod } from './pod-mutation.ts';

export interface ClassifiedRequest {
  operation: 'CREATE' | 'UPDATE';
  namespace: string;
  /** The pod's name, or what a pod being created will be named after (generateName). */
  podName: string;
  /** The request's object: the pod, or a Binding (whose annotations are merged into the pod). */
  pod: Pod;
  oldPod?: Pod;
  /** A pod (not a Binding) that carries the launcher label, before or after: the launcher-pod rules decide it. */
  launcher: boolean;
  guard: GuardInput;
}

/** The request as the webhook decides it; undefined when it is none of the webhook's business (admitted, `skipped`). */
export function classifyRequest(request: AdmissionRequest, watchNamespace: string | undefined): ClassifiedRequest | undefined {
  const operation = request.operation;
  const core = (request.kind?.group ?? '') === '';
  // pods/status is an UPDATE of the whole pod, annotations included. A Binding's annotations are merged into the pod,
  // whether it is posted to pods/binding or to the older namespaced `bindings` resource (no subresource).
  const isPod = core && request.kind?.kind === 'Pod' && (!request.subResource || (request.subResource === 'status' && operation === 'UPDATE'));
  const isBinding = core && request.kind?.kind === 'Binding';
  if ((!isPod && !isBinding) || (operation !== 'CREATE' && operation !== 'UPDATE') || !isObject(request.object)) return undefined;
  const pod = request.object as unknown as Pod;
  if (!isObject(pod.metadata)) return undefined;
  const namespace = request.namespace || pod.metadata.namespace || '';
  if (watchNamespace !== undefined && namespace !== watchNamespace) return undefined;
  const generateName = (pod.metadata as { generateName?: unknown }).generateName;
  const podName: string = pod.metadata.name || request.name || (typeof generateName === 'string' ? generateName : '');
  const oldPod = operation === 'UPDATE' && isObject(request.oldObject) ? (request.oldObject as unknown as Pod) : undefined;
  const launcher = isPod && (isLauncherPod(pod) || (oldPod !== undefined && isLauncherPod(oldPod)));
  const guard: GuardInput = {
    kind: isBinding ? 'Binding' : 'Pod',
    operation,
    subject: `${namespace}/${podName}`,
    annotations: annotationsOf(pod),
    ...(oldPod ? { oldAnnotations: annotationsOf(oldPod) } : {}),
    launcher,
  };
  return { operation, namespace, podName, pod, ...(oldPod ? { oldPod } : {}), launcher, guard };
}
