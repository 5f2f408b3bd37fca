// What `run` is told: the checked flags (run-flags.ts makes them), apart from the modules that use them, so that
// run.ts and run-servers.ts share them without importing each other.

export interface RunOptions {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  concurrency: number;
  featureGates?: string;
  logLevel: string;
  leaderElect: boolean;
  controllerNamespace?: string;
  metricsBindAddress: string;
  healthProbeBindAddress: string;
  qps: number;
  burst: number;
  resyncPeriod: number;
  gracefulShutdownTimeout: number;
  webhookBindAddress: string;
  /** `self`: the controller keeps its own CA and serving certificate in a Secret; `external`: files (cert-manager). */
  webhookCertProvisioning: 'self' | 'external';
  webhookCertDir: string;
  webhookServiceName: string;
  webhookConfigurationName: string;
  /** Extra names / IPs in the self-made serving certificate (e.g. 127.0.0.1 when the API server calls a URL). */
  webhookCertHosts: string[];
  /** Validity of self-made serving certificates, in seconds (rotated at 2/3 of it). */
  webhookCertValidity?: number;
  webhookCaValidity?: number;
  /** Run the built-in allocator for NADs that opt in (docs/allocator.md). Default true. */
  allocator?: boolean;
  /** The cluster default network NAD named in a primary UDN's default-network element (--default-network-nad). */
  defaultNetworkNad?: { namespace: string; name: string };
  /** /metrics over HTTPS, each request authenticated and authorised by the cluster (default true). */
  metricsSecure?: boolean;
  /** tls.crt and tls.key of the secure metrics server; default: a self-signed certificate made at start. */
  metricsCertDir?: string;
  /** VersionTLS12 or VersionTLS13 (default VersionTLS12). */
  tlsMinVersion?: string;
  /** IANA names; empty: the AEAD-only default. */
  tlsCipherSuites?: string[];
}
