import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * A secret the Connect Site page shows once (a new API key, a new webhook endpoint's signing secret),
 * kept with the web session that made it between the form's POST and the page its 303 leads to, so
 * that the secret is never in an address and a reload does not send the form again
 * (apps/server/web/shown-once.ts). `shown_once` is encrypted under a key derived from the session's
 * cookie value, which the database does not hold; `shown_once_until` ends it after a few minutes.
 * Showing it clears both.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('web_sessions')
    .addColumn('shown_once', 'text')
    .addColumn('shown_once_until', 'timestamptz')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('web_sessions')
    .dropColumn('shown_once')
    .dropColumn('shown_once_until')
    .execute();
}
