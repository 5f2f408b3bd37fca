// docs/flags.md is the table of every flag: it must name each flag the CLI accepts, and each flag the Deployment
// passes. Reads the docs and the manifest; runs no process.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadYaml } from '@kubernetes/client-node';
import { parseCommandLine } from '../../src/cli/parser.ts';
import { REPO_ROOT } from '../local/controller-process.ts';

const doc = readFileSync(join(REPO_ROOT, 'docs', 'flags.md'), 'utf8');

/** The `## heading` section of docs/flags.md. */
function section(heading: string): string {
  const start = doc.indexOf(`## ${heading}`);
  assert.ok(start >= 0, `docs/flags.md has a section "${heading}"`);
  const end = doc.indexOf('\n## ', start + 3);
  return doc.slice(start, end < 0 ? undefined : end);
}

async function flagsOf(command: string): Promise<string[]> {
  let help = '';
  await parseCommandLine([command, '--help'], { env: {}, print: (t) => (help += t) });
  return [...new Set([...help.matchAll(/^\s+(?:-\w, )?(--[a-z][a-z-]*)/gm)].map((m) => m[1]!))];
}

/** Flags named in the first column of the section's tables. */
const documented = (text: string): Set<string> =>
  new Set([...text.matchAll(/^\| ([^|]+)\|/gm)].flatMap((m) => [...m[1]!.matchAll(/`(--[a-z-]+)`/g)].map((f) => f[1]!)));

describe('docs/flags.md', () => {
  for (const [command, heading] of [
    ['run', '`persistent-ips run`'],
    ['status', '`persistent-ips status [VM]`'],
  ] as const) {
    it(`names every flag of ${command}`, async () => {
      const flags = await flagsOf(command);
      assert.ok(flags.length >= (command === 'run' ? 25 : 5), flags.join(' '));
      const listed = documented(section(heading));
      assert.deepEqual(
        flags.filter((f) => !listed.has(f)),
        [],
      );
      assert.deepEqual(
        [...listed].filter((f) => !flags.includes(f)),
        [],
        'and no flag that does not exist',
      );
    });
  }

  it('names, in the manifest column, every argument the Deployment passes', () => {
    const deployment = loadYaml<{ spec: { template: { spec: { containers: { args: string[] }[] } } } }>(
      readFileSync(join(REPO_ROOT, 'manifests', 'controller', 'deployment.yaml'), 'utf8'),
    );
    const args = deployment.spec.template.spec.containers[0]!.args.filter((a) => a.startsWith('--'));
    assert.ok(args.length >= 5);
    const run = section('`persistent-ips run`');
    for (const arg of args) {
      const flag = arg.split('=')[0]!;
      const row = run.split('\n').find((l) => l.startsWith(`| \`${flag}\``));
      assert.ok(row, `row for ${flag}`);
      assert.ok(row.includes(`args \`${arg}\``), `the row of ${flag} names "args \`${arg}\`": ${row}`);
    }
  });
});
