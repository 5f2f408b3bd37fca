import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as promClient from 'prom-client';
import { collectDefaultMetrics, Counter, Registry } from './prom.ts';

const shape = async (registry: promClient.Registry) =>
  (await registry.getMetricsAsJSON()).map((m) => ({ name: m.name, help: m.help, type: m.type })).sort((a, b) => a.name.localeCompare(b.name));

test('the default metrics are the ones prom-client registers: same names, help and types', async () => {
  const theirs = new promClient.Registry();
  promClient.collectDefaultMetrics({ register: theirs });
  const ours = new Registry();
  collectDefaultMetrics(ours);
  const expected = await shape(theirs);
  assert.ok(expected.some((m) => m.name === 'process_cpu_seconds_total'));
  assert.deepEqual(await shape(ours), expected);
});

test('the CPU counters grow with the CPU the process spends, user + system = total', async () => {
  const registry = new Registry();
  collectDefaultMetrics(registry);
  const read = async () => {
    const text = await registry.metrics();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    return { user: value('process_cpu_user_seconds_total'), system: value('process_cpu_system_seconds_total'), total: value('process_cpu_seconds_total') };
  };
  const before = await read();
  const until = process.cpuUsage().user + 30_000;
  while (process.cpuUsage().user < until); // spend 30 ms of user CPU
  const after = await read();
  assert.ok(after.user - before.user >= 0.02, `user CPU grew by ${after.user - before.user}`);
  assert.ok(Math.abs(after.user + after.system - after.total) < 1e-6);
});

test("the classes are prom-client's own: a metric of ours registers in a prom-client registry", async () => {
  const registry = new promClient.Registry();
  new Counter({ name: 'x_total', help: 'x', registers: [registry] }).inc(2);
  assert.match(await registry.metrics(), /^x_total 2$/m);
});
