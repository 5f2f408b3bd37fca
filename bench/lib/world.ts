// The one world starter of the benchmarks: a fresh local control plane (e2e/harness) with the KubeVirt CR, and the
// client the benchmark sets it up with.
import { readFileSync } from 'node:fs';
import { startControlPlane, type ControlPlane } from '../../e2e/harness/index.ts';
import { KubeHttp } from '../../e2e/harness/kubehttp.ts';
import { createKubeVirtCR } from './objects.ts';
import { trackExternal, untrackExternal } from './processes.ts';

export interface World {
  cp: ControlPlane;
  kube: KubeHttp;
  /** Closes the client and stops the control plane. */
  stop(): Promise<void>;
}

export async function startWorld(dir: string, onLog: (line: string) => void, maxSockets = 32): Promise<World> {
  const pids: number[] = [];
  const cp = await startControlPlane({
    dir,
    handleSignals: false,
    onLog,
    // Last resort (the harness kills them on exit too, but not once its stop() has begun).
    onProcess: (_name, pid) => {
      trackExternal([pid]);
      pids.push(pid);
    },
  });
  const kube = new KubeHttp({ server: cp.server, token: cp.token, ca: readFileSync(cp.caFile), maxSockets, timeoutMs: 120_000 });
  await createKubeVirtCR(kube);
  return {
    cp,
    kube,
    stop: async () => {
      kube.close();
      await cp.stop();
      // Once their owner has stopped them: their pids may be reused by unrelated processes.
      untrackExternal(pids);
    },
  };
}
