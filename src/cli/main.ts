#!/usr/bin/env node
// The only place that talks to a person: parses flags, runs a command, turns failures into one line and an exit
// code. Anything a user can cause (bad flags, a missing file, a busy port, an unreachable cluster) is a CliError with
// its own message; a stack trace means a bug, and is printed only then.

import './require-node.ts'; // first: see why there
import { CliError, EXIT, UsageError } from './exit-codes.ts';
import { parseRunFast } from './run-flags.ts';
import { run } from './run.ts';
import { status } from './status.ts';

async function main(argv: string[]): Promise<number> {
  // The Deployment's command line never needs yargs, which would stay loaded for the life of the process
  // (run-flags.ts); everything else, help and errors included, goes through it.
  const fast = parseRunFast(argv, process.env);
  const parsed = fast
    ? ({ command: 'run', options: fast } as const)
    : await (await import('./parser.ts')).parseCommandLine(argv, { width: Math.min(120, process.stdout.columns || 120) });
  switch (parsed.command) {
    case 'run':
      return run(parsed.options);
    case 'status':
      return status(parsed.options, process.stdout);
    case 'none':
      return EXIT.ok;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`persistent-ips: ${err.message}\n\n${err.usage}\n`);
      process.exit(err.exitCode);
    }
    if (err instanceof CliError) {
      process.stderr.write(`persistent-ips: ${err.message}\n`);
      process.exit(err.exitCode);
    }
    process.stderr.write(`persistent-ips: unexpected failure (a bug; please report it with this output): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(EXIT.failure);
  },
);
