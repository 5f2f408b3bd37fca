import { hostname } from 'node:os';
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * JSON logs on stdout (or the given stream), one object per line, so that a cluster's log pipeline can index
 * namespace/name/reconcileID without parsing prose.
 */
export function createLogger(level: LevelWithSilent = 'info', destination?: NodeJS.WritableStream): Logger {
  const options = {
    level,
    // `name` is the object a line is about (as in namespace/name); pino's logger `name` would be a second `name`
    // key in the same JSON line, which log pipelines resolve differently (first wins, last wins, or reject).
    base: { pid: process.pid, hostname: hostname(), logger: 'persistent-ips' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return destination ? pino(options, destination as pino.DestinationStream) : pino(options);
}
