// The body of main.ts's command-line parsing, run as a short-lived process of its own (see there why): the command
// line (JSON) on stdin, one answer (JSON) on stdout, then it exits. The environment is the parent's.
import { readFileSync } from 'node:fs';
import { UsageError } from './exit-codes.ts';
import { parseCommandLine, type ParsedCommand } from './parser.ts';

export interface ParseRequest {
  argv: string[];
  width: number;
}

export type ParseAnswer = { parsed: ParsedCommand; printed: string[] } | { usageError: { message: string; usage: string } };

const { argv, width } = JSON.parse(readFileSync(0, 'utf8')) as ParseRequest;
const printed: string[] = [];
let answer: ParseAnswer;
try {
  answer = { parsed: await parseCommandLine(argv, { width, print: (text) => printed.push(text) }), printed };
} catch (err) {
  // Anything else is a bug: the process fails with its stack on stderr, which main.ts reports.
  if (!(err instanceof UsageError)) throw err;
  answer = { usageError: { message: err.message, usage: err.usage } };
}
process.stdout.write(JSON.stringify(answer));
