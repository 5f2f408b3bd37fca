// Imported by main.ts right after require-node.ts, before anything allocates much. The controller's working set is a
// cache that grows with the cluster and is then read far more than written, and it runs under a container memory
// limit: V8's default heuristics (grow the heap 1.1-4x past what is live, keep freed pages pooled) trade resident
// memory for fewer collections, which is the wrong trade here. --optimize-for-size keeps the committed heap close to
// what is live. Measured (docs/benchmarks/README.md, "V8 sized for memory"): 3,000 VMs x 2 networks, steady RSS
// -22 MiB. It cannot go in the Deployment's NODE_OPTIONS (Node allows only a few V8 flags there), and V8 reads it
// at run time, so it is set here; PERSISTENT_IPS_V8_DEFAULTS=1 leaves V8's defaults alone (to compare, or if a
// future Node stops honouring it).
import { setFlagsFromString } from 'node:v8';

if (process.env.PERSISTENT_IPS_V8_DEFAULTS !== '1') setFlagsFromString('--optimize-for-size');
export {};
