// What we ship is what we measure: the controller's flags and environment (NODE_OPTIONS, MALLOC_ARENA_MAX, …) come
// from the shipped Deployment
// (manifests/controller/deployment.yaml), with only the in-cluster paths replaced by local ones.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { load } from 'js-yaml';
import { parseCommandLine } from '../../src/cli/parser.ts';

export const DEPLOYMENT_FILE = fileURLToPath(new URL('../../manifests/controller/deployment.yaml', import.meta.url));

interface Container {
  name: string;
  args?: string[];
  env?: { name: string; value?: string }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}

export function shippedController(file = DEPLOYMENT_FILE) {
  const doc = load(readFileSync(file, 'utf8')) as { spec: { template: { spec: { containers: Container[] } } } };
  const c = doc.spec.template.spec.containers.find((x) => x.name === 'controller');
  if (!c) throw new Error(`${file}: no container named controller`);
  return {
    /** The container's args, e.g. ['run', '--leader-elect', '--metrics-bind-address=:8080', ...]. */
    args: c.args ?? [],
    /** The container's NODE_OPTIONS value ('' when unset). */
    nodeOptions: c.env?.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '',
    /** Every env entry of the container with a literal value (NODE_OPTIONS included); fieldRefs are left out. */
    env: Object.fromEntries((c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!])),
    /** resources.requests / limits as written, e.g. { memory: '256Mi' }. */
    requests: c.resources?.requests ?? {},
    limits: c.resources?.limits ?? {},
  };
}

/** "256Mi" → MiB. */
export function quantityMiB(q: string | undefined): number | undefined {
  if (!q) return undefined;
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(q);
  if (!m) return undefined;
  const n = Number(m[1]);
  const f: Record<string, number> = { Ki: 1 / 1024, Mi: 1, Gi: 1024, K: 1000 / 2 ** 20, M: 1e6 / 2 ** 20, G: 1e9 / 2 ** 20 };
  return m[2] ? n * f[m[2]]! : n / 2 ** 20;
}

/** The flag's name (`--x=y` or `--x`), for replacing the in-cluster values of some. */
const flagName = (a: string): string => a.split('=')[0]!;

/**
 * The Deployment's args with what only makes sense in a pod replaced: bind addresses become 127.0.0.1 ports and
 * the certificate directory a temp dir. `overrides` (flag → value) replace or add flags; a value of undefined
 * removes the flag.
 */
export function localArgs(shipped: string[], overrides: Record<string, string | undefined>): string[] {
  const set = (name: string): string[] => (overrides[name] === undefined ? [] : [`${name}=${overrides[name]}`]);
  const kept = shipped.flatMap((a) => (flagName(a) in overrides ? set(flagName(a)) : [a]));
  const added = Object.keys(overrides).filter((name) => !shipped.some((a) => flagName(a) === name));
  return [...kept, ...added.flatMap(set)];
}

/**
 * --concurrency, --qps and --burst as the shipped Deployment's controller has them (its args over the CLI
 * defaults), parsed by the CLI's own parser so that the limit client follows any change of either.
 */
export async function shippedClientSettings(shipped = shippedController()): Promise<{ concurrency: number; qps: number; burst: number }> {
  const parsed = await parseCommandLine(shipped.args, { env: {}, print: () => undefined });
  if (parsed.command !== 'run') throw new Error(`the Deployment's args are not a run command: ${shipped.args.join(' ')}`);
  return { concurrency: parsed.options.concurrency, qps: parsed.options.qps, burst: parsed.options.burst };
}
