import type { ActivitySource } from '../../domain/activity/events.ts';
import type { ArticleStatus } from '../../domain/article/events.ts';
import type { BacklinkCategory } from '../../domain/backlink/events.ts';
import type { Page, PageQuery } from '../../projections/projector.ts';

/*
 * Lists as every face asks for them and answers them: the CONTRACT's parameter names (page, per_page,
 * from, to, ...), and the items with the counts of the list envelope. Each face adds its own way on:
 * the API its `links` and `Link` header, MCP its `next_page`.
 */

/** Which page, and how long: what every list takes. */
export type ListQuery = { page: number; per_page: number };
/** Inclusive UTC calendar dates (YYYY-MM-DD). */
export type DateRange = { from?: string | undefined; to?: string | undefined };

export type ArticleListQuery = ListQuery & DateRange & { status?: ArticleStatus | undefined };
export type BacklinkListQuery = ListQuery & DateRange & { category?: BacklinkCategory | undefined };
export type ActivityListQuery = ListQuery &
  DateRange & {
    source?: ActivitySource | undefined;
    site_id?: string | undefined;
    article_id?: string | undefined;
  };

/** A page of a list: its items and where it stands (CONTRACT "Lists", without the links). */
export type Listed<T> = {
  data: T[];
  meta: { page: number; per_page: number; total: number; total_pages: number };
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
