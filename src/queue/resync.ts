// A periodic full pass over every known key. Level-triggered reconciles make it safe (a steady state costs reads
// only), and it repairs anything a missed or mis-mapped event left behind.

import { pino, type Logger } from 'pino';
import { type Clock, type TimerHandle, realClock } from '../kube/clock.ts';

export interface ResyncOptions {
  /** Time between passes; the first pass happens one interval after start. */
  intervalMs: number;
  /** The keys to add on each pass, read afresh every time (e.g. from an informer cache). */
  keys: () => Iterable<string>;
  clock?: Clock;
  logger?: Logger;
}

export interface Resync {
  stop(): void;
}

export function startResync(queue: { add(key: string, options?: { priority?: 'low' }): void }, options: ResyncOptions): Resync {
  if (!(options.intervalMs > 0)) throw new RangeError(`resync interval must be positive, got ${options.intervalMs}`);
  const clock = options.clock ?? realClock;
  const logger = options.logger ?? pino({ level: 'silent' });
  let stopped = false;
  let timer: TimerHandle | undefined;

  const schedule = (): void => {
    timer = clock.setTimeout(pass, options.intervalMs);
  };
  const pass = (): void => {
    timer = undefined;
    if (stopped) return;
    let n = 0;
    try {
      for (const key of options.keys()) {
        // Behind anything that changed: a pass repairs what was missed, it must not delay what is happening.
        queue.add(key, { priority: 'low' });
        n++;
      }
      logger.debug({ keys: n }, 'resync');
    } catch (err) {
      // A failing key source must not end resync for good; the next pass may well succeed.
      logger.error({ err }, 'resync pass failed');
    }
    schedule();
  };
  schedule();
  return {
    stop(): void {
      stopped = true;
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
    },
  };
}
