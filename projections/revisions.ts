import { type Expression, type RawBuilder, type Selectable, type SqlBool, sql } from 'kysely';
import { type ArticleEvent, articleEventTypes } from '../domain/article/events.ts';
import { wordCount } from '../domain/html/facts.ts';
import type { HtmlMemory } from '../domain/html/memory.ts';
import type { RevisionsTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { applyStatements, type Pending } from '../infra/projection.ts';
import { inlineProjector, offsetOf, type Page, type PageQuery } from './projector.ts';

/**
 * One row per revision of an article: who made it, from where, why, and the title and size after it.
 * With the runtime's html memory, the size of a body the decider just sanitised is read from it.
 */
export function createRevisionsProjector(memory?: HtmlMemory) {
  // Every article event is a revision.
  const statements = (event: Pending<ArticleEvent>, _db: unknown, appended: Expression<SqlBool>) => [
    insertRevision(event, appended, memory),
  ];
  return inlineProjector({
    name: 'revisions@1',
    mode: 'inline',
    handles: articleEventTypes,
    tables: ['revisions'],
    apply: applyStatements(statements),
    statementsFor: statements,
  });
}

/** The revision's row, inserted when `when` holds (and, after the first, when the revision before is there). */
function insertRevision(
  event: Pending<ArticleEvent>,
  when: Expression<SqlBool>,
  memory: HtmlMemory | undefined,
): RawBuilder<unknown> {
  const d = event.data;
  const row = {
    article_id: d.articleId,
    revision: d.revision,
    event_type: event.type,
    origin: d.origin,
    actor: JSON.stringify(d.actor),
    reason: d.reason,
    created_at: event.metadata.at,
  };
  if (event.type === 'ArticleCreated' || event.type === 'ArticleRestored') {
    const restoredFrom = event.type === 'ArticleRestored' ? event.data.restoredFrom : null;
    return sql`
      insert into revisions (article_id, revision, event_type, origin, actor, reason, created_at, title, word_count, restored_from)
      select ${row.article_id}, ${row.revision}::integer, ${row.event_type}, ${row.origin}, ${row.actor}::jsonb,
             ${row.reason}::text, ${row.created_at}::timestamptz, ${event.data.title}::text,
             ${wordCount(event.data.body, memory)}::integer, ${restoredFrom}::integer
       where ${when}
      on conflict (article_id, revision) do nothing`;
  }
  // The title and size after an edit that leaves one of them as it was come from the revision
  // before, in the same statement (none before: nothing is inserted, as for a replay out of order).
  const title = event.type === 'ArticleEdited' ? event.data.title : undefined;
  const words =
    event.type === 'ArticleEdited' && event.data.body !== undefined
      ? wordCount(event.data.body, memory)
      : undefined;
  return sql`
    insert into revisions (article_id, revision, event_type, origin, actor, reason, created_at, title, word_count, restored_from)
    select ${row.article_id}, ${row.revision}::integer, ${row.event_type}, ${row.origin}, ${row.actor}::jsonb,
           ${row.reason}::text, ${row.created_at}::timestamptz,
           coalesce(${title ?? null}::text, p.title), coalesce(${words ?? null}::integer, p.word_count), null
      from revisions p
     where p.article_id = ${row.article_id} and p.revision = ${row.revision - 1} and ${when}
    on conflict (article_id, revision) do nothing`;
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
