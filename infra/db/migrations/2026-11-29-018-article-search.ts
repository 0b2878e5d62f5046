import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The articles' full-text search: a weighted tsvector beside the body (`article_bodies.search`: body
 * text C, then title A, then target keyword B) and its GIN index. The articles projector writes it in
 * the append's statement with the configured SEARCH_LANGUAGE (a generated column could only have a
 * language fixed here). The rows already there are filled with the default, `english`: another
 * SEARCH_LANGUAGE takes a `projections rebuild articles`. PostgreSQL's parser skips the body's tags and
 * character references, so the vector is the body's text without extracting it. The account's articles
 * newest first (`articles_account_published`): where a search that matches many reads its candidates.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`alter table article_bodies add column search tsvector not null default ''`.execute(db);
  // Kept whole, not compressed: a search of common words tests the vectors of up to SEARCH_RANKED_MAX
  // articles, and decompressing each costs more than reading it (about 80 against 20 µs a vector).
  await sql`alter table article_bodies alter column search set storage external`.execute(db);
  await sql`update article_bodies b
    set search = setweight(to_tsvector('english', b.body), 'C')
      || setweight(to_tsvector('english', a.title), 'A')
      || setweight(to_tsvector('english', coalesce(a.target_keyword, '')), 'B')
    from articles a where a.id = b.article_id`.execute(db);
  await sql`create index article_bodies_search on article_bodies using gin (search)`.execute(db);
  // A search that matches many articles ranks the newest SEARCH_RANKED_MAX: read in this order.
  await sql`create index articles_account_published on articles (account_id, published_at desc nulls last, id desc)`.execute(
    db,
  );
}

export async function down(db: AnyDb): Promise<void> {
  await sql`drop index articles_account_published`.execute(db);
  await sql`drop index article_bodies_search`.execute(db);
  await sql`alter table article_bodies drop column search`.execute(db);
}
