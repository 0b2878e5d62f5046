import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * When each API key was last used. Operational data, not a read model: it is written in batches by
 * the API processes (never one write per request) and survives projection rebuilds.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('api_key_usage')
    .addColumn('key_id', 'text', (c) => c.primaryKey())
    .addColumn('last_used_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('api_key_usage').ifExists().execute();
}
