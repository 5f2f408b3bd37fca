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
 * Yields the events of a watch body until it ends. Abandoning the iteration closes the body; to interrupt a read
 * that is waiting for data, abort the request's signal. Only the current, incomplete line is kept between chunks,
 * so memory is bounded by the largest single event, not by the stream.
 */
export async function* parseWatchStream(body: AsyncIterable<Uint8Array>): AsyncGenerator<WatchEvent> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of body) {
    const text = pending + decoder.decode(chunk, { stream: true });
    let start = 0;
    let nl: number;
    while ((nl = text.indexOf('\n', start)) >= 0) {
      const line = text.slice(start, nl).trim();
      start = nl + 1;
      if (line) yield parseWatchLine(line);
    }
    pending = start === 0 ? text : text.slice(start);
  }
  const rest = (pending + decoder.decode()).trim();
  if (rest) yield parseWatchLine(rest);
}
