// Local runs (npm start, the end-to-end suite) have no Service in front of the controller: the API server calls the
// webhook by URL on 127.0.0.1. This derives that configuration from the shipped manifest, so local runs exercise the
// same rules, selectors and failure policy as an installation.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadYaml } from '@kubernetes/client-node';

const MANIFEST = resolve(import.meta.dirname, '..', '..', 'manifests', 'webhook', 'mutating_webhook_configuration.yaml');
export const CONTROLLER_NAMESPACE = 'persistent-ips-system';

interface WebhookConfig {
  metadata: { name: string };
  webhooks: { clientConfig: { service?: { path?: string }; url?: string } }[];
}

/** The MutatingWebhookConfiguration of manifests/webhook, pointed at https://127.0.0.1:PORT. */
export function localWebhookConfiguration(port: number): WebhookConfig {
  const config = loadYaml<WebhookConfig>(readFileSync(MANIFEST, 'utf8'));
  for (const webhook of config.webhooks) {
    const path = webhook.clientConfig.service?.path ?? '/mutate-v1-pod';
    webhook.clientConfig = { url: `https://127.0.0.1:${port}${path}` };
  }
  return config;
}

/** The namespace the controller keeps its webhook Secret in, labelled as in manifests/default so it is exempt. */
export const controllerNamespace = {
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: { name: CONTROLLER_NAMESPACE, labels: { 'persistent-ips.kubevirt.io/webhook': 'disabled' } },
};

/** Flags that make `persistent-ips run` serve the local configuration above. */
export function localWebhookFlags(port: number): string[] {
  return ['--webhook-bind-address', `127.0.0.1:${port}`, '--webhook-cert-host', '127.0.0.1', '--controller-namespace', CONTROLLER_NAMESPACE];
}
