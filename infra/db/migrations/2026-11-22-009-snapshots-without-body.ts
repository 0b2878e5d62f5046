import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * Article snapshots do not hold the body (`article_bodies` has it, and the snapshot read joins it):
 * the body is taken out of the rows that have one, as a rebuild would leave them.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`update article_snapshots set state = state - 'body' where state ? 'body'`.execute(db);
}

/** Puts the bodies back into the snapshots from `article_bodies`, for a projector that reads them there. */
export async function down(db: AnyDb): Promise<void> {
  await sql`
    update article_snapshots s set state = s.state || jsonb_build_object('body', b.body)
    from article_bodies b
    where b.article_id = s.article_id and s.state ->> 'exists' = 'true'`.execute(db);
}
