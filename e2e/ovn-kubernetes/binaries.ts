// OVN-Kubernetes' ovnkube, built by e2e/ovn-kubernetes/build.sh from the ovn-kubernetes source tarball into a cache
// outside the work tree. Like every binary of the suites: built in a step of its own (`npm run test:prepare`), never
// inside a test file, where a missing build is an error at once that names the command.
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildForbiddenHere, runBuildScript } from '../harness/binaries.ts';

export const OVNK_BUILD_SCRIPT = fileURLToPath(new URL('./build.sh', import.meta.url));

/**
 * Runs build.sh (`--check` where a build is forbidden: inside a test file or with PERSISTENT_IPS_NO_BUILD=1) and
 * returns the path of ovnkube. `PERSISTENT_IPS_OVNKUBE` short-cuts everything: the path of an ovnkube binary.
 */
export async function ensureOvnkube(onLog: (line: string) => void = () => {}): Promise<string> {
  const override = process.env['PERSISTENT_IPS_OVNKUBE'];
  const path = override || join(await runBuildScript(OVNK_BUILD_SCRIPT, "OVN-Kubernetes' ovnkube", !buildForbiddenHere(), onLog), 'ovnkube');
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`${path} is missing or not executable`);
  }
  return path;
}
