import { type Expression, type RawBuilder, type Selectable, type SqlBool, sql } from 'kysely';
import { type ArticleCreated, type ArticleEvent, articleEventTypes } from '../domain/article/events.ts';
import { wordCount } from '../domain/html/facts.ts';
import type { HtmlMemory } from '../domain/html/memory.ts';
import type { RevisionsTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { eachEvent, IN_TRANSACTION, type Pending, ROW_STREAM, runsOf } from '../infra/projection.ts';
import { keyLive } from './accounts.ts';
import { inlineProjector, offsetOf, type Page, type PageQuery } from './projector.ts';

/**
 * One row per revision of an article: who made it, from where, why, and the title and size after it.
 * With the runtime's html memory, the size of a body the decider just sanitised is read from it.
 */
export function createRevisionsProjector(memory?: HtmlMemory) {
  // Every article event is a revision: one insert each, in a transaction (rebuilds, imports).
  const eachRevision = eachEvent((event: Pending<ArticleEvent>, when: Expression<SqlBool>) => [
    event.type === 'ArticleCreated' ? insertFirst(event, when, memory) : insertRun([event], when, memory),
  ]);
  return inlineProjector({
    name: 'revisions@1',
    mode: 'inline',
    handles: articleEventTypes,
    tables: ['revisions'],
    /**
     * Within an append's statement, a run of later revisions of one article, or runs of several
     * articles (a commit group's), as one insert; a new article's first revision, alone, as its own.
     */
    project(events, at) {
      const [only] = events;
      if (at.trx !== undefined || only === undefined || events.length === 1) return eachRevision(events, at);
      const later = events.filter((event) => event.type !== 'ArticleCreated');
      if (later.length !== events.length) return IN_TRANSACTION;
      const runs = runsOf(later);
      return runs.length === 1
        ? [insertRun(later, at.appended(only.streamId), memory)]
        : [insertRuns(runs, at.appended(ROW_STREAM), memory)];
    },
  });
}

/** The first revision's row, inserted when `when` holds. */
function insertFirst(
  event: Pending<ArticleCreated>,
  when: Expression<SqlBool>,
  memory: HtmlMemory | undefined,
): RawBuilder<unknown> {
  const d = event.data;
  return sql`
    insert into revisions (article_id, revision, event_type, origin, actor, reason, created_at, title, word_count, restored_from)
    select ${d.articleId}, ${d.revision}::integer, ${event.type}, ${d.origin}, ${JSON.stringify(d.actor)}::jsonb,
           ${d.reason}::text, ${event.metadata.at}::timestamptz, ${d.title}::text,
           ${wordCount(d.body, memory)}::integer, null
     where ${when}
    on conflict (article_id, revision) do nothing`;
}

/**
 * The rows of a run of later revisions of one article (edits, restores, new featured images, status
 * changes), inserted
 * when `when` holds. The title and size after an edit that leaves one of them as it was come from the
 * last event of the run that set it, or else from the revision before the run (none there: nothing is
 * inserted up to the run's first restore, which names both, as for a replay out of order). One
 * statement whose text is the same for any run: the rows go as one JSON parameter.
 */
function insertRun(
  run: readonly Pending<Exclude<ArticleEvent, ArticleCreated>>[],
  when: Expression<SqlBool>,
  memory: HtmlMemory | undefined,
): RawBuilder<unknown> {
  const [first] = run;
  if (first === undefined) throw new Error('a run of article events is never empty');
  const articleId = first.data.articleId;
  return sql`
    insert into revisions (article_id, revision, event_type, origin, actor, reason, created_at, title, word_count, restored_from)
    select ${articleId}::text, r.revision, r.event_type, r.origin, r.actor, r.reason, r.created_at,
           coalesce(r.title, p.title), coalesce(r.word_count, p.word_count), r.restored_from
      from jsonb_to_recordset(${JSON.stringify(runRows(run, memory))}::jsonb) as r (revision integer, event_type text,
             origin text, actor jsonb, reason text, created_at timestamptz, title text, word_count integer,
             restored_from integer, anchored boolean)
      left join revisions p on p.article_id = ${articleId} and p.revision = ${first.data.revision - 1}::integer
     where (r.anchored or p.revision is not null) and ${when}
     order by r.revision
    on conflict (article_id, revision) do nothing`;
}

/**
 * `insertRun` of several runs, each of its own article, as one statement: each run's rows `r` with
 * its article, its stream (`r.stream_id`) and the revision before it; a run's rows are inserted when
 * `when` holds for them (its stream's claim succeeded).
 */
function insertRuns(
  runs: readonly (readonly Pending<Exclude<ArticleEvent, ArticleCreated>>[])[],
  when: Expression<SqlBool>,
  memory: HtmlMemory | undefined,
): RawBuilder<unknown> {
  const rows = runs.flatMap((run) => {
    const [first] = run;
    if (first === undefined) return [];
    const place = {
      stream_id: first.streamId,
      article_id: first.data.articleId,
      before: first.data.revision - 1,
    };
    return runRows(run, memory).map((row) => ({ ...place, ...row }));
  });
  return sql`
    insert into revisions (article_id, revision, event_type, origin, actor, reason, created_at, title, word_count, restored_from)
    select r.article_id, r.revision, r.event_type, r.origin, r.actor, r.reason, r.created_at,
           coalesce(r.title, p.title), coalesce(r.word_count, p.word_count), r.restored_from
      from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r (stream_id text, article_id text, before integer,
             revision integer, event_type text, origin text, actor jsonb, reason text, created_at timestamptz,
             title text, word_count integer, restored_from integer, anchored boolean)
      left join revisions p on p.article_id = r.article_id and p.revision = r.before
     where (r.anchored or p.revision is not null) and ${when}
     order by r.article_id, r.revision
    on conflict (article_id, revision) do nothing`;
}

/**
 * The rows of a run: each revision with the title and size after it, as far as the run says them
 * (null: as the revision before the run), and whether a restore at or before it names both.
 */
function runRows(
  run: readonly Pending<Exclude<ArticleEvent, ArticleCreated>>[],
  memory: HtmlMemory | undefined,
) {
  let title: string | null = null;
  let words: number | null = null;
  let anchored = false;
  return run.map((event) => {
    const d = event.data;
    if (event.type === 'ArticleRestored') anchored = true;
    if (event.type === 'ArticleEdited' || event.type === 'ArticleRestored') {
      title = event.data.title ?? title;
      if (event.data.body !== undefined) words = wordCount(event.data.body, memory);
    }
    return {
      revision: d.revision,
      event_type: event.type,
      origin: d.origin,
      actor: d.actor,
      reason: d.reason,
      created_at: event.metadata.at,
      title,
      word_count: words,
      restored_from: event.type === 'ArticleRestored' ? event.data.restoredFrom : null,
      anchored,
    };
  });
}

/** A revision as its list and lookup read it: its row without the article id. */
export type RevisionRow = Pick<Selectable<RevisionsTable>, (typeof revisionColumns)[number]>;

const revisionColumns = [
  'revision',
  'event_type',
  'origin',
  'actor',
  'reason',
  'created_at',
  'title',
  'word_count',
  'restored_from',
] as const;

/** Revisions of an article, newest first. The caller has checked the article belongs to the account. */
export async function listRevisions(db: Db, articleId: string, q: PageQuery): Promise<Page<RevisionRow>> {
  const base = db.selectFrom('revisions').where('article_id', '=', articleId);
  const [rows, count] = await Promise.all([
    base.select(revisionColumns).orderBy('revision', 'desc').limit(q.perPage).offset(offsetOf(q)).execute(),
    base.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/** One revision's record. The caller has checked the article belongs to the account. */
export async function findRevision(
  db: Db,
  articleId: string,
  revision: number,
): Promise<RevisionRow | undefined> {
  const row = await db
    .selectFrom('revisions')
    .select(revisionColumns)
    .where('article_id', '=', articleId)
    .where('revision', '=', revision)
    .executeTakeFirst();
  return row;
}

/**
 * The revision of an article current at `instant`: its newest whose time, to the second as the wire
 * shows it, is not after it; null when it had none then (or no such article). The API key is
 * confirmed unrevoked in the same statement. The caller checks the article is the account's.
 */
export async function revisionAsOf(
  db: Db,
  articleId: string,
  instant: Date,
  liveKey: string | undefined,
): Promise<{ revision: number | null; keyLive: boolean }> {
  const { rows } = await sql<{ revision: number | null; key_live: boolean }>`select
      (select max(revision) from revisions
        where article_id = ${articleId} and date_trunc('second', created_at) <= ${instant}::timestamptz) as revision,
      ${keyLive(liveKey)}`.execute(db);
  const [row] = rows;
  return { revision: row?.revision ?? null, keyLive: row?.key_live ?? false };
}

/**
 * The revision numbers of an article whose decimal form starts with `prefix`, newest first, at most
 * `limit` of them, and how many there are in all. The caller has checked the article belongs to the account.
 */
export async function suggestRevisions(
  db: Db,
  articleId: string,
  prefix: string,
  limit: number,
): Promise<{ revisions: number[]; total: number }> {
  const base = db
    .selectFrom('revisions')
    .where('article_id', '=', articleId)
    .where(sql<string>`revision::text`, 'like', `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  const [rows, count] = await Promise.all([
    base.select('revision').orderBy('revision', 'desc').limit(limit).execute(),
    base.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { revisions: rows.map((r) => r.revision), total: Number(count.n) };
}
