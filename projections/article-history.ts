import { type Insertable, sql } from 'kysely';
import type { ArticleHistoryTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { inTransactionOnly, type Stored } from '../infra/projection.ts';
import { keyLive } from './accounts.ts';
import type { ArticleListQuery, ArticleRow } from './articles.ts';
import { asyncProjector, type EventOf, offsetOf, type Page, unhandled } from './projector.ts';
import type { Period } from './site-stats.ts';
import { inScope, type SiteScope, siteOwner } from './sites.ts';

type HistoryEvent = EventOf<
  'ArticleCreated' | 'ArticleStatusChanged' | 'FeaturedImageReplaced' | 'ArticleRestored'
>;
type Entry = Insertable<ArticleHistoryTable>;

/**
 * What each article's list entry showed from a revision on: its status, published_at and featured
 * image (its title and word count are in `revisions`, its url and target keyword never change). Only
 * the events that change one of them write an entry, so an edit of the title or body costs nothing
 * here. A list or statistics `as_of` an instant read each article's last entry by then.
 */
export const articleHistoryProjector = asyncProjector({
  name: 'article_history@1',
  mode: 'async',
  handles: ['ArticleCreated', 'ArticleStatusChanged', 'FeaturedImageReplaced', 'ArticleRestored'],
  tables: ['article_history'],
  /** Each entry is the one before it with the event's change: those of the batch's articles are read first, in one statement. */
  project: inTransactionOnly(async (events: readonly Stored<HistoryEvent>[], trx) => {
    const earlier = [
      ...new Set(events.filter((e) => e.type !== 'ArticleCreated').map((e) => e.data.articleId)),
    ];
    const last = new Map<string, Entry>();
    if (earlier.length > 0) {
      const rows = await trx
        .selectFrom('article_history')
        .selectAll()
        .distinctOn('article_id')
        .where('article_id', 'in', earlier)
        .orderBy('article_id')
        .orderBy('revision', 'desc')
        .execute();
      for (const row of rows) {
        last.set(row.article_id, { ...row, featured_image: JSON.stringify(row.featured_image) });
      }
    }
    const entries: Entry[] = [];
    for (const event of events) {
      const entry = entryOf(event, last.get(event.data.articleId));
      if (entry === undefined) continue;
      last.set(entry.article_id, entry);
      entries.push(entry);
    }
    for (let i = 0; i < entries.length; i += INSERT_ROWS) {
      await trx
        .insertInto('article_history')
        .values(entries.slice(i, i + INSERT_ROWS))
        .onConflict((oc) => oc.columns(['article_id', 'revision']).doNothing())
        .execute();
    }
  }),
});

/** Rows per multi-row insert: 8 parameters each, well below PostgreSQL's 65,535 per statement. */
const INSERT_ROWS = 1000;

/** The entry an event writes, from the article's entry before it (none for a creation). */
function entryOf(event: Stored<HistoryEvent>, before: Entry | undefined): Entry | undefined {
  const at = event.metadata.at;
  switch (event.type) {
    case 'ArticleCreated': {
      const d = event.data;
      return {
        article_id: d.articleId,
        revision: d.revision,
        site_id: d.siteId,
        account_id: d.accountId,
        at,
        status: d.status,
        published_at: d.publishedAt,
        featured_image: JSON.stringify(d.featuredImage),
      };
    }
    case 'ArticleStatusChanged':
      return (
        before && {
          ...before,
          revision: event.data.revision,
          at,
          status: event.data.status,
          published_at: event.data.publishedAt,
        }
      );
    case 'FeaturedImageReplaced':
    case 'ArticleRestored':
      return (
        before && {
          ...before,
          revision: event.data.revision,
          at,
          featured_image: JSON.stringify(event.data.featuredImage),
        }
      );
    default:
      return unhandled('article_history', event);
  }
}

/**
 * The first instant after `instant`'s second: what counts by `instant` was recorded before it (a
 * revision counts from its `created_at` to the second, as the wire shows it).
 */
export function secondAfter(instant: Date): Date {
  return new Date(Math.floor(instant.getTime() / 1000) * 1000 + 1000);
}

/** Each article of the scope's site with its last entry before `until`, filtered as a list is. */
function entriesThen(db: Db, scope: SiteScope, q: ArticleListQuery, until: Date) {
  const last = db
    .selectFrom('article_history')
    .select(['article_id', 'status', 'published_at', 'featured_image'])
    .distinctOn('article_id')
    .where('site_id', '=', scope.siteId)
    .where('account_id', '=', scope.accountId)
    .where('at', '<', until)
    .orderBy('article_id')
    .orderBy('revision', 'desc');
  let kept = db.selectFrom(last.as('h')).selectAll('h');
  if (q.status) kept = kept.where('h.status', '=', q.status);
  if (q.from) kept = kept.where('h.published_at', '>=', sql<Date>`${q.from}::date::timestamptz`);
  if (q.to) kept = kept.where('h.published_at', '<', sql<Date>`(${q.to}::date + 1)::timestamptz`);
  return kept;
}

/**
 * A page of the articles of one site of the account as the list stood at `instant`: the articles that
 * existed then, filtered and ordered by their status and published_at then, each with its revision
 * then (title, word count, featured image, updated_at). Undefined for a site that is not the account's.
 */
export async function listArticlesAsOf(
  db: Db,
  scope: SiteScope,
  q: ArticleListQuery,
  instant: Date,
): Promise<Page<ArticleRow> | undefined> {
  const until = secondAfter(instant);
  const kept = entriesThen(db, scope, q, until);
  const page = db
    .selectFrom(
      kept
        .orderBy(sql`h.published_at desc nulls last`)
        .orderBy('h.article_id', 'desc')
        .limit(q.perPage)
        .offset(offsetOf(q))
        .as('p'),
    )
    .innerJoin('articles as a', 'a.id', 'p.article_id')
    .innerJoinLateral(
      (eb) =>
        eb
          .selectFrom('revisions')
          .select(['revision', 'title', 'word_count', 'created_at'])
          .whereRef('revisions.article_id', '=', 'p.article_id')
          .where('revisions.created_at', '<', until)
          .orderBy('revisions.revision', 'desc')
          .limit(1)
          .as('r'),
      (join) => join.onTrue(),
    )
    .select([
      'a.id',
      'a.site_id',
      'r.title',
      'a.url',
      'p.status',
      'p.published_at',
      'a.target_keyword',
      'r.word_count',
      'p.featured_image',
      'r.revision',
      'r.created_at as updated_at',
    ])
    .orderBy(sql`p.published_at desc nulls last`)
    .orderBy('p.article_id', 'desc')
    .execute();
  const counted = db
    .selectFrom(kept.as('k'))
    .select((eb) => [eb.fn.countAll<string>().as('n'), siteOwner(scope), keyLive(scope.liveKey)])
    .executeTakeFirstOrThrow();
  const [rows, count] = await Promise.all([page, counted]);
  return inScope(scope, count, () => ({ rows, total: Number(count.n) }));
}

/** Articles published in a period and backlinks acquired in it, from what had been recorded by an instant. */
export type StatsThen = { articles_published: number; backlinks_industry: number; backlinks_local: number };

/**
 * The statistics of a period of one site of the account as they stood at `instant`: the articles
 * published in the period by their status and published_at then, and the backlinks acquired in it
 * that had been recorded by then. Both are counted from indexes: the entries that put an article in
 * the period (then each one's last entry by then), and the period's backlinks with their recording
 * times. Undefined for a site that is not the account's.
 */
export async function siteStatsAsOf(
  db: Db,
  scope: SiteScope,
  period: Pick<Period, 'from' | 'to'>,
  instant: Date,
): Promise<StatsThen | undefined> {
  const until = secondAfter(instant);
  const start = sql<Date>`${period.from}::date::timestamptz`;
  const end = sql<Date>`(${period.to}::date + 1)::timestamptz`;
  const published = sql<string>`(
    select count(*) from (
      select distinct h.article_id from article_history h
      where h.site_id = ${scope.siteId} and h.published_at >= ${start} and h.published_at < ${end}
        and h.at < ${until}
    ) c
    where (
      select l.status = 'published' and l.published_at >= ${start} and l.published_at < ${end}
      from article_history l
      where l.article_id = c.article_id and l.at < ${until}
      order by l.revision desc limit 1
    ))`;
  const row = await db
    .selectFrom((eb) =>
      eb
        .selectFrom('backlinks')
        .select([
          sql<string>`count(*) filter (where category = 'industry')`.as('industry'),
          sql<string>`count(*) filter (where category = 'local')`.as('local'),
        ])
        .where('site_id', '=', scope.siteId)
        .where('acquired_on', '>=', period.from)
        .where('acquired_on', '<=', period.to)
        .where('recorded_at', '<', until)
        .as('b'),
    )
    .select([
      published.as('articles_published'),
      'b.industry',
      'b.local',
      siteOwner(scope),
      keyLive(scope.liveKey),
    ])
    .executeTakeFirstOrThrow();
  return inScope(scope, row, () => ({
    articles_published: Number(row.articles_published),
    backlinks_industry: Number(row.industry),
    backlinks_local: Number(row.local),
  }));
}
