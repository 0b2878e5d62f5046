import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * The activity log's records about an article, newest first: the log filtered by article
 * (`?article_id=`, the MCP tool's `article_id`, support staff's timeline of an article) reads that
 * article's records and counts them from here, where it walked the account's whole log
 * (`activity_account_at`) to find them, a page of a rare article in a long log reading all of it.
 * Only the records that name an article have an entry. The account is not in the key: an article
 * belongs to one account, and the records of another account's refused calls that name it are few
 * and filtered out from the rows.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`
    create index activity_article on activity (article_id, at desc, id desc)
    where article_id is not null`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await sql`drop index if exists activity_article`.execute(db);
}
