import { type AliasedRawBuilder, type Expression, type Selectable, type SqlBool, sql } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import type { SiteEvent } from '../domain/site/events.ts';
import type { SitesTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { eachEvent, type Pending, type Statement } from '../infra/projection.ts';
import { invalidKeyError } from './accounts.ts';
import { inlineProjector, offsetOf, type Page, type PageQuery, unhandled } from './projector.ts';

/** The site's row, inserted when `when` holds; a replay changes nothing. */
function siteStatements(event: Pending<SiteEvent>, when: Expression<SqlBool>): Statement[] {
  switch (event.type) {
    case 'SiteAdded': {
      const d = event.data;
      return [
        sql`insert into sites (id, account_id, name, domain, url, created_at)
            select ${d.siteId}::text, ${d.accountId}::text, ${d.name}::text, ${d.domain}::text, ${d.url}::text,
                   ${event.metadata.at}::timestamptz
             where ${when}
            on conflict (id) do nothing`,
      ];
    }
    default:
      return unhandled('sites', event.type);
  }
}

export const sitesProjector = inlineProjector({
  name: 'sites@1',
  mode: 'inline',
  handles: ['SiteAdded'],
  tables: ['sites'],
  project: eachEvent(siteStatements),
});

export type SiteRow = Selectable<SitesTable>;

const siteColumns = ['id', 'account_id', 'name', 'domain', 'url', 'created_at'] as const;

/** The account's sites, oldest first (ties by id), so that pages are stable as sites are added. */
export async function listSites(db: Db, accountId: string, q: PageQuery): Promise<Page<SiteRow>> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('sites')
      .select(siteColumns)
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'asc')
      .orderBy('id', 'asc')
      .limit(q.perPage)
      .offset(offsetOf(q))
      .execute(),
    db
      .selectFrom('sites')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export type SiteOverviewRow = SiteRow & {
  /** Articles of every status. */
  articles: number;
  /** Articles published and backlinks acquired in the month of `month`. */
  articles_published_in_month: number;
  backlinks_in_month: number;
};

/**
 * A page of the account's sites (in `listSites`' order), each with its article count (article_counts)
 * and what its monthly stats bucket of `month` (its first day, YYYY-MM-01) holds.
 */
export async function listSiteOverview(
  db: Db,
  accountId: string,
  q: PageQuery,
  month: string,
): Promise<Page<SiteOverviewRow>> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('sites as s')
      .select(siteColumns.map((c) => `s.${c}` as const))
      .select([
        sql<string>`(select coalesce(sum(n), 0) from article_counts c where c.site_id = s.id)`.as('articles'),
        sql<string>`coalesce(m.articles_published, 0)`.as('articles_published_in_month'),
        sql<string>`coalesce(m.backlinks_industry + m.backlinks_local, 0)`.as('backlinks_in_month'),
      ])
      .leftJoin('stats_buckets as m', (join) =>
        join.onRef('m.site_id', '=', 's.id').on('m.grain', '=', 'month').on('m.bucket', '=', month),
      )
      .where('s.account_id', '=', accountId)
      .orderBy('s.created_at', 'asc')
      .orderBy('s.id', 'asc')
      .limit(q.perPage)
      .offset(offsetOf(q))
      .execute(),
    db
      .selectFrom('sites')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow(),
  ]);
  return {
    rows: rows.map((r) => ({
      ...r,
      articles: Number(r.articles),
      articles_published_in_month: Number(r.articles_published_in_month),
      backlinks_in_month: Number(r.backlinks_in_month),
    })),
    total: Number(count.n),
  };
}

/** A site of the account, or undefined for an unknown id and for another account's id alike. */
export async function findSite(db: Db, accountId: string, siteId: string): Promise<SiteRow | undefined> {
  return db
    .selectFrom('sites')
    .select(siteColumns)
    .where('id', '=', siteId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

/**
 * A site as one account sees it: queries of a site's rows return nothing for another account's site.
 * `liveKey`: the API key the read is made with, when the read must confirm it is not revoked (its
 * statement then says so, and a revoked key is refused).
 */
export type SiteScope = { accountId: string; siteId: string; liveKey?: string | undefined };

/**
 * The account that owns the scope's site, as a column of another statement: a site's read folds its
 * tenancy check into its own statement instead of running a separate lookup first.
 */
export function siteOwner(scope: Pick<SiteScope, 'siteId'>): AliasedRawBuilder<string | null, 'site_owner'> {
  return sql<string | null>`(select account_id from sites where id = ${scope.siteId})`.as('site_owner');
}

/**
 * What a site read's statement said about the scope: refuses a revoked key, then gives the result
 * when the site is the account's and undefined when not.
 */
export function inScope<T>(
  scope: SiteScope,
  said: { site_owner: string | null; key_live: boolean },
  result: () => T,
): T | undefined {
  if (!said.key_live) throw invalidKeyError();
  return said.site_owner === scope.accountId ? result() : undefined;
}

/** The result of a read of the scope's site; `not_found` when the site is not the account's. */
export async function ofOwnSite<T>(scope: SiteScope, read: Promise<T | undefined>): Promise<T> {
  const result = await read;
  if (result === undefined) throw new DomainError('not_found', `No site ${scope.siteId}`);
  return result;
}

/** A page of every account's sites made before `before`, by id after `after`: what a month's reports go through. */
export function listSitesMadeBefore(
  db: Db,
  q: { after: string; before: Date; limit: number },
): Promise<{ id: string; account_id: string }[]> {
  return db
    .selectFrom('sites')
    .select(['id', 'account_id'])
    .where('id', '>', q.after)
    .where('created_at', '<', q.before)
    .orderBy('id')
    .limit(q.limit)
    .execute();
}

/** `text` as a LIKE pattern matching what starts with it, case aside (`%`, `_` and `\` taken literally). */
export function startsWithPattern(text: string): string {
  return `${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * The account's sites whose name, domain or id starts with `prefix` (case aside), oldest first, at most
 * `limit` of them, and how many there are in all: what an argument's completion offers.
 */
export async function suggestSites(
  db: Db,
  accountId: string,
  prefix: string,
  limit: number,
): Promise<{ rows: Pick<SiteRow, 'id' | 'name' | 'domain'>[]; total: number }> {
  const pattern = startsWithPattern(prefix);
  const base = db
    .selectFrom('sites')
    .where('account_id', '=', accountId)
    .where((eb) =>
      eb.or([
        eb(eb.fn('lower', ['name']), 'like', pattern),
        eb(eb.fn('lower', ['domain']), 'like', pattern),
        eb(eb.fn('lower', ['id']), 'like', pattern),
      ]),
    );
  const [rows, count] = await Promise.all([
    base
      .select(['id', 'name', 'domain'])
      .orderBy('created_at', 'asc')
      .orderBy('id', 'asc')
      .limit(limit)
      .execute(),
    base.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}
