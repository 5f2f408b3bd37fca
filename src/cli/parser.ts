// The command line, parsed strictly: an unknown flag, a stray argument, a repeated single-valued flag or a value out
// of range is a usage error (exit 2, one line and the command's usage), never something to warn about and run anyway.
// Parsing runs nothing and reads only the package's own package.json (for --version), so every rule here is
// unit-tested; main.ts runs what it returns.

import { createRequire } from 'node:module';
import yargs, { type Argv } from 'yargs';
import { UsageError } from './exit-codes.ts';
import { bad, BadValue, camelOptions, checkRunArgs, rejectRepeats, runFlags, toRunOptions } from './run-flags.ts';
import type { RunOptions } from './run-flags.ts';
import type { StatusOptions } from './status.ts';

export const EPILOG = `Exit codes: 0 ok, 1 failure, 2 bad flags, 3 no kubeconfig found, 4 cluster unreachable, 5 credentials rejected.

The PersistentIPs feature gate: --feature-gates wins when it names the gate; otherwise the KubeVirt CR's
spec.configuration.developerConfiguration.featureGates decides, live; with neither, the gate is off.`;

export type ParsedCommand =
  | { command: 'run'; options: RunOptions }
  | { command: 'status'; options: StatusOptions }
  /** --help or --version: already printed. */
  | { command: 'none' };

export { UsageError };

function statusBuilder(y: Argv) {
  return y
    .positional('vm', { type: 'string', describe: 'Only this VM (or standalone VMI)' })
    .option('kubeconfig', { type: 'string', requiresArg: true, describe: 'Kubeconfig file. Default: in-cluster, then $KUBECONFIG, then ~/.kube/config' })
    .option('context', { type: 'string', requiresArg: true, describe: 'Kubeconfig context to use instead of the current one' })
    .option('namespace', { alias: 'n', type: 'string', requiresArg: true, describe: "Namespace to show. Default: the context's namespace, then default" })
    .option('all-namespaces', { alias: 'A', type: 'boolean', default: false, describe: 'Show every namespace' })
    .option('networks', {
      type: 'boolean',
      default: false,
      describe: "One line per persistent network: subnets, capacity, held, free, pending and refused claims (the namespace's networks, or every one with -A)",
    })
    .option('output', {
      alias: 'o',
      type: 'string',
      requiresArg: true,
      default: 'table',
      choices: ['table', 'json'],
      describe: 'table for people, json for scripts',
    })
    .check((a) => {
      rejectRepeats(a, ['kubeconfig', 'context', 'namespace', 'all-namespaces', 'output', 'vm', 'networks']);
      bad(a.networks && a.vm !== undefined, '--networks shows networks, not one VM: leave out the VM name');
      for (const name of ['kubeconfig', 'context', 'namespace'] as const) bad(a[name] === '', `--${name} must not be empty`);
      bad(a.namespace !== undefined && a['all-namespaces'], '--namespace and --all-namespaces exclude each other');
      return true;
    });
}

/**
 * The package's version, from its package.json two folders up: from src/cli/ as from the bundle in dist/cli/ (and the
 * image's /app/dist/cli/). yargs would look for a package.json from its own location, which inside the bundle is no
 * longer under node_modules, so it searched from the working directory and printed another project's version.
 */
function packageVersion(): string {
  const pkg = createRequire(import.meta.url)('../../package.json') as { name?: string; version?: string };
  if (pkg.name !== 'persistent-ips' || !pkg.version) throw new Error('persistent-ips: its package.json was not found two folders above its code');
  return pkg.version;
}

/**
 * Parses `argv` (without node and the script). Help and version go to `print`; anything wrong throws UsageError.
 * `env` decides the default bind addresses (in a pod or not).
 */
export async function parseCommandLine(
  argv: readonly string[],
  options: { env?: NodeJS.ProcessEnv; print?: (text: string) => void; width?: number } = {},
): Promise<ParsedCommand> {
  const env = options.env ?? process.env;
  const print = options.print ?? ((text: string) => process.stdout.write(`${text}\n`));
  let chosen: ParsedCommand = { command: 'none' };
  let failure: UsageError | undefined;
  const parser = yargs()
    // Messages in English whatever LANG says, like every other line this CLI prints; the bundle does not carry
    // yargs' translations (the unbundled build would have answered in the user's language).
    .locale('en')
    .scriptName('persistent-ips')
    .usage(
      '$0 <command> [options]\n\nStable IP addresses for KubeVirt VMs: keeps an IPAMClaim per VM network whose NetworkAttachmentDefinition allows persistent IPs.',
    )
    // One spelling per flag: unknown-flag messages name what was typed, and --leaderElect is not a second name.
    .parserConfiguration({ 'camel-case-expansion': false })
    .command(
      'run',
      'Run the controller against a cluster (until SIGINT/SIGTERM)',
      (y) =>
        y.options(runFlags(env)).check((a) => {
          checkRunArgs(a);
          return true;
        }),
      (a) => {
        chosen = { command: 'run', options: toRunOptions(a) };
      },
    )
    .command(
      'status [vm]',
      "Show each VM's networks with their IPAMClaim, addresses, IPsAllocated condition and owner (docs/status.md)",
      statusBuilder,
      (a) => {
        const options = camelOptions(a, ['kubeconfig', 'context', 'namespace', 'vm', 'all-namespaces']);
        chosen = { command: 'status', options: { ...options, ...(a.networks ? { networks: true } : {}), output: a.output as 'table' | 'json' } };
      },
    )
    .demandCommand(1, 'name a command: run or status')
    .strict()
    .epilog(EPILOG)
    .wrap(options.width ?? 120)
    .exitProcess(false)
    .help()
    .version(packageVersion())
    .fail((message, err, y) => {
      // Rethrowing ends parsing at once: nothing runs with flags that were not understood.
      let usage = '';
      y.showHelp((text: string) => (usage = text));
      failure = new UsageError(oneLine(err instanceof BadValue || !message ? (err?.message ?? 'invalid arguments') : message), usage);
      throw failure;
    });
  // With a parse callback, yargs hands over the help or version text instead of printing it.
  let output = '';
  try {
    await parser.parseAsync([...argv], {}, (_err: unknown, _argv: unknown, text: string) => {
      output = text;
    });
  } catch (err) {
    if (failure) throw failure;
    throw err;
  }
  if (output !== '') print(output);
  return chosen;
}

function oneLine(message: string): string {
  const text = message.replace(/\s*\n\s*/g, ' ').trim();
  return text.charAt(0).toLowerCase() + text.slice(1);
}
