// Smoke test of the container image without a container runtime (issue 12): the image's root filesystem, unpacked
// from its OCI archive by scripts/image/unpack.sh, runs its own entrypoint under chroot as the image's user, with the
// args and env of the installed Deployment (install.yaml of the release, or manifests/default), the service-account
// files a pod gets, against a local control plane. It must become ready and create the claim of a new VM.
//
// Not a *.test.ts file: it needs root (chroot) and a built image, so scripts/image/smoke.sh (called by .ci/run)
// builds and unpacks the image and then runs `node --test e2e/install/image-smoke.ts` with
//   PERSISTENT_IPS_IMAGE_DIR      the unpack directory (rootfs/ and config.json)
//   PERSISTENT_IPS_INSTALL_YAML   optional: the install.yaml to apply (default: kubectl kustomize manifests/default)
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startControlPlane, type ControlPlane } from '../harness/index.ts';
import { REPO_ROOT } from '../local/controller-process.ts';
import { expectClaimFor, kustomize, launchChroot, readInstalled, waitReady, type Launched } from './installed.ts';

interface ImageConfig {
  config: {
    ExposedPorts?: Record<string, object>;
    User?: string;
    Entrypoint?: string[];
    Cmd?: string[];
    WorkingDir?: string;
    Env?: string[];
    Labels?: Record<string, string>;
  };
}

describe('container image: the unpacked rootfs runs under chroot against a local control plane', { timeout: 5 * 60_000 }, () => {
  const imageDir = process.env['PERSISTENT_IPS_IMAGE_DIR'];
  let cp: ControlPlane | undefined;
  let dir: string;
  let controller: Launched | undefined;

  before(
    async () => {
      assert.ok(imageDir, 'PERSISTENT_IPS_IMAGE_DIR is set (scripts/image/smoke.sh sets it)');
      assert.equal(process.getuid?.(), 0, 'chroot needs root');
      dir = mkdtempSync(join(tmpdir(), 'persistent-ips-image-smoke-'));
      cp = await startControlPlane({ dir: join(dir, 'cp') });
    },
    { timeout: 180_000 },
  );

  after(
    async () => {
      await controller?.stop();
      await cp?.stop();
      if (dir && !process.env['PERSISTENT_IPS_E2E_KEEP']) rmSync(dir, { recursive: true, force: true });
    },
    { timeout: 60_000 },
  );

  it('the image configuration: non-root user, entrypoint, OCI labels of this version and revision', () => {
    assert.ok(imageDir);
    const cfg = JSON.parse(readFileSync(join(imageDir, 'config.json'), 'utf8')) as ImageConfig;
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string; license: string };
    assert.equal(cfg.config.User, '65532:65532');
    assert.deepEqual(cfg.config.Entrypoint, ['/usr/local/bin/node', '/app/dist/cli/main.js']);
    assert.deepEqual(cfg.config.Cmd, ['run']);
    const labels = cfg.config.Labels ?? {};
    assert.equal(labels['org.opencontainers.image.version'], pkg.version);
    assert.equal(labels['org.opencontainers.image.licenses'], pkg.license);
    assert.match(labels['org.opencontainers.image.revision'] ?? '', /^[0-9a-f]{40}(-dirty)?$/);
    assert.match(labels['org.opencontainers.image.source'] ?? '', /^https:\/\//);
  });

  it('the application is the bundle alone, with the licences of the packages bundled into it', () => {
    assert.ok(imageDir);
    const app = join(imageDir, 'rootfs', 'app');
    assert.equal(existsSync(join(app, 'node_modules')), false, 'no node_modules: the bundle carries its dependencies');
    const notices = readFileSync(join(app, 'dist', 'THIRD-PARTY-NOTICES.txt'), 'utf8');
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    // Every dependency is bundled (the build fails otherwise); each must come with its licence.
    const names = Object.keys(pkg.dependencies);
    assert.ok(names.includes('prom-client') && names.includes('pino'), 'the dependencies are read');
    for (const name of names) {
      assert.match(notices, new RegExp(`^${name.replace(/[/@.-]/g, '\\$&')}@\\d+\\.\\d+\\.\\d+\\S* \\(`, 'm'), `${name} is listed`);
    }
  });

  it('the entrypoint, run with the installed Deployment args as uid 65532, becomes ready and creates a claim', async () => {
    assert.ok(cp && imageDir);
    const cfg = JSON.parse(readFileSync(join(imageDir, 'config.json'), 'utf8')) as ImageConfig;
    const installYaml = process.env['PERSISTENT_IPS_INSTALL_YAML'];
    const manifest = installYaml ? readFileSync(installYaml, 'utf8') : await kustomize(cp, 'default');
    await cp.kubectl(['apply', '--server-side', '-f', '-'], { input: manifest });
    const spec = await readInstalled(cp);
    const labels = cfg.config.Labels ?? {};
    assert.ok(spec.image.endsWith(`:v${labels['org.opencontainers.image.version']}`), `the install names this image's version (${spec.image})`);
    assert.deepEqual(Object.keys(cfg.config.ExposedPorts ?? {}).sort(), [...spec.ports].sort(), "the image exposes the Deployment's container ports");
    // The pod's working directory and the image's Env (PATH, NODE_ENV) under the Deployment's own env.
    const imageEnv = Object.fromEntries((cfg.config.Env ?? []).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
    controller = await launchChroot(
      cp,
      { ...spec, env: { ...imageEnv, ...spec.env } },
      join(imageDir, 'rootfs'),
      cfg.config.Entrypoint ?? [],
      cfg.config.User ?? '',
      join(dir, 'controller.log'),
    );
    await waitReady(controller);
    const { claim, vmUid } = await expectClaimFor(cp, 'vm-image', controller);
    assert.equal(claim.metadata.ownerReferences?.find((r) => r.kind === 'VirtualMachine')?.uid, vmUid);
    const log = readFileSync(controller.logFile, 'utf8');
    assert.match(log, /"level":(30|"info")/, 'JSON log lines from the image');
    await controller.stop();
    assert.equal(controller.proc.exitCode, 0, `stops cleanly on SIGTERM (log: ${controller.logFile})`);
  });
});
