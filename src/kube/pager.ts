// Paginated lists, with client-go's pager fallback: when a continue token expires mid-way (410), the list is
// repeated in one piece, because a partial list stitched from two snapshots would be inconsistent.

import { isGone } from './errors.ts';

export interface ListPage<T> {
  items: T[];
  /** The snapshot the page was served from; every page of one pagination shares it. */
  resourceVersion: string;
  /** Token for the next page; absent on the last page. */
  continue?: string;
  remainingItemCount?: number;
}

export interface PageRequest {
  limit?: number;
  continue?: string;
  signal?: AbortSignal;
}

/**
 * Smaller than client-go's 500 because of the young generation the Deployment gives V8 (--max-semi-space-size=2):
 * a page of 500 VMs decodes to several MiB of objects that all live until the page is trimmed, so every scavenge
 * during a list copies them. At 100 a decoded page fits in the young generation: a cold start spends less CPU until
 * the caches synced and peaks lower, and the extra requests cost the API server little next to the objects.
 */
export const DEFAULT_PAGE_SIZE = 100;

/**
 * Every item of a collection, from one snapshot. `map` is applied page by page (an informer trims there), so only
 * one page of raw objects is held at a time, not the whole collection.
 */
export async function listAllPages<T, U = T>(
  fetchPage: (req: PageRequest) => Promise<ListPage<T>>,
  options: { pageSize?: number; signal?: AbortSignal; map?: (item: T) => U } = {},
): Promise<{ items: U[]; resourceVersion: string }> {
  const limit = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const signal = options.signal;
  const map = options.map ?? ((item: T) => item as unknown as U);
  let page = await fetchPage({ limit, signal });
  const resourceVersion = page.resourceVersion;
  const items: U[] = [];
  // A loop rather than push(...page.items): spreading a very large page can overflow the argument stack.
  for (const item of page.items) items.push(map(item));
  while (page.continue) {
    const token: string = page.continue;
    page = { items: [], resourceVersion }; // let the previous page's raw items go while the next one loads
    try {
      page = await fetchPage({ limit, continue: token, signal });
    } catch (err) {
      if (!isGone(err)) throw err;
      const full = await fetchPage({ signal });
      return { items: full.items.map(map), resourceVersion: full.resourceVersion };
    }
    for (const item of page.items) items.push(map(item));
  }
  return { items, resourceVersion };
}
