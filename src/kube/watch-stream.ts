// A watch response is newline-delimited JSON, one `{type, object}` per line, possibly split across chunks.

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent<T = unknown> {
  type: WatchEventType;
  /** The object; for ERROR a Status; for BOOKMARK an object with only metadata.resourceVersion meaningful. */
  object: T;
}

const TYPES = new Set<string>(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']);

/** Thrown for a line that is not a watch event: the stream is corrupt and must be reopened. */
export class WatchDecodeError extends Error {
  override readonly name: string = 'WatchDecodeError';
}

export function parseWatchLine(line: string): WatchEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (err) {
    throw new WatchDecodeError(`watch stream: undecodable line: ${line.slice(0, 200)}`, { cause: err });
  }
  const ev = parsed as { type?: unknown; object?: unknown };
  if (!ev || typeof ev !== 'object' || typeof ev.type !== 'string' || !TYPES.has(ev.type) || typeof ev.object !== 'object' || ev.object === null) {
    throw new WatchDecodeError(`watch stream: not a watch event: ${line.slice(0, 200)}`);
  }
  return { type: ev.type as WatchEventType, object: ev.object };
}

/**
 * Yields the events of a watch body until it ends. Abandoning the iteration cancels the body; to interrupt a read
 * that is waiting for data, abort the request's signal.
 */
export async function* parseWatchStream(body: ReadableStream<Uint8Array>): AsyncGenerator<WatchEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (line) yield parseWatchLine(line);
      }
    }
    buffer += decoder.decode();
    const rest = buffer.trim();
    if (rest) yield parseWatchLine(rest);
    finished = true;
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
    try {
      reader.releaseLock();
    } catch {
      // Already released by a failed read; nothing to give back.
    }
  }
}
