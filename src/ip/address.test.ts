import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import IPCIDR from 'ip-cidr';
import { formatAddress, parseAddress } from './address.ts';

test('parseAddress: accepted forms', () => {
  const cases: [string, { family: 4 | 6; value: bigint; prefix?: number }][] = [
    ['192.0.2.1', { family: 4, value: 0xc0000201n }],
    ['0.0.0.0', { family: 4, value: 0n }],
    ['255.255.255.255', { family: 4, value: 0xffffffffn }],
    ['10.0.0.0/8', { family: 4, value: 0x0a000000n, prefix: 8 }],
    ['10.0.0.7/32', { family: 4, value: 0x0a000007n, prefix: 32 }],
    ['::', { family: 6, value: 0n }],
    ['::1', { family: 6, value: 1n }],
    ['2001:DB8::A', { family: 6, value: 0x20010db800000000000000000000000an }],
    ['2001:0db8:0000:0000:0000:0000:0000:000a', { family: 6, value: 0x20010db800000000000000000000000an }],
    ['fd00::/64', { family: 6, value: 0xfd00n << 112n, prefix: 64 }],
    ['fd00::1/128', { family: 6, value: (0xfd00n << 112n) + 1n, prefix: 128 }],
  ];
  for (const [text, want] of cases) {
    const r = parseAddress(text, { allowPrefix: true });
    assert.deepEqual(r, { ok: true, value: want }, text);
  }
});

test('parseAddress: refused forms, with a message and no throw', () => {
  const cases: [unknown, RegExp][] = [
    ['', /empty/],
    [42, /expected a string/],
    [null, /expected a string, got null/],
    ['10.0.0.256', /not a valid IP/],
    ['010.0.0.1', /not a valid IP/], // leading zero: octal for some parsers
    ['1.2.3', /not a valid IP/],
    [' 10.0.0.1', /not a valid IP/],
    ['fd00:::1', /not a valid IP/],
    ['1::2::3', /not a valid IP/],
    ['1:2:3:4:5:6:7:8:9', /not a valid IP/],
    ['::ffff:192.0.2.1', /IPv4-embedded/],
    ['fe80::1%eth0', /zone/],
    ['10.0.0.0/33', /prefix length/],
    ['fd00::/129', /prefix length/],
    ['10.0.0.0/08', /prefix length/],
    ['10.0.0.0/', /prefix length/],
    ['10.0.0.0/8/16', /more than one/],
    ['hello', /not a valid IP/],
    ['1.2.3.4 ', /not a valid IP/],
    ['1e1.0.0.1', /not a valid IP/],
    ['::1:', /not a valid IP/],
    ['1:2:3:4:5:6:7::8', /not a valid IP/],
  ];
  for (const [input, re] of cases) {
    const r = parseAddress(input, { allowPrefix: true });
    assert.equal(r.ok, false, String(input));
    if (!r.ok) assert.match(r.message, re, String(input));
  }
  const noPrefix = parseAddress('10.0.0.0/24');
  assert.equal(noPrefix.ok, false);
});

test('formatAddress: RFC 5952 examples', () => {
  const cases: [bigint, string][] = [
    [0n, '::'],
    [1n, '::1'],
    [0xfd00n << 112n, 'fd00::'],
    [0x20010db8000000010001000100010001n, '2001:db8:0:1:1:1:1:1'], // a single zero group is not compressed
    [0x20010000000000010000000000000001n, '2001:0:0:1::1'], // the longest run wins
    [0x20010db8000000000001000000000001n, '2001:db8::1:0:0:1'], // on a tie, the first run
  ];
  for (const [value, text] of cases) assert.equal(formatAddress(6, value), text);
  assert.equal(formatAddress(4, 0xc0a80001n), '192.168.0.1');
  assert.equal(formatAddress(4, 0xffffffffn), '255.255.255.255');
});

test('formatAddress and parseAddress agree with ip-address for any address', () => {
  const group = (v: bigint, i: number) => ((v >> BigInt((7 - i) * 16)) & 0xffffn).toString(16);
  const groups = (v: bigint) => Array.from({ length: 8 }, (_, i) => group(v, i)).join(':');
  const padded = (v: bigint) => Array.from({ length: 8 }, (_, i) => group(v, i).padStart(4, '0')).join(':');
  const libraryValue = (text: string) => BigInt(IPCIDR.createAddress(text).bigInteger().toString());
  // Bias towards zero groups, where the compression rules matter.
  const v6 = fc
    .array(fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff })), {
      minLength: 8,
      maxLength: 8,
    })
    .map((gs) => gs.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n));
  fc.assert(
    fc.property(v6, (value) => {
      const text = formatAddress(6, value);
      assert.equal(text, IPCIDR.createAddress(groups(value)).correctForm());
      assert.equal(libraryValue(text), value);
      // Canonical text takes the fast path; other spellings go through the library: both must agree.
      for (const spelling of [text, text.toUpperCase(), groups(value), padded(value)]) {
        assert.deepEqual(parseAddress(spelling), { ok: true, value: { family: 6, value } }, spelling);
      }
    }),
    { numRuns: 500 },
  );
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: 0xffffffffn }), (value) => {
      const text = formatAddress(4, value);
      assert.equal(text, IPCIDR.createAddress(text).correctForm());
      assert.equal(libraryValue(text), value);
      assert.deepEqual(parseAddress(text), { ok: true, value: { family: 4, value } });
    }),
  );
});
