import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * No parallel workers for the tables a search reads: the article list (`articles`, read newest first
 * through `articles_account_published`) and the two sides of the search (`article_title_search`,
 * `article_bodies`). PostgreSQL plans a search whose words are in thousands of articles with workers
 * (a parallel scan of the titles' words, a parallel walk of the list), which shortens one search on
 * an idle machine and costs every search more of the machine when many run at once: each worker is a
 * process to start and a share of the same work to hand back. On two cores at ten concurrent searches,
 * the middling search of `bench/search.ts` answered 35 to 40 requests a second without them against 27
 * to 29 with them, its p99 about 320 ms against 500 (docs/performance.md, "Search"). A reloption, not a
 * setting of the service's connections: it holds through a pooler that does not pass settings, for
 * every process that reads the tables. Nothing else the service asks of these tables is a parallel
 * plan's kind of work (pages of 100 read through an index).
 */
const TABLES = ['articles', 'article_title_search', 'article_bodies'] as const;

export async function up(db: AnyDb): Promise<void> {
  for (const table of TABLES)
    await sql`alter table ${sql.table(table)} set (parallel_workers = 0)`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of TABLES) await sql`alter table ${sql.table(table)} reset (parallel_workers)`.execute(db);
}
