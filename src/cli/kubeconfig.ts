// Kept apart from exit-codes.ts, which the command-line parser's child process imports: the parser never reads a
// kubeconfig, and would otherwise load the YAML reader with it.
import { KubeConfigError, loadKubeConfig, type LoadedKubeConfig } from '../kube/load-kubeconfig.ts';
import { CliError, EXIT } from './exit-codes.ts';

/**
 * The kubeconfig the flags name, or the default one. A file or context the user named that is wrong is said in one
 * line; with none named, `hint` says how to name one.
 */
export function loadKubeConfigOrExplain(options: { kubeconfig?: string; context?: string }, hint: string): LoadedKubeConfig {
  try {
    return loadKubeConfig({ ...(options.kubeconfig ? { path: options.kubeconfig } : {}), ...(options.context ? { context: options.context } : {}) });
  } catch (err) {
    if (!(err instanceof KubeConfigError)) throw err;
    const named = options.kubeconfig !== undefined || options.context !== undefined;
    throw new CliError(named ? err.message.replace(/\s*\n\s*/g, ' ') : `${err.message}\n${hint}`, EXIT.noKubeconfig, { cause: err });
  }
}
