import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** Runs `body` with a fresh scratch folder and a writer of files under it (folders made on the way), then removes the folder. */
export async function inScratch<T>(prefix: string, body: (root: string, file: (path: string, text: string) => void) => T | Promise<T>): Promise<T> {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const file = (path: string, text: string): void => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  try {
    return await body(root, file);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
