// CLI of the KubeVirt stand-in (test infrastructure, NOT KubeVirt; see standin.ts for what it reproduces).
//
//   node e2e/kubevirt-standin/main.ts --kubeconfig PATH [--namespace NS] [--log-level info] [--no-migrate-on-interface-change]
//
// Runs until SIGINT/SIGTERM. Logs are JSON lines on stderr; one line `{"ready":true}` on stdout says that the
// watches are established (for tests and demos that start it as a separate process).
import { parseArgs } from 'node:util';
import { defaultStandInLogger, startKubeVirtStandIn } from './standin.ts';

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    namespace: { type: 'string' },
    'log-level': { type: 'string', default: process.env['KUBEVIRT_STANDIN_LOG_LEVEL'] ?? 'info' },
    'no-migrate-on-interface-change': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help || !values.kubeconfig) {
  console.error('usage: main.ts --kubeconfig PATH [--namespace NS] [--log-level LEVEL] [--no-migrate-on-interface-change]');
  process.exit(values.help ? 0 : 2);
}

const log = defaultStandInLogger(values['log-level']);
try {
  const standIn = await startKubeVirtStandIn({
    kubeconfigPath: values.kubeconfig,
    log,
    migrateOnInterfaceChange: !values['no-migrate-on-interface-change'],
    ...(values.namespace ? { namespace: values.namespace } : {}),
  });
  console.log(JSON.stringify({ ready: true }));
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    standIn.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
} catch (err) {
  log.fatal({ err: err instanceof Error ? err.message : String(err) }, 'kubevirt stand-in could not start');
  process.exitCode = 1;
}
