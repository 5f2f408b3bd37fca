/** Exit codes of `persistent-ips`, documented in --help, so scripts and probes can tell failures apart. */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  noKubeconfig: 3,
  clusterUnreachable: 4,
  notAuthorized: 5,
} as const;

/** A failure the CLI turns into one line for a person and a distinct exit code (no stack trace). */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number, options?: { cause?: unknown }) {
    super(message, options);
    this.exitCode = exitCode;
  }
}

/** Bad flags: the one-line reason, and the usage of the command they were given to. */
export class UsageError extends CliError {
  readonly usage: string;
  constructor(message: string, usage: string) {
    super(message, EXIT.usage);
    this.usage = usage;
  }
}
