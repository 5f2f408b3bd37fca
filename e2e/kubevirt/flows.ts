// What the flows of both real-KubeVirt files (lifecycle.test.ts, ../suite) check on a launcher pod: the
// network-selection elements as admitted (the webhook's mutation included) and the claims they name.
import assert from 'node:assert/strict';
import { MULTUS_NETWORKS_ANNOTATION } from '../../src/claims/constants.ts';
import { parseNetworksAnnotation, podInterfaceName } from './launcher-fixture.ts';

type PodLike = { metadata?: { name?: string; annotations?: Record<string, string> } };

/** The network-selection elements of a launcher pod in `annotation` (default: Multus's networks annotation). */
export function podElements(pod: PodLike, annotation = MULTUS_NETWORKS_ANNOTATION) {
  return parseNetworksAnnotation(pod.metadata?.annotations?.[annotation]) ?? [];
}

/**
 * The launcher pod's network-selection element of each network names its claim (`ipam-claim-reference`, added by
 * the controller's webhook); `undefined` means the element must have none.
 */
export function assertPodReferences(pod: PodLike, expected: Record<string, string | undefined>): void {
  const elements = podElements(pod);
  for (const [network, claim] of Object.entries(expected)) {
    const iface = podInterfaceName(network);
    const element = elements.find((e) => e.interface === iface);
    assert.ok(element, `launcher pod ${pod.metadata?.name} has a network-selection element for ${network} (${iface})`);
    assert.equal(element['ipam-claim-reference'], claim, `pod ${pod.metadata?.name}, network ${network}: ipam-claim-reference`);
  }
}
