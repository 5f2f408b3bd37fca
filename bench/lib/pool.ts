import { setTimeout as sleep } from 'node:timers/promises';

// Runs `fn` over `items` with at most `concurrency` calls at once; the first failure stops the rest and is thrown.
export async function runPool<T>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: unknown;
  const worker = async (): Promise<void> => {
    while (failed === undefined && next < items.length) {
      const i = next++;
      try {
        await fn(items[i]!, i);
      } catch (err) {
        failed ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  if (failed !== undefined) throw failed;
}

/**
 * Starts `fn(i, sentAt)` for i < `total` at `rate` a second (from 50 ms on), without waiting for one to finish; then
 * waits for all and throws if any failed. Returns when each started, the start `t0`, how long the starts took and the
 * largest delay of a start behind its slot (the generator's own lateness), ms.
 */
export async function paced(
  total: number,
  rate: number,
  fn: (i: number, sentAt: number) => Promise<void>,
): Promise<{ t0: number; sentAt: number[]; seconds: number; maxLagMs: number }> {
  const sentAt: number[] = new Array(total);
  const inflight: Promise<void>[] = [];
  const failures: string[] = [];
  let maxLagMs = 0;
  const t0 = performance.now() + 50;
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    maxLagMs = Math.max(maxLagMs, performance.now() - due);
    const sent = performance.now();
    sentAt[i] = sent;
    inflight.push(fn(i, sent).catch((err: unknown) => void failures.push(err instanceof Error ? err.message : String(err))));
  }
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(inflight);
  if (failures.length > 0) throw new Error(`${failures.length} VM creations failed, e.g. ${failures[0]}`);
  return { t0, sentAt, seconds, maxLagMs };
}
