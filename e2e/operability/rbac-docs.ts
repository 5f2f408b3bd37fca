// The two sides of the least-privilege check: what docs/rbac.md documents (its tables), and what
// `kubectl auth can-i --list` says a subject may do. Both become the same shape, one permission per
// (API group, resource, resourceName, verb), so that "nothing beyond the documented list" is a set difference.

/** One documented rule: `names` empty means any name. `scope` says where the rule applies. */
export interface DocRule {
  scope: 'cluster' | 'namespace';
  role: string;
  group: string;
  resources: string[];
  names: string[];
  verbs: string[];
}

/** One permission as `auth can-i --list` prints it (resource rows only; URLs separately). */
export interface Grant {
  group: string;
  /** e.g. `ipamclaims` or `ipamclaims/status` */
  resource: string;
  /** '' for any name */
  name: string;
  verb: string;
}

export const grantKey = (g: Grant): string => `${g.group || 'core'} ${g.resource}${g.name ? `[${g.name}]` : ''} ${g.verb}`;

const ticks = (cell: string): string[] => [...cell.matchAll(/`([^`]*)`/g)].map((m) => m[1]!);

/**
 * Parses the permission tables of docs/rbac.md. A table belongs to the last "ClusterRole `x`" or "Role `x`" named
 * above it (a heading or a line of prose); columns are found by their header (API group, resources, resourceNames,
 * verbs).
 */
export function parseRbacDoc(markdown: string): DocRule[] {
  const rules: DocRule[] = [];
  let scope: DocRule['scope'] | undefined;
  let role = '';
  let header: string[] | undefined;
  for (const raw of markdown.split('\n')) {
    const line = raw.trim();
    const cluster = /ClusterRole `([^`]+)`/.exec(line);
    const ns = /(?:^|[^r])Role `([^`]+)`/.exec(line);
    if (!line.startsWith('|')) {
      header = undefined;
      if (cluster) [scope, role] = ['cluster', cluster[1]!];
      else if (ns) [scope, role] = ['namespace', ns[1]!];
      if (/^## What is not granted/.test(line)) scope = undefined;
      continue;
    }
    const cells = line
      .slice(1, line.endsWith('|') ? -1 : undefined)
      .split('|')
      .map((c) => c.trim());
    if (!header) {
      header = cells.map((c) => c.toLowerCase());
      continue;
    }
    if (cells.every((c) => /^:?-+:?$/.test(c))) continue;
    if (!scope) continue;
    const col = (name: string) => {
      const i = header!.indexOf(name);
      return i >= 0 ? (cells[i] ?? '') : undefined;
    };
    const groupCell = col('api group');
    const resourcesCell = col('resources');
    const verbsCell = col('verbs');
    if (groupCell === undefined || resourcesCell === undefined || verbsCell === undefined) continue;
    const group = ticks(groupCell)[0] ?? '';
    const namesCell = col('resourcenames');
    rules.push({
      scope,
      role,
      group: group === '""' ? '' : group,
      resources: ticks(resourcesCell),
      names: namesCell === undefined ? [] : ticks(namesCell),
      verbs: verbsCell
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean),
    });
  }
  return rules;
}

/** The permissions a documented rule grants, one per (resource, name, verb); name '' for "any". */
export function docGrants(rules: DocRule[]): Grant[] {
  return rules.flatMap((r) =>
    r.resources.flatMap((resource) => (r.names.length ? r.names : ['']).flatMap((name) => r.verbs.map((verb) => ({ group: r.group, resource, name, verb })))),
  );
}

/** Whether `g` is allowed by a documented rule: same group, resource and verb, and the rule's names (if any) include it. */
export function coveredBy(g: Grant, rules: DocRule[]): DocRule | undefined {
  return rules.find(
    (r) =>
      r.group === g.group &&
      r.resources.includes(g.resource) &&
      r.verbs.includes(g.verb) &&
      (r.names.length === 0 || (g.name !== '' && r.names.includes(g.name))),
  );
}

export interface CanIList {
  grants: Grant[];
  /** `get /healthz` and the like */
  urls: string[];
}

/**
 * Parses `kubectl auth can-i --list` (table output):
 *   ipamclaims.k8s.cni.cncf.io/status   []   [persistent-ips-leader]   [get update patch]
 *                                       [/healthz]   []   [get]
 */
export function parseCanIList(text: string): CanIList {
  const grants: Grant[] = [];
  const urls: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\S*)\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$/.exec(line);
    if (!m) continue;
    const [, res, urlCell, namesCell, verbsCell] = m as unknown as [string, string, string, string, string];
    const verbs = verbsCell.split(/\s+/).filter(Boolean);
    if (res === '') {
      for (const url of urlCell.split(/\s+/).filter(Boolean)) for (const verb of verbs) urls.push(`${verb} ${url}`);
      continue;
    }
    const slash = res.indexOf('/');
    const main = slash < 0 ? res : res.slice(0, slash);
    const sub = slash < 0 ? '' : res.slice(slash);
    const dot = main.indexOf('.');
    const resource = (dot < 0 ? main : main.slice(0, dot)) + sub;
    const group = dot < 0 ? '' : main.slice(dot + 1);
    const names = namesCell.split(/\s+/).filter(Boolean);
    for (const name of names.length ? names : ['']) for (const verb of verbs) grants.push({ group, resource, name, verb });
  }
  return { grants, urls };
}
