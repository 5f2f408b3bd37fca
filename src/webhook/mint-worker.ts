// The body of certs.ts's certificate generation, run as a short-lived process of its own (see there why): one request
// (JSON) on stdin, one answer (JSON) on stdout, then it exits.
// ECDSA P-256 with SHA-256: small, fast, accepted by the API server's TLS client.
import 'reflect-metadata'; // tsyringe, under @peculiar/x509, needs the Reflect polyfill loaded before it.
import * as x509 from '@peculiar/x509';
import { createPrivateKey, KeyObject, randomBytes, webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { MintAnswer, MintRequest, ServingPolicy } from './certs.ts';
import type { CertKeyPair } from '../telemetry/tls-profile.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;

function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f; // positive
  return bytes.toString('hex');
}

/** Backdating covers clock skew with the API server, but never so much that a short-lived test cert is born due. */
function backdate(validityMs: number): number {
  return Math.min(5 * 60 * 1000, Math.floor(validityMs / 10));
}

/** A new key pair, and the certificate `build` makes for it. */
async function mint(build: (keys: webcrypto.CryptoKeyPair) => Promise<x509.X509Certificate>): Promise<CertKeyPair> {
  const keys = await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
  const cert = await build(keys);
  return { certPem: cert.toString('pem'), keyPem: KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }).toString() };
}

function mintCa(now: number, validityMs: number, commonName: string): Promise<CertKeyPair> {
  return mint(async (keys) =>
    x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serialNumber(),
      // A distinct name per CA, as the Kubernetes components do, so that several CAs in one bundle are told apart.
      name: [{ CN: [`${commonName}@${Math.floor(now / 1000)}`] }],
      notBefore: new Date(now - backdate(validityMs)),
      notAfter: new Date(now + validityMs),
      keys,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    }),
  );
}

function mintServing(ca: CertKeyPair, now: number, policy: ServingPolicy): Promise<CertKeyPair> {
  return mint(async (keys) => {
    const caCert = new x509.X509Certificate(ca.certPem);
    const der = createPrivateKey(ca.keyPem).export({ type: 'pkcs8', format: 'der' });
    return x509.X509CertificateGenerator.create({
      serialNumber: serialNumber(),
      subject: [{ CN: [policy.dnsNames[0] ?? policy.ipAddresses[0]!] }],
      issuer: caCert.subject,
      notBefore: new Date(Math.max(now - backdate(policy.servingValidityMs), caCert.notBefore.getTime())),
      notAfter: new Date(Math.min(now + policy.servingValidityMs, caCert.notAfter.getTime())),
      publicKey: keys.publicKey,
      signingKey: await webcrypto.subtle.importKey('pkcs8', der, KEY_ALGORITHM, false, ['sign']),
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
        new x509.SubjectAlternativeNameExtension(
          [...policy.dnsNames.map((value) => ({ type: 'dns' as const, value })), ...policy.ipAddresses.map((value) => ({ type: 'ip' as const, value }))],
          false,
        ),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
        await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
      ],
    });
  });
}

let answer: MintAnswer;
try {
  const request = JSON.parse(readFileSync(0, 'utf8')) as MintRequest;
  const pair =
    request.kind === 'ca' ? await mintCa(request.now, request.validityMs, request.commonName) : await mintServing(request.ca, request.now, request.policy);
  answer = { ok: true, pair };
} catch (err) {
  answer = { ok: false, message: err instanceof Error ? err.message : String(err) };
}
process.stdout.write(JSON.stringify(answer));
