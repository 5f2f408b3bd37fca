// How `npm test` orders the e2e files around the binaries build: which prepare steps (e2e/harness/prepare.ts) each
// file needs, read through its imports, and which steps are ready, read from the prepare's progress lines.
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { join, resolve } from 'node:path';
import { PREPARE_STEPS } from '../e2e/harness/prepare.ts';
import { importClosure } from './imports.ts';

const ROOT = resolve(import.meta.dirname, '..');

/**
 * The prepare steps as `npm test` sees them: which are ready, whether one failed, and a promise that settles at the
 * next change. Without the binaries phase (`node scripts/test.ts e2e`) every step counts as ready: the files then
 * find the binaries, or say which prepare step builds them.
 */
export class Prepared {
  readonly ready = new Set<string>();
  failed: string | undefined;
  finished = false;
  #changed = Promise.withResolvers<void>();
  get changed(): Promise<void> {
    return this.#changed.promise;
  }
  /** Reads prepare.ts's `prepare: [id] ready|FAILED` lines. */
  line(line: string): void {
    const m = /^prepare: \[([\w-]+)\] (ready|FAILED)/.exec(line);
    if (!m) return;
    if (m[2] === 'ready') this.ready.add(m[1]!);
    else this.failed = m[1];
    this.#bump();
  }
  finish(): void {
    this.finished = true;
    this.#bump();
  }
  #bump(): void {
    this.#changed.resolve();
    this.#changed = Promise.withResolvers<void>();
  }
}

export const PREPARE_MODULE = join(ROOT, 'e2e/harness/prepare.ts');
/** The prepare steps an e2e file needs: the steps whose `usedBy` matches its text or that of a file it imports. */
export function stepsNeededBy(file: string): string[] {
  const texts = [...importClosure(file)].filter((f) => f !== PREPARE_MODULE).map((f) => readFileSync(f, 'utf8'));
  return PREPARE_STEPS.filter((step) => step.usedBy === undefined || texts.some((t) => step.usedBy!.test(t))).map((step) => step.id);
}

/**
 * Adds `by` to the nice value of every process in a process group (at most 19). Relative, unlike `renice -g` in the
 * util-linux of these machines: the tool builds, which prepare.ts runs below the others, stay below them. Returns what
 * failed, if anything did (a process that ended meanwhile is no failure).
 */
export function lowerGroupPriority(pgid: number, by: number): string | undefined {
  let failure: string | undefined;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      // /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces, so the fields count from its ')'.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) !== pgid) continue;
      setPriority(Number(pid), Math.min(19, getPriority(Number(pid)) + by));
    } catch (err) {
      const e = err as { code?: string; info?: { code?: string }; message: string };
      if (e.code !== 'ENOENT' && e.info?.code !== 'ESRCH') failure ??= e.message;
    }
  }
  return failure;
}
