import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { capturingLogger } from '../../test/log-lines.ts';

/** Top-level keys of a JSON object text, in order, duplicates kept (JSON.parse would silently keep the last). */
function topLevelKeys(text: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (depth === 1 && text[j + 1] === ':') keys.push(JSON.parse(text.slice(i, j + 1)) as string);
      i = j;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return keys;
}

describe('logger', () => {
  it('a line about an object carries one `name` key: the object, not the logger', async () => {
    const { log, texts: lines } = capturingLogger('info');
    log.info({ namespace: 'ns', name: 'vm-a', kind: 'VirtualMachine' }, 'hello');
    log.child({ component: 'events' }).warn({ namespace: 'ns', name: 'vm-b' }, 'child');
    await new Promise((r) => setImmediate(r));
    assert.equal(lines.length, 2);
    for (const line of lines) {
      const keys = topLevelKeys(line);
      assert.deepEqual(
        keys.filter((k) => k === 'name'),
        ['name'],
        line,
      );
      assert.equal(new Set(keys).size, keys.length, `no duplicate key: ${line}`);
    }
    const first = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(first['name'], 'vm-a');
    assert.equal(first['logger'], 'persistent-ips');
    assert.equal(first['level'], 'info');
  });
});
