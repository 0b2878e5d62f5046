import { type Kysely, type Selectable, sql } from 'kysely';
import { type ArticleEvent, articleStream } from '../../domain/article/events.ts';
import type { Database, Db } from '../db/schema.ts';
import {
  type LogPosition,
  type NewEvent,
  type StoredEvent,
  storedColumns,
  toStoredEvent,
} from '../event-store.ts';

/*
 * What webhook messages are made from: the log's events and the article rows of the read models, as
 * the message maker (apps/application/webhook-events.ts) and replays (webhook-replay.ts) read them.
 * Each takes the executor it runs on: the subscription's batch transaction, or the database.
 */

/** Ids per `in` list, keys per `or` list. */
const IDS_PER_STATEMENT = 500;

/** The columns of an article row a message's data is made from, with the article's account. */
const ARTICLE_COLUMNS = [
  'id',
  'site_id',
  'account_id',
  'title',
  'url',
  'status',
  'published_at',
  'target_keyword',
  'word_count',
  'featured_image',
  'revision',
  'updated_at',
] as const;

/** An article row as a message's data is made from it, with the article's account. */
export type ArticleSourceRow = Pick<Selectable<Database['articles']>, (typeof ARTICLE_COLUMNS)[number]>;

/** The article rows (read model `articles`) of these ids, in no particular order; missing ones are left out. */
export async function readArticleRows(
  executor: Kysely<Database>,
  articleIds: readonly string[],
): Promise<ArticleSourceRow[]> {
  const rows: ArticleSourceRow[] = [];
  for (let i = 0; i < articleIds.length; i += IDS_PER_STATEMENT) {
    const found = await executor
      .selectFrom('articles')
      .select(ARTICLE_COLUMNS)
      .where('id', 'in', articleIds.slice(i, i + IDS_PER_STATEMENT))
      .execute();
    rows.push(...found);
  }
  return rows;
}

/** The article's events after stream version `after`, up to `upTo`, in stream order. */
export async function readArticleStream(
  executor: Kysely<Database>,
  articleId: string,
  after: number,
  upTo: number,
): Promise<StoredEvent<ArticleEvent>[]> {
  const rows = await executor
    .selectFrom('events')
    .select(storedColumns)
    .where('stream_id', '=', articleStream(articleId))
    .where('version', '>', after)
    .where('version', '<=', upTo)
    .orderBy('version')
    .execute();
  return rows.map((row) => toStoredEvent<ArticleEvent>(row));
}

/** Word counts of article revisions (read model `revisions`), by `<article id>:<revision>`; missing ones are left out. */
export async function readWordCounts(
  executor: Kysely<Database>,
  revisions: readonly { articleId: string; revision: number }[],
): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (let i = 0; i < revisions.length; i += IDS_PER_STATEMENT) {
    const slice = revisions.slice(i, i + IDS_PER_STATEMENT);
    const found = await executor
      .selectFrom('revisions')
      .select(['article_id', 'revision', 'word_count'])
      .where((eb) =>
        eb.or(
          slice.map((r) => eb.and([eb('article_id', '=', r.articleId), eb('revision', '=', r.revision)])),
        ),
      )
      .execute();
    for (const row of found) counts.set(`${row.article_id}:${row.revision}`, row.word_count);
  }
  return counts;
}

/**
 * Up to `limit` events of the account of these types, recorded at or after `from`, after `after` in
 * log order: those that name the account, and those of its articles' streams.
 */
export async function readAccountEvents<E extends NewEvent>(
  db: Db,
  q: { accountId: string; types: readonly string[]; from: Date; after: LogPosition; limit: number },
): Promise<StoredEvent<E>[]> {
  const { accountId, after } = q;
  const rows = await db
    .selectFrom('events')
    .select(storedColumns)
    .where('type', 'in', q.types)
    .where('recorded_at', '>=', q.from)
    .where(
      sql<boolean>`(transaction_id, position) > (${String(after.transactionId)}::text::xid8, ${String(after.position)}::bigint)`,
    )
    .where(
      sql<boolean>`(data->>'accountId' = ${accountId} or stream_id in (
          select 'article-' || id from articles where account_id = ${accountId}))`,
    )
    .orderBy(sql`events.transaction_id`)
    .orderBy(sql`events.position`)
    .limit(q.limit)
    .execute();
  return rows.map((row) => toStoredEvent<E>(row));
}
