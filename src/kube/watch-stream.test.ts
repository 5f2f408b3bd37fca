import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { WatchDecodeError, parseWatchLine, parseWatchStream } from './watch-stream.ts';
import { escapeJsonPointer, removeFinalizerPatch } from './patch.ts';
import { listAllPages } from './pager.ts';
import { KubeApiError } from './errors.ts';

async function* bytes(chunks: (string | Uint8Array)[]): AsyncGenerator<Uint8Array> {
  for (const x of chunks) yield typeof x === 'string' ? new TextEncoder().encode(x) : x;
}

async function collect(s: AsyncIterable<Uint8Array>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const e of parseWatchStream(s)) out.push(e);
  return out;
}

describe('parseWatchStream', () => {
  it('handles lines split anywhere, blank lines and a last line without newline', async () => {
    const got = await collect(bytes(['{"type":"ADD', 'ED","object":{"a":1}}\n\n{"type":"DELETED",', '"object":{"a":2}}']));
    assert.deepEqual(got, [
      { type: 'ADDED', object: { a: 1 } },
      { type: 'DELETED', object: { a: 2 } },
    ]);
  });

  it('decodes a multi-byte character split across chunks', async () => {
    const enc = new TextEncoder().encode('{"type":"ADDED","object":{"n":"é"}}\n');
    const cut = enc.indexOf(0xc3) + 1;
    const got = await collect(bytes([enc.slice(0, cut), enc.slice(cut)]));
    assert.deepEqual(got, [{ type: 'ADDED', object: { n: 'é' } }]);
  });

  it('rejects lines that are not watch events', () => {
    assert.throws(() => parseWatchLine('nope'), WatchDecodeError);
    assert.throws(() => parseWatchLine('{"type":"SOMETHING","object":{}}'), WatchDecodeError);
    assert.throws(() => parseWatchLine('{"type":"ADDED"}'), WatchDecodeError);
  });

  it('cancels the body when the consumer stops early', async () => {
    let cancelled = false;
    const s = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new TextEncoder().encode('{"type":"BOOKMARK","object":{}}\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const _ of parseWatchStream(s)) break;
    assert.equal(cancelled, true);
  });
});

describe('finalizer patches', () => {
  it('removes a finalizer only if the list is unchanged', () => {
    assert.deepEqual(removeFinalizerPatch(['x', 'kubevirt.io/persistent-ipam', 'y'], 'kubevirt.io/persistent-ipam'), [
      { op: 'test', path: '/metadata/finalizers', value: ['x', 'kubevirt.io/persistent-ipam', 'y'] },
      { op: 'replace', path: '/metadata/finalizers', value: ['x', 'y'] },
    ]);
    assert.equal(removeFinalizerPatch(['x'], 'kubevirt.io/persistent-ipam'), undefined);
    assert.equal(removeFinalizerPatch(undefined, 'kubevirt.io/persistent-ipam'), undefined);
  });

  it('escapes JSON pointer tokens', () => {
    assert.equal(escapeJsonPointer('kubevirt.io/vm~x'), 'kubevirt.io~1vm~0x');
  });
});

describe('listAllPages', () => {
  it('passes other errors through', async () => {
    const boom = new KubeApiError({ reason: 'forbidden', object: { kind: 'IPAMClaim' }, verb: 'list', code: 403 });
    let n = 0;
    await assert.rejects(
      listAllPages(async () => {
        if (n++ === 0) return { items: [1], resourceVersion: '1', continue: 'c' };
        throw boom;
      }),
      (e: unknown) => e === boom,
    );
  });
});
