// `npm run test:prepare`: builds (or finds in the cache) every binary the end-to-end suites run, as a step of its own
// before any test file starts: never inside a test hook, never under a test timeout, and with its progress on the
// terminal (what it builds, the elapsed time, a line at least every 30 s). Exit code 0 when everything is ready.
//
// Each step is a build script that prints its progress on stderr and the directory of what it built as the last
// line of stdout, and keeps its own cache (keyed by what it builds from).
import { execFile } from 'node:child_process';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { runBuildScript } from './binaries.ts';
import { REPO_ROOT } from './paths.ts';

export interface PrepareStep {
  /** Its name in the progress lines (`prepare: [id] ready ...`), which `npm test` reads to start the e2e files waiting for it. */
  id: string;
  /** What a person reads: what is being built. */
  what: string;
  /**
   * Which e2e files need it: those whose own text or the text of a file they import (directly or not) matches. Absent:
   * every e2e file. `npm test` starts an e2e file as soon as the steps it needs are ready.
   */
  usedBy?: RegExp;
  script: string;
  /** The one binary the step builds, for the tools a test runs by name (preparedTool); with `--check`, the script prints its path when built and exits 3 when not. */
  tool?: 'helm' | 'promtool';
}

export const PREPARE_STEPS: PrepareStep[] = [
  {
    id: 'controlplane',
    what: 'control plane: etcd, kube-apiserver, kube-controller-manager, kubectl (from their Go modules)',
    script: fileURLToPath(new URL('../controlplane/build.sh', import.meta.url)),
  },
  {
    id: 'kubevirt',
    usedBy: /\bensureKubeVirtBinaries\(/,
    what: "KubeVirt v1.9.0: virt-controller and the CRDs virt-operator installs (from the source tarball's vendor/)",
    script: fileURLToPath(new URL('../kubevirt/build.sh', import.meta.url)),
  },
  {
    id: 'ovnkube',
    usedBy: /\bovnKubernetes: true\b/,
    what: "OVN-Kubernetes v1.3.0: ovnkube, run as the cluster manager (the IPAM of OVN-K networks) in e2e/kubevirt (from the source tarball's vendor/)",
    script: fileURLToPath(new URL('../ovn-kubernetes/build.sh', import.meta.url)),
  },
  {
    id: 'helm',
    usedBy: /\bpreparedTool\('helm'\)/,
    what: "helm (from its Go module helm.sh/helm/v3, through the control plane's module; e2e/install installs the chart with it)",
    script: fileURLToPath(new URL('../../scripts/helm/build.sh', import.meta.url)),
    tool: 'helm',
  },
  {
    id: 'promtool',
    usedBy: /\bpreparedTool\('promtool'\)/,
    what: 'promtool (from its Go module github.com/prometheus/prometheus; e2e/operability checks the alert rules with it)',
    script: fileURLToPath(new URL('../promtool/build.sh', import.meta.url)),
    tool: 'promtool',
  },
];

/**
 * The path of a tool a prepare step built, for a test file: never a build (that takes minutes and belongs before the
 * tests, with its progress shown). When it is not built, the error is one line naming the step that builds it.
 */
export async function preparedTool(tool: NonNullable<PrepareStep['tool']>): Promise<string> {
  const step = PREPARE_STEPS.find((s) => s.tool === tool);
  if (!step) throw new Error(`no prepare step builds ${tool}`);
  const script = relative(REPO_ROOT, step.script);
  try {
    const { stdout } = await promisify(execFile)('bash', [step.script, '--check']);
    return stdout.trim().split('\n').pop() ?? '';
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 3) {
      const notBuilt = new Error(`${tool} is not built: run \`npm run test:prepare\` (its step ${script} builds it; \`npm test\` runs that step first)`);
      // No stack: the test runner prints it under the message, and which test asked adds nothing to what to do.
      notBuilt.stack = `Error: ${notBuilt.message}`;
      throw notBuilt;
    }
    throw new Error(
      `${script} --check failed (${String(code)}): ${String((err as { stderr?: string }).stderr ?? '')
        .trim()
        .split('\n')
        .pop()}`,
    );
  }
}

const HEARTBEAT_MS = 25_000;

/** Runs one step with its progress lines, each with the elapsed time, and a line when it has been quiet for a while. */
async function runStep(step: PrepareStep, say: (line: string) => void): Promise<boolean> {
  const t0 = Date.now();
  const secs = (digits = 0) => ((Date.now() - t0) / 1000).toFixed(digits);
  say(`prepare: ${step.what}`);
  let last = Date.now();
  const heartbeat = setInterval(() => {
    if (Date.now() - last >= HEARTBEAT_MS) {
      say(`prepare: ... still working (${secs()} s)`);
      last = Date.now();
    }
  }, 1000);
  try {
    const dir = await runBuildScript(step.script, step.what, true, (line) => {
      last = Date.now();
      say(`  [${secs()} s] ${line}`);
    });
    say(`prepare: [${step.id}] ready in ${secs(1)} s: ${dir}`);
    return true;
  } catch (err) {
    say(`prepare: [${step.id}] FAILED after ${secs(1)} s: ${err instanceof Error ? err.message : String(err)}`);
    return false;
  } finally {
    clearInterval(heartbeat);
  }
}

/**
 * Runs the steps one after another, in their order, and stops at the first that fails. One at a time, not side by
 * side: each build is a `go build` that keeps both cores busy on its own, and a step built beside the one nearly every
 * file waits for only delays it. Measured in a cold `npm test` on 2 cores (2026-11-27): while ovnkube built beside
 * them, KubeVirt's print-crds took 288 s, and virt-controller, after ovnkube was done, 61 s. The steps that one or two
 * files need come last; those files wait for them while the others run, and the builds take the CPU they leave.
 */
export async function prepare(say: (line: string) => void = (l) => process.stdout.write(`${l}\n`), steps: PrepareStep[] = PREPARE_STEPS): Promise<boolean> {
  for (const [i, step] of steps.entries()) {
    if (await runStep(step, say)) continue;
    const rest = steps.slice(i + 1).map((s) => s.id);
    if (rest.length > 0) say(`prepare: not built, after [${step.id}] failed: ${rest.map((id) => `[${id}]`).join(' ')}`);
    return false;
  }
  return true;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const ok = await prepare();
  process.exitCode = ok ? 0 : 1;
}
