// The TLS settings of the servers the API server and Prometheus connect to (the webhook, secure metrics), from
// flags spelled as Kubernetes components spell them: --tls-min-version VersionTLS12|VersionTLS13 and
// --tls-cipher-suites with IANA names. Node (OpenSSL) knows the suites by other names; the table below maps them.
//
// The default offers TLS 1.3 and, for TLS 1.2, only ECDHE key exchange with AEAD ciphers: no CBC mode, no SHA-1 MAC,
// no static RSA key exchange (no forward secrecy). That is the "intermediate" profile the API server's client
// always supports.

import type { SecureVersion } from 'node:tls';

/** A certificate (PEM, possibly a chain) and its private key (PEM, PKCS#8): what a TLS server serves. */
export interface CertKeyPair {
  certPem: string;
  keyPem: string;
}

/**
 * IANA name → OpenSSL name. TLS 1.3 suites have the same name in both. The default is every suite neither weak nor
 * an older spelling, in this order.
 */
const SUITES: Record<string, { openssl: string; tls13?: true; weak?: string; older?: true }> = {
  TLS_AES_128_GCM_SHA256: { openssl: 'TLS_AES_128_GCM_SHA256', tls13: true },
  TLS_AES_256_GCM_SHA384: { openssl: 'TLS_AES_256_GCM_SHA384', tls13: true },
  TLS_CHACHA20_POLY1305_SHA256: { openssl: 'TLS_CHACHA20_POLY1305_SHA256', tls13: true },
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: { openssl: 'ECDHE-ECDSA-AES128-GCM-SHA256' },
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: { openssl: 'ECDHE-RSA-AES128-GCM-SHA256' },
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: { openssl: 'ECDHE-ECDSA-AES256-GCM-SHA384' },
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: { openssl: 'ECDHE-RSA-AES256-GCM-SHA384' },
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: { openssl: 'ECDHE-ECDSA-CHACHA20-POLY1305' },
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: { openssl: 'ECDHE-RSA-CHACHA20-POLY1305' },
  // Go's older spellings, accepted by Kubernetes components too.
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: { openssl: 'ECDHE-ECDSA-CHACHA20-POLY1305', older: true },
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: { openssl: 'ECDHE-RSA-CHACHA20-POLY1305', older: true },
  // Accepted when named, never by default.
  TLS_RSA_WITH_AES_128_GCM_SHA256: { openssl: 'AES128-GCM-SHA256', weak: 'no forward secrecy' },
  TLS_RSA_WITH_AES_256_GCM_SHA384: { openssl: 'AES256-GCM-SHA384', weak: 'no forward secrecy' },
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256: { openssl: 'ECDHE-ECDSA-AES128-SHA256', weak: 'CBC' },
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: { openssl: 'ECDHE-RSA-AES128-SHA256', weak: 'CBC' },
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: { openssl: 'ECDHE-ECDSA-AES128-SHA', weak: 'CBC, SHA-1' },
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: { openssl: 'ECDHE-RSA-AES128-SHA', weak: 'CBC, SHA-1' },
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: { openssl: 'ECDHE-ECDSA-AES256-SHA', weak: 'CBC, SHA-1' },
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: { openssl: 'ECDHE-RSA-AES256-SHA', weak: 'CBC, SHA-1' },
  TLS_RSA_WITH_AES_128_CBC_SHA256: { openssl: 'AES128-SHA256', weak: 'CBC, no forward secrecy' },
  TLS_RSA_WITH_AES_128_CBC_SHA: { openssl: 'AES128-SHA', weak: 'CBC, SHA-1, no forward secrecy' },
  TLS_RSA_WITH_AES_256_CBC_SHA: { openssl: 'AES256-SHA', weak: 'CBC, SHA-1, no forward secrecy' },
};

export const TLS_VERSIONS: Record<string, SecureVersion> = { VersionTLS12: 'TLSv1.2', VersionTLS13: 'TLSv1.3' };

/** What node:tls needs: the minimum version and an OpenSSL cipher list (TLS 1.3 and 1.2 suites together). */
export interface TlsProfile {
  minVersion: SecureVersion;
  ciphers: string;
  /** IANA names of the suites on offer, for logs. */
  suites: readonly string[];
  /** Named suites that are weak, with why (the caller warns). */
  weak: readonly string[];
}

export const SUPPORTED_CIPHER_SUITES: readonly string[] = Object.keys(SUITES);
export const DEFAULT_CIPHER_SUITES = SUPPORTED_CIPHER_SUITES.filter((s) => !SUITES[s]!.weak && !SUITES[s]!.older);

/**
 * `minVersion`: VersionTLS12 (default) or VersionTLS13. `cipherSuites`: IANA names; as with Go's crypto/tls, naming
 * only TLS 1.2 suites leaves the TLS 1.3 ones at their defaults, which cannot be weak. Throws on anything unknown.
 */
export function tlsProfile(minVersion = 'VersionTLS12', cipherSuites: readonly string[] = []): TlsProfile {
  const version = TLS_VERSIONS[minVersion];
  if (!version) throw new Error(`--tls-min-version: unknown version "${minVersion}"; one of ${Object.keys(TLS_VERSIONS).join(', ')}`);
  const named = [...new Set(cipherSuites.map((s) => s.trim()).filter((s) => s !== ''))];
  for (const name of named) {
    if (!SUITES[name]) throw new Error(`--tls-cipher-suites: unknown or unsupported cipher suite "${name}"; supported: ${SUPPORTED_CIPHER_SUITES.join(', ')}`);
  }
  let suites = named.length > 0 ? named : [...DEFAULT_CIPHER_SUITES];
  if (!suites.some((s) => SUITES[s]!.tls13)) suites = [...DEFAULT_CIPHER_SUITES.filter((s) => SUITES[s]!.tls13), ...suites];
  if (version === 'TLSv1.3') suites = suites.filter((s) => SUITES[s]!.tls13);
  const weak = suites.filter((s) => SUITES[s]!.weak).map((s) => `${s} (${SUITES[s]!.weak})`);
  return { minVersion: version, ciphers: [...new Set(suites.map((s) => SUITES[s]!.openssl))].join(':'), suites, weak };
}

/** `--tls-cipher-suites a,b --tls-cipher-suites c` → [a, b, c]. */
export function splitSuites(values: readonly string[]): string[] {
  return values
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter((s) => s !== '');
}
