// KubeVirt's virt-controller and CRDs, built by e2e/kubevirt/build.sh from the KubeVirt source tarball into a cache
// outside the work tree. Like the control-plane binaries: built in a step of its own (`npm run test:prepare`), never
// inside a test file, where a missing build is an error at once that names the command.
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildForbiddenHere, runBuildScript } from '../harness/binaries.ts';

export const KUBEVIRT_BUILD_SCRIPT = fileURLToPath(new URL('./build.sh', import.meta.url));

export interface KubeVirtBinaries {
  virtController: string;
  /** Every CRD virt-operator installs, as KubeVirt v1.9.0 generates them (multi-document YAML). */
  crdsYaml: string;
}

const binariesIn = (binDir: string): KubeVirtBinaries => ({ virtController: join(binDir, 'virt-controller'), crdsYaml: join(binDir, 'kubevirt-crds.yaml') });

/**
 * Runs build.sh (with `--check` where a build is forbidden: inside a test file or with PERSISTENT_IPS_NO_BUILD=1) and
 * returns what it built. `PERSISTENT_IPS_KUBEVIRT_BIN` short-cuts everything: a directory holding virt-controller
 * and kubevirt-crds.yaml.
 */
export async function ensureKubeVirtBinaries(onLog: (line: string) => void = () => {}): Promise<KubeVirtBinaries> {
  const override = process.env['PERSISTENT_IPS_KUBEVIRT_BIN'];
  if (override) return binariesIn(override);
  const bins = binariesIn(await runBuildScript(KUBEVIRT_BUILD_SCRIPT, "KubeVirt's virt-controller", !buildForbiddenHere(), onLog));
  for (const p of [bins.virtController, bins.crdsYaml]) {
    try {
      accessSync(p, constants.R_OK);
    } catch {
      throw new Error(`${p} is missing after the build`);
    }
  }
  return bins;
}
