// Listening and graceful closing, shared by the probe/metrics server and the webhook server.

import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';

type AnyServer = Pick<HttpServer, 'once' | 'off' | 'listen' | 'address' | 'listening' | 'close' | 'closeAllConnections' | 'closeIdleConnections'>;

/** Resolves with the bound address (useful with port 0); rejects when the port cannot be bound. */
export function listenOn(server: AnyServer, port: number, host = '0.0.0.0'): Promise<AddressInfo> {
  return new Promise<AddressInfo>((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * Stops accepting, lets in-flight requests finish, and cuts what is still open after `timeoutMs`. close() alone closes
 * idle keep-alive sockets (Node ≥ 19) but would wait forever on a busy one.
 */
export function closeGracefully(server: AnyServer, timeoutMs: number): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
    timer.unref();
    server.close((error) => {
      clearTimeout(timer);
      if (error) reject(error);
      else resolve();
    });
    server.closeIdleConnections();
  });
}
