// A TCP pass-through in front of the API server that delivers the server's bytes to the client late (TLS stays end
// to end: the proxy never decrypts, and the API server's certificate for 127.0.0.1 still verifies). A controller
// whose kubeconfig points here sees every watch event, and every answer, `delayMs` late: a deterministic stand-in
// for a watch that lags behind (a busy API server, a slow network), which is what "the webhook is asked about a
// pod whose VMI has not reached the controller's cache yet" needs without racing.
import { writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { kubeconfigYaml } from '../harness/index.ts';

export interface LagProxy {
  server: string;
  /** Writes a copy of the admin kubeconfig that goes through the proxy. */
  writeKubeconfig(path: string, caFile: string, token: string): string;
  close(): Promise<void>;
}

export async function startLagProxy(upstream: string, delayMs: number): Promise<LagProxy> {
  const target = new URL(upstream);
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const up = connect({ host: target.hostname, port: Number(target.port) });
    sockets.add(client).add(up);
    let closed = false;
    const closeBoth = () => {
      if (closed) return;
      closed = true;
      // after the delayed bytes have gone out
      setTimeout(() => {
        client.destroy();
        up.destroy();
      }, delayMs + 10);
    };
    // client → server at once; server → client `delayMs` late (equal delays keep the byte order).
    client.on('data', (d) => up.write(d));
    up.on('data', (d) => setTimeout(() => !client.destroyed && client.write(d), delayMs));
    for (const s of [client, up]) {
      s.on('error', closeBoth);
      s.on('close', () => {
        sockets.delete(s);
        closeBoth();
      });
      s.on('end', closeBoth);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  const url = `https://127.0.0.1:${port}`;
  return {
    server: url,
    writeKubeconfig(path, caFile, token) {
      writeFileSync(path, kubeconfigYaml(url, caFile, token), { mode: 0o600 });
      return path;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
