import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The protected links of a body, found once when the body is projected instead of on every read.
 * Rows projected before this migration hold null: a read finds their links in the body
 * (`articleOut`, apps/application/articles.ts) until a rebuild fills the column.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('article_bodies').addColumn('protected_links', 'jsonb').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('article_bodies').dropColumn('protected_links').execute();
}
