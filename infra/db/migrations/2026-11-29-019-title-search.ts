import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The title's search words apart from the body's: `article_title_search.search` holds the title's
 * (weight A) and the target keyword's (B), `article_bodies.search` only the body's (C), each with its
 * GIN index. A new title then writes a row of a few words and their index entries, not the body's
 * vector and its hundreds of entries again. The words move as they are, so the language they were made
 * in is kept; only their positions, which followed the body's, are counted from the title's start
 * again, as the projector makes them (a body of more than 16,383 words had capped them: those keep the
 * cap until a `projections rebuild articles`). The body's vector is kept in its row, so that a search
 * reads it with the row.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`create table article_title_search (
    article_id text primary key,
    search tsvector not null
  )`.execute(db);
  // A body's vector stays in its row (MAIN: the body and its JSON text leave the row first), compressed
  // with lz4 when it does not fit as it is: a search of common words tests hundreds of vectors, about
  // 6 µs each from the row's page against 19 from the TOAST table. Only a long body's vector is moved
  // out. PGlite is built without lz4 and keeps pglz.
  await sql`alter table article_bodies alter column search set storage main`.execute(db);
  await sql`
    do $$ begin
      alter table article_bodies alter column search set compression lz4;
    exception when feature_not_supported then null;
    end $$`.execute(db);
  // The title's words as text (`'word':1A,4B`), each position less the body's last, read back.
  await sql`insert into article_title_search (article_id, search)
    select b.article_id, coalesce((
      select string_agg(
        '''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || ''':' || (
          select string_agg(greatest(p.position - last.position, 1)::text || p.weight, ',')
          from unnest(w.positions, w.weights) as p (position, weight)), ' ')::tsvector
      from unnest(ts_filter(b.search, '{a,b}')) w), '')
    from article_bodies b, lateral (
      select coalesce(max(p.position), 0) as position
      from unnest(ts_filter(b.search, '{c}')) w, unnest(w.positions) as p (position)) last`.execute(db);
  await sql`update article_bodies set search = ts_filter(search, '{c}')`.execute(db);
  await sql`create index article_title_search_search on article_title_search using gin (search)`.execute(db);
  // Searches are planned from the vectors' statistics (which words are common): there from the start.
  await sql`analyze article_title_search`.execute(db);
  await sql`analyze article_bodies`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await sql`update article_bodies b set search = b.search || t.search
    from article_title_search t where t.article_id = b.article_id`.execute(db);
  await sql`drop table article_title_search`.execute(db);
  await sql`alter table article_bodies alter column search set storage external`.execute(db);
  await sql`alter table article_bodies alter column search set compression default`.execute(db);
}
