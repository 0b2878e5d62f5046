import { type Selectable, sql } from 'kysely';
import type { StatsBucketsTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { prepared } from '../infra/db/statement-cache.ts';
import { inTransactionOnly, type Stored, type Trx } from '../infra/projection.ts';
import { keyLive } from './accounts.ts';
import { asyncProjector, type EventOf, unhandled } from './projector.ts';
import { inScope, type SiteScope, siteOwner } from './sites.ts';

type StatsEvent = EventOf<'BacklinkAcquired' | 'ArticleCreated' | 'ArticleStatusChanged'>;

/**
 * Per-site counters in daily and monthly buckets, so a period is answered by reading at most one
 * monthly row or 30 daily rows, however many articles and backlinks the site has.
 * An article counts as published on the UTC day of its published_at while its status is `published`;
 * `stats_articles` remembers where each article is counted so that a status change moves it.
 */
export const siteStatsProjector = asyncProjector({
  name: 'site_stats@1',
  mode: 'async',
  handles: ['BacklinkAcquired', 'ArticleCreated', 'ArticleStatusChanged'],
  tables: ['stats_buckets', 'stats_articles'],
  /**
   * Runs of backlinks and new articles are summed per bucket and written with multi-row statements;
   * a status change (which reads where its article is counted) is applied on its own, in its place.
   */
  project: inTransactionOnly(async (events: readonly Stored<StatsEvent>[], trx) => {
    let run: Stored<StatsEvent>[] = [];
    for (const event of events) {
      if (event.type !== 'ArticleStatusChanged') {
        run.push(event);
        continue;
      }
      await applyRun(run, trx);
      run = [];
      await applyOne(event, trx);
    }
    await applyRun(run, trx);
  }),
});

async function applyOne(event: Stored<StatsEvent>, trx: Trx): Promise<void> {
  switch (event.type) {
    case 'BacklinkAcquired': {
      const d = event.data;
      const industry = d.category === 'industry' ? 1 : 0;
      await bump(trx, d.siteId, d.acquiredOn, {
        backlinks_industry: industry,
        backlinks_local: 1 - industry,
      });
      return;
    }
    case 'ArticleCreated': {
      const d = event.data;
      const countedOn = d.status === 'published' && d.publishedAt ? utcDay(d.publishedAt) : null;
      const inserted = await trx
        .insertInto('stats_articles')
        .values({ article_id: d.articleId, site_id: d.siteId, counted_on: countedOn })
        .onConflict((oc) => oc.column('article_id').doNothing())
        .executeTakeFirst();
      if (countedOn && (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n) {
        await bump(trx, d.siteId, countedOn, { articles_published: 1 });
      }
      return;
    }
    case 'ArticleStatusChanged': {
      const d = event.data;
      const row = await trx
        .selectFrom('stats_articles')
        .select(['site_id', 'counted_on'])
        .where('article_id', '=', d.articleId)
        .executeTakeFirst();
      if (!row) return;
      const next = d.status === 'published' && d.publishedAt ? utcDay(d.publishedAt) : null;
      if (next === row.counted_on) return;
      if (row.counted_on) await bump(trx, row.site_id, row.counted_on, { articles_published: -1 });
      if (next) await bump(trx, row.site_id, next, { articles_published: 1 });
      await trx
        .updateTable('stats_articles')
        .set({ counted_on: next })
        .where('article_id', '=', d.articleId)
        .execute();
      return;
    }
    default:
      return unhandled('site_stats', event);
  }
}

/** Rows per multi-row statement: a few parameters each, well below PostgreSQL's 65,535 per statement. */
const INSERT_ROWS = 1000;

/** BacklinkAcquired and ArticleCreated events, in log order: the same rows as applyOne on each. */
async function applyRun(events: readonly Stored<StatsEvent>[], trx: Trx): Promise<void> {
  const deltas = new Map<string, BucketRow>();
  const add = (siteId: string, day: string, d: Deltas): void => {
    for (const [grain, bucket] of [
      ['day', day],
      ['month', `${day.slice(0, 7)}-01`],
    ] as const) {
      const key = `${siteId}\u0000${grain}\u0000${bucket}`;
      let row = deltas.get(key);
      if (!row) {
        row = {
          site_id: siteId,
          grain,
          bucket,
          articles_published: 0,
          backlinks_industry: 0,
          backlinks_local: 0,
        };
        deltas.set(key, row);
      }
      row.articles_published += d.articles_published ?? 0;
      row.backlinks_industry += d.backlinks_industry ?? 0;
      row.backlinks_local += d.backlinks_local ?? 0;
    }
  };

  // New articles: the first event of an id wins, and only an article not counted before is bumped.
  const created = new Map<string, { siteId: string; countedOn: string | null }>();
  for (const event of events) {
    if (event.type === 'BacklinkAcquired') {
      const d = event.data;
      const industry = d.category === 'industry' ? 1 : 0;
      add(d.siteId, d.acquiredOn, { backlinks_industry: industry, backlinks_local: 1 - industry });
    } else if (event.type === 'ArticleCreated' && !created.has(event.data.articleId)) {
      const d = event.data;
      const countedOn = d.status === 'published' && d.publishedAt ? utcDay(d.publishedAt) : null;
      created.set(d.articleId, { siteId: d.siteId, countedOn });
    }
  }
  const articles = [...created.entries()].map(([article_id, a]) => ({
    article_id,
    site_id: a.siteId,
    counted_on: a.countedOn,
  }));
  for (let i = 0; i < articles.length; i += INSERT_ROWS) {
    const inserted = await trx
      .insertInto('stats_articles')
      .values(articles.slice(i, i + INSERT_ROWS))
      .onConflict((oc) => oc.column('article_id').doNothing())
      .returning(['article_id', 'site_id', 'counted_on'])
      .execute();
    for (const row of inserted) {
      if (row.counted_on) add(row.site_id, row.counted_on, { articles_published: 1 });
    }
  }

  // Sorted, so that concurrent writers of the same buckets lock them in one order.
  const rows = [...deltas.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row);
  for (let i = 0; i < rows.length; i += INSERT_ROWS) {
    await trx
      .insertInto('stats_buckets')
      .values(rows.slice(i, i + INSERT_ROWS))
      .onConflict((oc) =>
        oc.columns(['site_id', 'grain', 'bucket']).doUpdateSet({
          articles_published: sql`stats_buckets.articles_published + excluded.articles_published`,
          backlinks_industry: sql`stats_buckets.backlinks_industry + excluded.backlinks_industry`,
          backlinks_local: sql`stats_buckets.backlinks_local + excluded.backlinks_local`,
        }),
      )
      .execute();
  }
}

type BucketRow = Selectable<StatsBucketsTable>;

function utcDay(iso: string): string {
  return new Date(iso).toISOString().slice(0, 10);
}

type Deltas = { articles_published?: number; backlinks_industry?: number; backlinks_local?: number };

async function bump(trx: Trx, siteId: string, day: string, deltas: Deltas): Promise<void> {
  const a = deltas.articles_published ?? 0;
  const i = deltas.backlinks_industry ?? 0;
  const l = deltas.backlinks_local ?? 0;
  for (const [grain, bucket] of [
    ['day', day],
    ['month', `${day.slice(0, 7)}-01`],
  ] as const) {
    await trx
      .insertInto('stats_buckets')
      .values({
        site_id: siteId,
        grain,
        bucket,
        articles_published: a,
        backlinks_industry: i,
        backlinks_local: l,
      })
      .onConflict((oc) =>
        oc.columns(['site_id', 'grain', 'bucket']).doUpdateSet({
          articles_published: sql`stats_buckets.articles_published + ${a}`,
          backlinks_industry: sql`stats_buckets.backlinks_industry + ${i}`,
          backlinks_local: sql`stats_buckets.backlinks_local + ${l}`,
        }),
      )
      .execute();
  }
}

export type Period = { key: string; from: string; to: string; grain: 'day' | 'month' };

/** Resolves a period name against today (UTC). Pure; throws RangeError for an unknown or impossible key. */
export function resolvePeriod(key: string, today: Date): Period {
  const y = today.getUTCFullYear();
  const m = today.getUTCMonth();
  const iso = (d: Date): string => d.toISOString().slice(0, 10);
  const month = (year: number, monthIndex: number): Period => ({
    key,
    from: iso(new Date(Date.UTC(year, monthIndex, 1))),
    to: iso(new Date(Date.UTC(year, monthIndex + 1, 0))),
    grain: 'month',
  });
  if (key === 'this_month') return month(y, m);
  if (key === 'last_month') return month(y, m - 1);
  if (key === 'last_30_days') {
    const end = new Date(Date.UTC(y, m, today.getUTCDate()));
    const start = new Date(end.getTime() - 29 * 86_400_000);
    return { key, from: iso(start), to: iso(end), grain: 'day' };
  }
  const match = /^(\d{4})-(\d{2})$/.exec(key);
  if (match) {
    const year = Number(match[1]);
    const monthNumber = Number(match[2]);
    if (year >= 1970 && year <= 9999 && monthNumber >= 1 && monthNumber <= 12)
      return month(year, monthNumber - 1);
  }
  throw new RangeError(`unknown period ${key}: use this_month, last_month, last_30_days or YYYY-MM`);
}

export type SiteStats = { articles_published: number; backlinks_industry: number; backlinks_local: number };

/**
 * The statement of `siteStats`, compiled once: with the key check and without. Built by the query
 * builder on every request, it cost the statistics route more of the server's thread than anything
 * else but the sockets (docs/performance.md, "Reads").
 */
const statsQuery = (withKey: boolean) =>
  prepared(
    (db, v: { siteId: string; grain: Period['grain']; from: string; to: string; keyId: string }) =>
      db
        .selectFrom('stats_buckets')
        .select((eb) => [
          eb.fn.coalesce(eb.fn.sum<string>('articles_published'), sql<string>`0`).as('articles_published'),
          eb.fn.coalesce(eb.fn.sum<string>('backlinks_industry'), sql<string>`0`).as('backlinks_industry'),
          eb.fn.coalesce(eb.fn.sum<string>('backlinks_local'), sql<string>`0`).as('backlinks_local'),
          siteOwner({ siteId: v.siteId }),
          keyLive(withKey ? v.keyId : undefined),
        ])
        .where('site_id', '=', v.siteId)
        .where('grain', '=', v.grain)
        .where('bucket', '>=', v.from)
        .where('bucket', '<=', v.to),
    withKey ? ['siteId', 'grain', 'from', 'to', 'keyId'] : ['siteId', 'grain', 'from', 'to'],
  );
const statsQueries = { plain: statsQuery(false), keyed: statsQuery(true) };

/**
 * The counters of one site of the account over a period: one monthly row, or at most 31 daily rows.
 * Undefined for a site that is not the account's (unknown or another account's alike); with
 * `liveKey`, a revoked key is refused by the same statement.
 */
export async function siteStats(db: Db, scope: SiteScope, period: Period): Promise<SiteStats | undefined> {
  const { siteId, liveKey } = scope;
  const values = { siteId, grain: period.grain, from: period.from, to: period.to, keyId: liveKey ?? '' };
  const [row] = await (liveKey === undefined ? statsQueries.plain : statsQueries.keyed)(db, values);
  if (row === undefined) throw new Error('the statistics statement returned no row');
  return inScope(scope, row, () => ({
    articles_published: Number(row.articles_published),
    backlinks_industry: Number(row.backlinks_industry),
    backlinks_local: Number(row.backlinks_local),
  }));
}

/** The dates of a period, first to last (inclusive, UTC). Pure. */
export function periodDays(period: Pick<Period, 'from' | 'to'>): string[] {
  const days: string[] = [];
  const last = Date.parse(`${period.to}T00:00:00Z`);
  for (let t = Date.parse(`${period.from}T00:00:00Z`); t <= last; t += 86_400_000) {
    days.push(new Date(t).toISOString().slice(0, 10));
  }
  return days;
}

export type DailyStats = SiteStats & { day: string };

/**
 * The daily counters of one site of the account over a period, one entry per day that has any (at most
 * 31 rows), oldest first. Undefined for a site that is not the account's.
 */
export async function siteDailyStats(
  db: Db,
  scope: SiteScope,
  period: Pick<Period, 'from' | 'to'>,
): Promise<DailyStats[] | undefined> {
  const row = await db
    .selectFrom('stats_buckets')
    .select([
      sql<DailyStats[]>`coalesce(json_agg(json_build_object(
          'day', bucket::text,
          'articles_published', articles_published,
          'backlinks_industry', backlinks_industry,
          'backlinks_local', backlinks_local) order by bucket), '[]'::json)`.as('days'),
      siteOwner(scope),
      keyLive(scope.liveKey),
    ])
    .where('site_id', '=', scope.siteId)
    .where('grain', '=', 'day')
    .where('bucket', '>=', period.from)
    .where('bucket', '<=', period.to)
    .executeTakeFirstOrThrow();
  return inScope(scope, row, () => row.days);
}
