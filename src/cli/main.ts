#!/usr/bin/env node
// The only place that talks to a person: parses flags, runs a command, turns failures into one line and an exit
// code. Anything a user can cause (bad flags, a missing file, a busy port, an unreachable cluster) is a CliError with
// its own message; a stack trace means a bug, and is printed only then.

import './require-node.ts'; // first: see why there
import { fileURLToPath } from 'node:url';
import { CliError, EXIT, UsageError } from './exit-codes.ts';
import type { ParseAnswer, ParseRequest } from './parse-worker.ts';
import type { ParsedCommand } from './parser.ts';
import { run } from './run.ts';
import { status } from './status.ts';
import { askJsonChild } from '../child/json-child.ts';

async function main(argv: string[]): Promise<number> {
  const parsed = await parseInChild({ argv, width: Math.min(120, process.stdout.columns || 120) });
  switch (parsed.command) {
    case 'run':
      return run(parsed.options);
    case 'status':
      return status(parsed.options, process.stdout);
    case 'none':
      return EXIT.ok;
  }
}

/**
 * parser.ts (yargs) in a short-lived child process (child/json-child.ts says why): the controller lives for weeks with
 * the Deployment's command line, parsed once, and would otherwise keep yargs resident all that time.
 */
async function parseInChild(request: ParseRequest): Promise<ParsedCommand> {
  // The build puts parse-worker.js beside main.js (scripts/build.ts); from the sources, it is the .ts file.
  const entry = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './parse-worker.ts' : './parse-worker.js', import.meta.url));
  const answer = await askJsonChild<ParseAnswer>(entry, request, 'the command-line parsing process');
  if ('usageError' in answer) throw new UsageError(answer.usageError.message, answer.usageError.usage);
  for (const text of answer.printed) process.stdout.write(`${text}\n`);
  return answer.parsed;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof CliError) {
      process.stderr.write(`persistent-ips: ${err.message}\n${err instanceof UsageError ? `\n${err.usage}\n` : ''}`);
      process.exit(err.exitCode);
    }
    process.stderr.write(
      `persistent-ips: unexpected failure (a bug; please report it with this output): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(EXIT.failure);
  },
);
