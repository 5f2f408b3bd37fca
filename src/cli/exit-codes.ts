/** Exit codes of `persistent-ips`, documented in --help, so scripts and probes can tell failures apart. */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  noKubeconfig: 3,
  clusterUnreachable: 4,
  notAuthorized: 5,
} as const;
