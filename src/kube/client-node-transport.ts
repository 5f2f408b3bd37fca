// The transport for users whose credentials come from an exec or auth-provider plugin (OIDC, cloud providers), or
// clusters behind a proxy-url: @kubernetes/client-node implements those. It is imported only for such a
// kubeconfig (see connectionTransport), because loading the library costs tens of MiB and start-up time
// (docs/architecture.md).

import { IsomorphicFetchHttpLibrary, KubeConfig, RequestContext } from '@kubernetes/client-node';
import type { ConnectionConfig } from './kubeconfig.ts';
import type { HttpRequest, HttpResponse, Transport, TransportOptions } from './transport.ts';
import { queryString } from './wire.ts';

/**
 * Sends requests with @kubernetes/client-node's own fetch (undici) and its authentication: every request asks the
 * KubeConfig for headers (so exec credentials are refreshed when they expire), but the TLS dispatcher made for the
 * first request is reused. The library builds a new connection pool per call, which would mean a TLS handshake per
 * request; the trade-off is that a client certificate rotated on disk needs a restart.
 */
export function clientNodeTransport(conn: ConnectionConfig, options: TransportOptions = {}): Transport {
  const { cluster, user, context } = conn;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ ...cluster, skipTLSVerify: cluster.skipTLSVerify ?? false }],
    users: [user],
    contexts: [context],
    currentContext: context.name,
  });
  const server = cluster.server;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const http = new IsomorphicFetchHttpLibrary();
  let dispatcher: ReturnType<RequestContext['getDispatcher']>;
  let dispatcherChosen = false;

  return {
    server,
    async request(req: HttpRequest): Promise<HttpResponse> {
      const ctx = new RequestContext(server.replace(/\/+$/, '') + req.path + queryString(req.query), req.method);
      await kubeConfig.applySecurityAuthentication(ctx);
      if (!dispatcherChosen) {
        dispatcher = ctx.getDispatcher();
        dispatcherChosen = true;
      } else if (dispatcher !== undefined) {
        ctx.setDispatcher(dispatcher);
      }
      ctx.setHeaderParam('Accept', 'application/json');
      for (const [key, value] of Object.entries(req.headers ?? {})) ctx.setHeaderParam(key, value);
      if (req.body !== undefined) ctx.setBody(req.body);
      const signals = [req.signal, req.streaming ? undefined : AbortSignal.timeout(timeoutMs)].filter((s) => s !== undefined);
      if (signals.length > 0) ctx.setSignal(AbortSignal.any(signals));
      const resp = await http.send(ctx).toPromise();
      return {
        status: resp.httpStatusCode,
        headers: resp.headers,
        text: () => resp.body.text(),
        stream: () => resp.body.stream(),
      };
    },
  };
}
