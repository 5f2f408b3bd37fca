// What the flows on real KubeVirt (lifecycle.test.ts, ../suite, ../allocator) check and build: a launcher pod's
// network-selection elements as admitted (the webhook's mutation included) and the claims they name, a claim's
// IPsAllocated condition, the NADs of the built-in allocator, and `persistent-ips status` as a person runs it.
import assert from 'node:assert/strict';
import { MULTUS_NETWORKS_ANNOTATION } from '../../src/claims/constants.ts';
import { runCli } from '../local/controller-process.ts';
import { type Api, type CoreEvent, type IPAMClaim, paths } from '../suite/kube.ts';
import { parseNetworksAnnotation, podInterfaceName } from './launcher-fixture.ts';
import { waitFor } from './virtctl.ts';

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

/** The claim's IPsAllocated condition (written by OVN-K or by the built-in allocator). */
export const ipsAllocated = <C extends { type: string }>(c: { status?: { conditions?: C[] } } | undefined): C | undefined =>
  c?.status?.conditions?.find((x) => x.type === 'IPsAllocated');

/** The annotations by which a NAD opts into the built-in allocator, its pool in them (written out, not from src/). */
export const allocatorAnnotations = (subnets: string, exclude?: string): Record<string, string> => ({
  'persistent-ips.kubevirt.io/allow-persistent-ips': 'true',
  'persistent-ips.kubevirt.io/allocator': 'true',
  'persistent-ips.kubevirt.io/subnets': subnets,
  ...(exclude ? { 'persistent-ips.kubevirt.io/exclude-subnets': exclude } : {}),
});

/** A bridge + static IPAM NAD (the CNI takes the addresses the element asks for) with these annotations. */
export async function bridgeNad(api: Api, ns: string, name: string, network: string, annotations: Record<string, string> = {}): Promise<void> {
  await api.create(paths.nads(ns), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace: ns, annotations },
    spec: {
      config: JSON.stringify({ cniVersion: '0.4.0', name: network, type: 'bridge', bridge: 'br-e2e', capabilities: { ips: true }, ipam: { type: 'static' } }),
    },
  });
}

/** Waits until claim `ns/name` exists and `pred` holds for it (`what`: what is awaited), and returns it. */
export function waitForClaim(api: Api, ns: string, name: string, what: string, pred: (c: IPAMClaim) => boolean, timeoutMs: number): Promise<IPAMClaim> {
  const probe = async () => {
    const c = await api.claim(ns, name);
    return c && pred(c) && c;
  };
  return waitFor(`IPAMClaim ${ns}/${name} ${what}`, probe, { timeoutMs, intervalMs: 200 });
}

/** Waits until at least `min` (default 1) Events of namespace `ns` match, and returns those that do. */
export function waitForEvents(
  api: Api,
  ns: string,
  what: string,
  match: (e: CoreEvent) => boolean,
  o: { min?: number; timeoutMs: number },
): Promise<CoreEvent[]> {
  const probe = async () => {
    const found = (await api.list<CoreEvent>(paths.events(ns))).items.filter(match);
    return found.length >= (o.min ?? 1) && found;
  };
  return waitFor(what, probe, { timeoutMs: o.timeoutMs, intervalMs: 200 });
}

/** `persistent-ips status -n ns ...args` against `kubeconfig`, as a person runs it; it must succeed. Returns its output. */
export async function statusOutput(kubeconfig: string, ns: string, ...args: string[]): Promise<string> {
  const out = await runCli(['status', '--kubeconfig', kubeconfig, '-n', ns, ...args]);
  assert.equal(out.code, 0, out.stderr);
  return out.stdout;
}
