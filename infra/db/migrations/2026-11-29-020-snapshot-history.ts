import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The article aggregate's state (without its body, as in `article_snapshots`) kept every
 * SNAPSHOT_HISTORY_EVERY versions, so that the article at a past revision (a revision page, `as_of`)
 * folds the few events after the nearest one instead of its whole history. Articles written before
 * have none until the snapshots projection is rebuilt; their past revisions fold from the first event.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('article_snapshot_history')
    .addColumn('article_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('state', 'jsonb', (c) => c.notNull())
    .addPrimaryKeyConstraint('article_snapshot_history_pkey', ['article_id', 'version'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('article_snapshot_history').ifExists().execute();
}
