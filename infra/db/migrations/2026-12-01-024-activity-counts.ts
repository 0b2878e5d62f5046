import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * The activity log's records counted per account, UTC day, source and site (`''` for none), so that
 * the total of a page of the log (every filter but the article's) is a sum over days instead of a count
 * of an account's records, which grow by one a call for ever (a million records took 120 ms to count,
 * their page 1 ms). The counts are kept by a statement-level trigger on `activity`, from the rows each
 * statement inserted (a row already there, skipped by `on conflict do nothing`, is not counted): every
 * writer keeps them, a process of the release before this one during a rolling upgrade too. The
 * buckets are counted in the order of their key, so two transactions counting the same ones lock them
 * in one order. Filled from the rows already there. Rows of `activity` are never deleted but with the
 * whole projection (a rebuild empties both tables).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('activity_counts')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('activity_counts_pk', ['account_id', 'day', 'source', 'site_id'])
    .execute();
  await sql`
    create function activity_counted() returns trigger language plpgsql as $$
    begin
      insert into activity_counts (account_id, day, source, site_id, n)
      select account_id, (at at time zone 'UTC')::date, source, coalesce(site_id, ''), count(*)
      from inserted group by 1, 2, 3, 4 order by 1, 2, 3, 4
      on conflict (account_id, day, source, site_id) do update set n = activity_counts.n + excluded.n;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger activity_counted after insert on activity
    referencing new table as inserted for each statement execute function activity_counted()`.execute(db);
  await sql`
    insert into activity_counts (account_id, day, source, site_id, n)
    select account_id, (at at time zone 'UTC')::date, source, coalesce(site_id, ''), count(*)
    from activity group by 1, 2, 3, 4`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await sql`drop trigger if exists activity_counted on activity`.execute(db);
  await sql`drop function if exists activity_counted()`.execute(db);
  await db.schema.dropTable('activity_counts').ifExists().execute();
}
