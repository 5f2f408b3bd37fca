import assert from 'node:assert/strict';
import { getCiphers } from 'node:tls';
import { describe, it } from 'node:test';
import { DEFAULT_CIPHER_SUITES, splitSuites, SUPPORTED_CIPHER_SUITES, tlsProfile } from './tls-profile.ts';

describe('TLS profile from Kubernetes-style flags', () => {
  it('default: TLS 1.2 minimum, no CBC, no SHA-1, no static RSA key exchange', () => {
    const p = tlsProfile();
    assert.equal(p.minVersion, 'TLSv1.2');
    assert.deepEqual(p.suites, DEFAULT_CIPHER_SUITES);
    assert.deepEqual(p.weak, []);
    for (const s of p.suites) {
      assert.doesNotMatch(s, /CBC|_SHA$|RC4|3DES/, s);
      assert.ok(s.startsWith('TLS_ECDHE_') || /^TLS_(AES|CHACHA20)/.test(s), `${s}: forward secrecy`);
    }
    for (const c of p.ciphers.split(':')) assert.doesNotMatch(c, /-SHA$|CBC/, c);
  });

  it('every OpenSSL name we map to is one this Node knows', () => {
    const known = new Set(getCiphers().map((c) => c.toUpperCase()));
    for (const name of SUPPORTED_CIPHER_SUITES) {
      const openssl = tlsProfile('VersionTLS12', [name]).ciphers.split(':').at(-1)!;
      assert.ok(known.has(openssl.toUpperCase()) || openssl.startsWith('TLS_'), `${name} → ${openssl}`);
    }
  });

  it('named TLS 1.2 suites leave the TLS 1.3 suites on, as Go does; weak ones are flagged', () => {
    const p = tlsProfile('VersionTLS12', ['TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256']);
    assert.deepEqual(p.suites, [
      'TLS_AES_128_GCM_SHA256',
      'TLS_AES_256_GCM_SHA384',
      'TLS_CHACHA20_POLY1305_SHA256',
      'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA',
      'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
    ]);
    assert.equal(p.ciphers, 'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256');
    assert.deepEqual(p.weak, ['TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA (CBC, SHA-1)']);
  });

  it('VersionTLS13 offers TLS 1.3 suites only', () => {
    const p = tlsProfile('VersionTLS13', ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384']);
    assert.equal(p.minVersion, 'TLSv1.3');
    assert.deepEqual(p.suites, ['TLS_AES_256_GCM_SHA384']);
  });

  it('unknown versions and suites are errors naming the flag', () => {
    assert.throws(() => tlsProfile('VersionTLS11'), /--tls-min-version: unknown version "VersionTLS11"/);
    assert.throws(() => tlsProfile('TLSv1.2'), /--tls-min-version/);
    assert.throws(
      () => tlsProfile('VersionTLS12', ['TLS_RSA_WITH_RC4_128_SHA']),
      /--tls-cipher-suites: unknown or unsupported cipher suite "TLS_RSA_WITH_RC4_128_SHA"/,
    );
    assert.throws(() => tlsProfile('VersionTLS12', ['ECDHE-RSA-AES128-GCM-SHA256']), /OpenSSL|unknown/);
  });

  it('splits repeated and comma-separated values', () => {
    assert.deepEqual(splitSuites(['a, b', 'c', '']), ['a', 'b', 'c']);
  });
});
