import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * Per-site counts kept beside the article and backlink rows, so a list's `total` is a lookup instead of
 * counting 100,000 rows on every page. Filled from the rows already there.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('article_counts')
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('article_counts_pk', ['site_id', 'status'])
    .execute();
  await sql`insert into article_counts (site_id, status, n) select site_id, status, count(*) from articles group by 1, 2`.execute(
    db,
  );
  await db.schema
    .createTable('backlink_counts')
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('backlink_counts_pk', ['site_id', 'category'])
    .execute();
  await sql`insert into backlink_counts (site_id, category, n) select site_id, category, count(*) from backlinks group by 1, 2`.execute(
    db,
  );
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('backlink_counts').ifExists().execute();
  await db.schema.dropTable('article_counts').ifExists().execute();
}
