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

export type PageFetcher<T> = (req: PageRequest) => Promise<ListPage<T>>;

export const DEFAULT_PAGE_SIZE = 500;

export async function listAllPages<T>(
  fetchPage: PageFetcher<T>,
  options: { pageSize?: number; signal?: AbortSignal } = {},
): Promise<{ items: T[]; resourceVersion: string }> {
  const limit = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const signal = options.signal;
  let page = await fetchPage({ limit, signal });
  const resourceVersion = page.resourceVersion;
  const items: T[] = [];
  // A loop rather than push(...page.items): spreading a very large page can overflow the argument stack.
  for (const item of page.items) items.push(item);
  while (page.continue) {
    try {
      page = await fetchPage({ limit, continue: page.continue, signal });
    } catch (err) {
      if (!isGone(err)) throw err;
      const full = await fetchPage({ signal });
      return { items: full.items, resourceVersion: full.resourceVersion };
    }
    for (const item of page.items) items.push(item);
  }
  return { items, resourceVersion };
}
