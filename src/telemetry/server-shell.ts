// What the webhook server and the probe/metrics server share: HTTPS with a TLS profile (or plain HTTP), certificate
// rotation, listening and graceful closing.
//
// The certificate is swapped with setSecureContext: new connections get the new one, connections already established
// and requests in flight continue undisturbed. Until a certificate is set, TLS handshakes fail: nothing is served
// without one.

import type { RequestListener, Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createSecureContext } from 'node:tls';
import { httpModule } from '../kube/http-module.ts';
import type { Logger } from './logger.ts';
import type { CertKeyPair, TlsProfile } from './tls-profile.ts';

/** What both servers offer their caller. */
export interface Serving {
  /** Installs (or rotates to) the serving certificate. Throws, keeping the current one, if invalid (or plain HTTP). */
  setCertificate(pair: CertKeyPair): void;
  /** Resolves with the bound address (useful with port 0); rejects when the port cannot be bound. */
  listen(): Promise<AddressInfo>;
  /** Stops accepting, lets in-flight requests finish, and cuts what is still open after `closeTimeoutMs`. */
  close(): Promise<void>;
}

/** HTTPS with `tls`, plain HTTP without; `name` and `fields` go into the log line once listening. */
export function createServerShell(
  options: { name: string; log: Logger; tls?: TlsProfile | undefined; port: number; host?: string | undefined; closeTimeoutMs: number; fields?: object },
  onRequest: RequestListener,
): Serving & { server: Server } {
  const { name, log, tls, port, host = '0.0.0.0', closeTimeoutMs, fields } = options;
  const settings = tls && { minVersion: tls.minVersion, ciphers: tls.ciphers, honorCipherOrder: true };
  const https = settings && createHttpsServer(settings, onRequest);
  https?.on('tlsClientError', (error) => log.debug({ err: error }, 'TLS handshake failed'));
  const server: Server = https ?? httpModule().createServer(onRequest);
  return {
    server,
    setCertificate(pair) {
      if (!https) throw new Error('setCertificate on a plain HTTP server');
      const context = { cert: pair.certPem, key: pair.keyPem, ...settings };
      // Validate first (mismatched key, bad PEM): a broken pair must never replace a working one.
      createSecureContext(context);
      https.setSecureContext(context);
    },
    listen: () =>
      new Promise<AddressInfo>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          const address = server.address() as AddressInfo;
          log.info({ address: address.address, port: address.port, ...fields }, `${name} server listening`);
          resolve(address);
        });
      }),
    // close() alone closes idle keep-alive sockets (Node ≥ 19) but would wait forever on a busy one.
    close: () =>
      new Promise<void>((resolve, reject) => {
        if (!server.listening) return resolve();
        const timer = setTimeout(() => server.closeAllConnections(), closeTimeoutMs);
        timer.unref();
        server.close((error) => {
          clearTimeout(timer);
          if (error) reject(error);
          else resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
