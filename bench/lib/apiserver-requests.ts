// Write amplification, counted by the API server itself: `apiserver_request_total` from its /metrics, scraped
// before and after a scenario and diffed per {verb, group, resource, subresource, code}.
import type { KubeHttp } from '../../e2e/harness/kubehttp.ts';
import { parsePrometheus } from '../../e2e/local/controller-process.ts';

export interface RequestRow {
  verb: string;
  group: string;
  resource: string;
  subresource: string;
  code: string;
  count: number;
}

const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'DELETECOLLECTION', 'APPLY']);

/** apiserver_request_total now, by verb, group, resource, subresource and code. */
async function scrapeRequests(kube: KubeHttp): Promise<Map<string, RequestRow>> {
  const res = await kube.request('GET', '/metrics');
  if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status}`);
  const out = new Map<string, RequestRow>();
  for (const { labels, value } of parsePrometheus(res.body, (n) => n === 'apiserver_request_total')) {
    const { verb = '', group = '', resource = '', subresource = '', code = '' } = labels;
    const key = `${verb}|${group}|${resource}|${subresource}|${code}`;
    const prev = out.get(key);
    if (prev) prev.count += value;
    else out.set(key, { verb, group, resource, subresource, code, count: value });
  }
  return out;
}

export interface WriteSummary {
  /** POST/PUT/PATCH/DELETE/APPLY on ipamclaims (any subresource), every status code. */
  claimWrites: number;
  /** The same, by "VERB code". */
  claimWritesBy: Record<string, number>;
  /** Writes on events (core and events.k8s.io). */
  eventWrites: number;
  /** Reads (GET/LIST/WATCH) by resource, for context. */
  readsByResource: Record<string, number>;
  /** Every non-zero row. */
  rows: RequestRow[];
}

/** The requests between two scrapes, the writes on claims and events counted out. */
function summarizeRequests(after: Map<string, RequestRow>, before: Map<string, RequestRow>): WriteSummary {
  const rows: RequestRow[] = [];
  for (const [key, row] of after) {
    const count = row.count - (before.get(key)?.count ?? 0);
    if (count > 0) rows.push({ ...row, count });
  }
  rows.sort((a, b) => b.count - a.count || a.resource.localeCompare(b.resource) || a.verb.localeCompare(b.verb));
  const s: WriteSummary = { claimWrites: 0, claimWritesBy: {}, eventWrites: 0, readsByResource: {}, rows };
  for (const r of rows) {
    if (WRITE_VERBS.has(r.verb)) {
      if (r.resource === 'ipamclaims') {
        s.claimWrites += r.count;
        const k = `${r.verb}${r.subresource ? `/${r.subresource}` : ''} ${r.code}`;
        s.claimWritesBy[k] = (s.claimWritesBy[k] ?? 0) + r.count;
      } else if (r.resource === 'events') {
        s.eventWrites += r.count;
      }
    } else if (r.resource) {
      const k = `${r.verb} ${r.resource}`;
      s.readsByResource[k] = (s.readsByResource[k] ?? 0) + r.count;
    }
  }
  return s;
}

/** A window: snapshot now; `end()` snapshots again and summarizes the difference. */
export async function requestWindow(kube: KubeHttp): Promise<{ end(): Promise<WriteSummary> }> {
  const before = await scrapeRequests(kube);
  return {
    end: async () => summarizeRequests(await scrapeRequests(kube), before),
  };
}
