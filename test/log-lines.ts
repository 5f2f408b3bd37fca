import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../src/telemetry/logger.ts';

export type LogLine = { level: string; msg: string } & Record<string, unknown>;

/** A logger at `level` whose JSON lines are kept: as written (`texts`) and parsed (`lines`). */
export function capturingLogger(level: 'debug' | 'info' = 'debug'): { log: Logger; texts: string[]; lines: LogLine[] } {
  const texts: string[] = [];
  const lines: LogLine[] = [];
  const sink = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      for (const text of chunk.toString('utf8').split('\n').filter(Boolean)) {
        texts.push(text);
        lines.push(JSON.parse(text) as LogLine);
      }
      done();
    },
  });
  return { log: createLogger(level, sink), texts, lines };
}
