import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * Support staff's looks at an account (its `staff_view` and `staff_search` records), per account,
 * newest first: the staff's timeline of an account counts them apart from the rest of its records (it
 * lists them or not, and says how many there are), which on the account's index meant walking its
 * whole log. Only those records have an entry: they are few next to an account's calls.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`
    create index activity_staff_looks on activity (account_id, at desc)
    where operation in ('staff_view', 'staff_search')`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await sql`drop index if exists activity_staff_looks`.execute(db);
}
