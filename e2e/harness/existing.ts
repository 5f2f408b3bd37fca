// Tests can run against a cluster that already exists (PERSISTENT_IPS_EXISTING_KUBECONFIG) instead of starting one.
import { KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import type { Cluster } from './controlplane.ts';
import { runKubectl } from './kubectl.ts';
import { KubeHttp, type KubeHttpOptions } from './kubehttp.ts';

export const EXISTING_KUBECONFIG_ENV = 'PERSISTENT_IPS_EXISTING_KUBECONFIG';

/** A handle on the cluster of a kubeconfig (its current context). stop() does nothing. */
export async function connectToCluster(kubeconfigPath: string): Promise<Cluster> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster) throw new Error(`${kubeconfigPath}: no current cluster`);
  const b64 = (s: string) => Buffer.from(s, 'base64');
  const opts: KubeHttpOptions = { server: cluster.server, insecure: cluster.skipTLSVerify };
  if (cluster.caData) opts.ca = b64(cluster.caData);
  else if (cluster.caFile) opts.ca = readFileSync(cluster.caFile);
  if (user?.token) opts.token = user.token;
  if (user?.certData) opts.cert = b64(user.certData);
  else if (user?.certFile) opts.cert = readFileSync(user.certFile);
  if (user?.keyData) opts.key = b64(user.keyData);
  else if (user?.keyFile) opts.key = readFileSync(user.keyFile);
  if (!opts.token && !opts.cert && (user?.exec || user?.authProvider)) {
    throw new Error(`${kubeconfigPath}: exec/auth-provider users are not supported by the harness; use a token or a client certificate`);
  }
  const http = new KubeHttp(opts);
  const res = await http.expect('GET', '/version', [200]);
  return {
    kubeconfigPath,
    server: cluster.server,
    version: res.json<{ gitVersion: string }>().gitVersion,
    http,
    kubectl: (args, o = {}) => runKubectl(args, { ...o, kubeconfig: kubeconfigPath }),
    owned: false,
    stop: async () => {},
  };
}
