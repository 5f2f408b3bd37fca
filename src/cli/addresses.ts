// Listen addresses of the controller's servers, in the controller-runtime flag syntax.

import { CliError, EXIT } from './exit-codes.ts';

/** ":8080" → all interfaces, "127.0.0.1:8080" / "[::1]:8080" → that host, "0" → disabled. */
export function parseBindAddress(value: string): { host: string; port: number } | undefined {
  if (value === '0') return undefined;
  const colon = value.lastIndexOf(':');
  const host = colon > 0 ? value.slice(0, colon).replace(/^\[|\]$/g, '') : '0.0.0.0';
  const portText = colon >= 0 ? value.slice(colon + 1) : value;
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535 || host === '')
    throw new CliError(`invalid bind address "${value}": expected [host]:port, or 0 to disable`, EXIT.usage);
  return { host, port };
}

/**
 * In a pod (the API server's Service environment is set), listen on all interfaces, as the kubelet's probes and
 * Prometheus need; anywhere else (a laptop, a CI runner), loopback only, so that a developer's run does not offer
 * metrics or an admission endpoint to the network. The Deployment passes its addresses explicitly anyway.
 */
export function defaultBindAddress(port: number, env: NodeJS.ProcessEnv = process.env): string {
  return env.KUBERNETES_SERVICE_HOST ? `:${port}` : `127.0.0.1:${port}`;
}
