import type { Page, PageQuery } from '../../projections/projector.ts';
import type { ListQuery } from './contract.ts';

export type { DateRange, ListQuery } from './contract.ts';

/*
 * Lists as every face answers them: the items with the counts of the list envelope (what a list is
 * asked with is in contract.ts). Each face adds its own way on:
 * the API its `links` and `Link` header, MCP its `next_page`.
 */

/** A page of a list: its items and where it stands (CONTRACT "Lists", without the links). */
export type Listed<T> = {
  data: T[];
  /** `as_of`: the instant a list as it stood then was asked for (an article list's). */
  meta: { page: number; per_page: number; total: number; total_pages: number; as_of?: string };
};

/** The read models' paging of a list query. */
export function pageOf(query: ListQuery): PageQuery {
  return { page: query.page, perPage: query.per_page };
}

/** A read model's page as a list answers it: the items mapped to wire objects, and the counts. */
export function listed<R, T>(result: Page<R>, query: ListQuery, map: (row: R) => T): Listed<T> {
  return {
    data: result.rows.map(map),
    meta: {
      page: query.page,
      per_page: query.per_page,
      total: result.total,
      total_pages: Math.ceil(result.total / query.per_page),
    },
  };
}
