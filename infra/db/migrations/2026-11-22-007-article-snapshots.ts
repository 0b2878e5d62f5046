import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The article aggregate's state after its latest event, kept in the append's transaction, so a
 * command folds the events after the snapshot (usually none) instead of the whole history, whose
 * every revision carries a full body.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('article_snapshots')
    .addColumn('article_id', 'text', (c) => c.primaryKey())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('state', 'jsonb', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('article_snapshots').ifExists().execute();
}
