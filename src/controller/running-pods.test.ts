// Which claims make the leader read a running VMI's launcher pods (running-pods.ts): only a claim that holds no
// address yet and was not made in an earlier second than its VMI. A restart of a VM whose claim exists reads nothing.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../claims/decide.ts';
import { claimOf, multus, nadMap, ovnNad, virtualMachine, vmiOf } from '../../test/objects.ts';
import type { IPAMClaim } from '../kube/types.ts';
import { emptyClaimsOfRunningVmi } from './running-pods.ts';

const vm = virtualMachine({ networks: [multus('blue', 'blue')] });
const nads = nadMap(ovnNad('blue'));
const running = (created: string) => {
  const v = vmiOf(vm, { activePods: { 'pod-uid': 'node-1' } });
  v.metadata.creationTimestamp = created;
  return v;
};
const claim = (created: string, ips?: string[]): IPAMClaim => {
  const c = claimOf(vm, 'blue', ips ? { ips } : {});
  if (!ips) delete c.status;
  c.metadata.creationTimestamp = created;
  return c;
};
const empties = (vmiCreated: string, c: IPAMClaim, gateEnabled = true) => {
  const input = { key: { namespace: vm.metadata.namespace!, name: vm.metadata.name }, vm, vmi: running(vmiCreated), nads, claims: [c], gateEnabled };
  return emptyClaimsOfRunningVmi(input, decide(input)).map((e) => e.claim.metadata.name);
};

describe('emptyClaimsOfRunningVmi', () => {
  const rows: [string, string, IPAMClaim, string[]][] = [
    ['a claim made after its VMI, empty: read the pods', '2026-01-01T00:00:00Z', claim('2026-01-01T00:05:00Z'), ['vm1.blue']],
    [
      'made in the same second as the VMI (one-second resolution: maybe after it): read the pods',
      '2026-01-01T00:00:00Z',
      claim('2026-01-01T00:00:00Z'),
      ['vm1.blue'],
    ],
    ['made before the VMI (a restart of a VM whose claim exists): nothing read', '2026-01-01T00:00:05Z', claim('2026-01-01T00:00:00Z'), []],
    ['made after, but holding an address: nothing read', '2026-01-01T00:00:00Z', claim('2026-01-01T00:05:00Z', ['10.0.0.5/24']), []],
  ];
  for (const [name, vmiCreated, c, expected] of rows) it(name, () => assert.deepEqual(empties(vmiCreated, c), expected));
  it('gate off: nothing read', () => assert.deepEqual(empties('2026-01-01T00:00:00Z', claim('2026-01-01T00:05:00Z'), false), []));
  it("a claim for the NAD the VM names now while the VMI still runs on another (a swap pending): not the running pod's", () => {
    const swapped = virtualMachine({ networks: [multus('blue', 'red')] });
    const c = claimOf(swapped, 'blue', { network: 'net-red' });
    delete c.status;
    c.metadata.creationTimestamp = '2026-01-01T00:05:00Z';
    const input = {
      key: { namespace: vm.metadata.namespace!, name: vm.metadata.name },
      vm: swapped,
      vmi: running('2026-01-01T00:00:00Z'),
      nads: nadMap(ovnNad('blue'), ovnNad('red')),
      claims: [c],
      gateEnabled: true,
    };
    const plan = decide(input);
    assert.deepEqual(
      plan.wanted.map((w) => [w.claim, w.status]),
      [['vm1.blue', 'created']],
    );
    assert.deepEqual(emptyClaimsOfRunningVmi(input, plan), []);
  });
});
