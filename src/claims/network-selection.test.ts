import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nadKeyOfNetworkName } from './nad-reference.ts';
import { elementNamespace, parseNetworkSelection, serializeNetworkSelection } from './network-selection.ts';

describe('parseNetworkSelection', () => {
  const good: { name: string; text: string; format: 'json' | 'list'; elements: unknown[] }[] = [
    { name: 'empty', text: '', format: 'list', elements: [] },
    { name: 'blank', text: '  ', format: 'list', elements: [] },
    { name: 'empty JSON array', text: '[]', format: 'json', elements: [] },
    {
      name: 'JSON elements keep every field',
      text: '[{"name":"red","namespace":"ns","interface":"pod1","mac":"02:00:00:00:00:01","ips":["10.0.0.5/24"],"extra":{"x":1}}]',
      format: 'json',
      elements: [{ name: 'red', namespace: 'ns', interface: 'pod1', mac: '02:00:00:00:00:01', ips: ['10.0.0.5/24'], extra: { x: 1 } }],
    },
    { name: 'list: name', text: 'red', format: 'list', elements: [{ name: 'red' }] },
    {
      name: 'list: namespace/name@interface, spaces around items',
      text: ' ns1/red@eth1 , blue ,ns2/green',
      format: 'list',
      elements: [{ name: 'red', namespace: 'ns1', interface: 'eth1' }, { name: 'blue' }, { name: 'green', namespace: 'ns2' }],
    },
  ];
  for (const row of good) {
    it(`reads ${row.name}`, () => {
      const parsed = parseNetworkSelection(row.text);
      assert.ok(parsed.ok, !parsed.ok ? parsed.error : '');
      assert.equal(parsed.format, row.format);
      assert.deepEqual(parsed.elements, row.elements);
    });
  }
  const bad: { name: string; text: unknown; error: RegExp }[] = [
    { name: 'truncated JSON', text: '[{"name":"red"', error: /not valid JSON/ },
    { name: 'a JSON object instead of an array', text: '{"name":"red"}', error: /not an array/ },
    { name: 'a JSON element without a name', text: '[{"namespace":"ns"}]', error: /has no name/ },
    { name: 'a JSON element that is a string', text: '["red"]', error: /not an object/ },
    { name: 'a non-string interface', text: '[{"name":"red","interface":3}]', error: /"interface" is not a string/ },
    { name: 'a non-string claim reference', text: '[{"name":"red","ipam-claim-reference":{}}]', error: /"ipam-claim-reference" is not a string/ },
    { name: 'two slashes', text: 'a/b/c', error: /more than one "\/"/ },
    { name: 'two ats', text: 'a@b@c', error: /more than one "@"/ },
    { name: 'an empty item', text: 'red,,blue', error: /not a valid network name/ },
    { name: 'uppercase name', text: 'Red', error: /not a valid network name/ },
    { name: 'not a string', text: 42, error: /not a string/ },
  ];
  for (const row of bad) {
    it(`reports ${row.name} without throwing`, () => {
      const parsed = parseNetworkSelection(row.text);
      assert.equal(parsed.ok, false);
      if (!parsed.ok) assert.match(parsed.error, row.error);
    });
  }
  it('survives arbitrary input', () => {
    for (const text of ['[', ']', '"', '{}', 'null', '[null]', '@', '/', ',', '[[]]', '\u0000', 'a'.repeat(10_000)]) {
      assert.doesNotThrow(() => parseNetworkSelection(text));
    }
  });
});

describe('helpers', () => {
  it('serializes to the JSON form, fields in their order', () => {
    assert.equal(
      serializeNetworkSelection([{ name: 'red', namespace: 'ns', 'ipam-claim-reference': 'vm.red' }]),
      '[{"name":"red","namespace":"ns","ipam-claim-reference":"vm.red"}]',
    );
  });
  it('an element without namespace is in the pod namespace', () => {
    assert.equal(elementNamespace({ name: 'red' }, 'pod-ns'), 'pod-ns');
    assert.equal(elementNamespace({ name: 'red', namespace: '' }, 'pod-ns'), 'pod-ns');
    assert.equal(elementNamespace({ name: 'red', namespace: 'other' }, 'pod-ns'), 'other');
  });
  it('resolves a VMI networkName', () => {
    assert.equal(nadKeyOfNetworkName('red', 'ns'), 'ns/red');
    assert.equal(nadKeyOfNetworkName('other/red', 'ns'), 'other/red');
    assert.equal(nadKeyOfNetworkName('a/b/c', 'ns'), undefined);
    assert.equal(nadKeyOfNetworkName('', 'ns'), undefined);
    assert.equal(nadKeyOfNetworkName(undefined, 'ns'), undefined);
  });
});
