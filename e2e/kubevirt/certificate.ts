// A throw-away serving certificate for 127.0.0.1 (test infrastructure: virt-controller's metrics, the virt-api
// stand-in's webhook).
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export function selfSignedCertificate(dir: string, commonName: string): { cert: string; key: string } {
  mkdirSync(dir, { recursive: true });
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${commonName}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}
