import { wordCount } from '../domain/html/facts.ts';
import type { ActorJson } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { offsetOf, type Page, type PageQuery, type Projector } from './projector.ts';

/** One row per revision of an article: who made it, from where, why, and the title and size after it. */
export const revisionsProjector: Projector = {
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
    const d = event.data;
    if (!('revision' in d) || !('articleId' in d)) return;
    let title: string;
    let words: number;
    if (event.type === 'ArticleCreated' || event.type === 'ArticleRestored') {
      title = event.data.title;
      words = wordCount(event.data.body);
    } else {
      const previous = await trx
        .selectFrom('revisions')
        .select(['title', 'word_count'])
        .where('article_id', '=', d.articleId)
        .where('revision', '=', d.revision - 1)
        .executeTakeFirst();
      if (!previous) return;
      title =
        event.type === 'ArticleEdited' && event.data.title !== undefined ? event.data.title : previous.title;
      words =
        event.type === 'ArticleEdited' && event.data.body !== undefined
          ? wordCount(event.data.body)
          : previous.word_count;
    }
    await trx
      .insertInto('revisions')
      .values({
        article_id: d.articleId,
        revision: d.revision,
        event_type: event.type,
        origin: d.origin,
        actor: JSON.stringify(d.actor),
        reason: d.reason,
        created_at: event.metadata.at,
        title,
        word_count: words,
        restored_from: event.type === 'ArticleRestored' ? event.data.restoredFrom : null,
      })
      .onConflict((oc) => oc.columns(['article_id', 'revision']).doNothing())
      .execute();
  },
};

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
