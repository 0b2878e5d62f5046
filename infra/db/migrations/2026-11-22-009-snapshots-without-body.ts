import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * Article snapshots no longer hold the body (`article_bodies` has it, and the snapshot read joins
 * it): the rows projected before are made what a rebuild would make them now.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`update article_snapshots set state = state - 'body' where state ? 'body'`.execute(db);
}

/** The previous projector reads bodies from its snapshots: put them back from `article_bodies`. */
export async function down(db: AnyDb): Promise<void> {
  await sql`
    update article_snapshots s set state = s.state || jsonb_build_object('body', b.body)
    from article_bodies b
    where b.article_id = s.article_id and s.state ->> 'exists' = 'true'`.execute(db);
}
