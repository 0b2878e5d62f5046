import { type Expression, type RawBuilder, type SqlBool, sql } from 'kysely';
import { wordCount } from '../domain/html/facts.ts';
import type { HtmlMemory } from '../domain/html/memory.ts';
import type { ActorJson } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { ALWAYS, offsetOf, type Page, type PageQuery, type Pending, type Projector } from './projector.ts';

/**
 * One row per revision of an article: who made it, from where, why, and the title and size after it.
 * With the runtime's html memory, the size of a body the decider just sanitised is read from it.
 */
export function createRevisionsProjector(memory?: HtmlMemory): Projector {
  return {
    name: 'revisions@1',
    mode: 'inline',
    handles: [
      'ArticleCreated',
      'ArticleEdited',
      'FeaturedImageReplaced',
      'ArticleRestored',
      'ArticleStatusChanged',
    ],
    tables: ['revisions'],
    async apply(event, trx) {
      const statement = insertRevision(event, ALWAYS, memory);
      if (statement !== undefined) await statement.execute(trx);
    },
    statementsFor(event, _db, appended) {
      const statement = insertRevision(event, appended, memory);
      return statement === undefined ? [] : [statement];
    },
  };
}

/** The projector without an html memory (rebuilds, status, the async runner). */
export const revisionsProjector: Projector = createRevisionsProjector();

/** The revision row of an article event (none for an event without a revision). */
function insertRevision(
  event: Pending,
  when: Expression<SqlBool>,
  memory: HtmlMemory | undefined,
): RawBuilder<unknown> | undefined {
  const d = event.data;
  if (!('revision' in d) || !('articleId' in d)) return undefined;
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

export type RevisionRow = {
  revision: number;
  event_type: string;
  origin: 'api' | 'mcp' | 'editor' | 'rewrite';
  actor: ActorJson;
  reason: string | null;
  created_at: Date;
  title: string;
  word_count: number;
  restored_from: number | null;
};

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
  return { rows: rows as RevisionRow[], total: Number(count.n) };
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
  return row as RevisionRow | undefined;
}
