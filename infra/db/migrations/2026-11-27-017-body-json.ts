import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The body as a JSON string (`"<p>...`, quotes and escapes included), escaped by PostgreSQL when the
 * body is written rather than by the server on every read: the article's answer embeds it as it is
 * (docs/performance.md, "Get article: the body escaped once"). A stored generated column, so that
 * every writer of a body (the projector, a rebuild, this migration's backfill) keeps the two equal.
 * `to_json` is only stable (its output depends on settings for some types); for text it depends on
 * nothing, which `json_string` states so that a generated column may use it.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`create function json_string(value text) returns text
    language sql immutable strict parallel safe
    return to_json(value)::text`.execute(db);
  // Compressed as the body is (migration 010): lz4, where PostgreSQL has it (PGlite has not).
  await sql`
    do $$ begin
      alter table article_bodies
        add column body_json text compression lz4 generated always as (json_string(body)) stored;
    exception when feature_not_supported then
      alter table article_bodies add column body_json text generated always as (json_string(body)) stored;
    end $$`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await sql`alter table article_bodies drop column body_json`.execute(db);
  await sql`drop function json_string(text)`.execute(db);
}
