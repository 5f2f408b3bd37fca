// Where the harness finds the pieces of the repository it uses, and the versions pinned by the wrapper Go module.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BUILD_SCRIPT = fileURLToPath(new URL('../controlplane/build.sh', import.meta.url));
/** Test infrastructure: stand-in KubeVirt and NAD CRDs plus the shipped IPAMClaim CRD (e2e/crds/kustomization.yaml). */
export const CRDS_DIR = fileURLToPath(new URL('../crds/', import.meta.url));
/** The IPAMClaim CRD the project ships (the optional manifests/ipamclaim-crd). */
export const IPAMCLAIM_CRD = fileURLToPath(new URL('../../manifests/ipamclaim-crd/ipamclaims.k8s.cni.cncf.io.yaml', import.meta.url));
export const CLI_SCRIPT = fileURLToPath(new URL('./cli.ts', import.meta.url));

export interface PinnedVersions {
  /** e.g. `v1.34.2`: what `/version` reports as gitVersion. */
  kubernetes: string;
  /** e.g. `v3.6.4`. */
  etcd: string;
}

let pinned: PinnedVersions | undefined;

/** The versions required by e2e/controlplane/go.mod (the single place they are pinned). */
export function pinnedVersions(): PinnedVersions {
  if (pinned) return pinned;
  const goMod = readFileSync(new URL('../controlplane/go.mod', import.meta.url), 'utf8');
  const find = (module: string): string => {
    const re = new RegExp(`^\\s*${module.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\s+(v\\S+)`, 'm');
    const m = re.exec(goMod);
    if (!m?.[1]) throw new Error(`e2e/controlplane/go.mod does not require ${module}`);
    return m[1];
  };
  pinned = { kubernetes: find('k8s.io/kubernetes'), etcd: find('go.etcd.io/etcd/server/v3') };
  return pinned;
}
