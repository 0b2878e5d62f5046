import { type ArticleState, evolve, initialState } from '../domain/article/decider.ts';
import { type ArticleEvent, articleStream } from '../domain/article/events.ts';
import type { Db } from '../infra/db/schema.ts';
import type { Projector } from './projector.ts';

/**
 * Snapshots of the article aggregate: `evolve` applied to the previous snapshot, in the append's
 * transaction. Commands load the snapshot and the events after it (infra/commands.ts); like every read
 * model it can be dropped and rebuilt from the events.
 */
export const articleSnapshotsProjector: Projector = {
  name: 'article_snapshots@1',
  mode: 'inline',
  handles: [
    'ArticleCreated',
    'ArticleEdited',
    'FeaturedImageReplaced',
    'ArticleRestored',
    'ArticleStatusChanged',
  ],
  tables: ['article_snapshots'],
  async apply(event, trx) {
    const articleId = (event.data as { articleId: string }).articleId;
    const previous = await trx
      .selectFrom('article_snapshots')
      .select(['version', 'state'])
      .where('article_id', '=', articleId)
      .executeTakeFirst();
    if (previous && previous.version >= event.version) return;
    const state = evolve(
      (previous?.state as ArticleState | undefined) ?? initialState,
      event as unknown as ArticleEvent,
    );
    await trx
      .insertInto('article_snapshots')
      .values({ article_id: articleId, version: event.version, state: JSON.stringify(state) })
      .onConflict((oc) =>
        oc.column('article_id').doUpdateSet({ version: event.version, state: JSON.stringify(state) }),
      )
      .execute();
  },
};

/**
 * The snapshot of an article and, read in the same statement, its stream's version: when they are
 * equal no event follows the snapshot, and the command needs no second read.
 */
export async function readArticleSnapshot(
  db: Db,
  articleId: string,
): Promise<{ version: number; state: ArticleState; streamVersion: number } | undefined> {
  const row = await db
    .selectFrom('article_snapshots as s')
    .innerJoin('streams as st', (join) => join.on('st.stream_id', '=', articleStream(articleId)))
    .select(['s.version', 's.state', 'st.version as stream_version'])
    .where('s.article_id', '=', articleId)
    .executeTakeFirst();
  return row
    ? { version: row.version, state: row.state as ArticleState, streamVersion: row.stream_version }
    : undefined;
}
