import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * What lists and statistics `as_of` an instant read.
 *
 * `article_history`: what an article's list entry showed from one of its revisions on (status,
 * published_at, featured image), written only by the events that change those (creation, a status
 * change, a new featured image, a restore), never by an edit of the title or body. Filled by its
 * async projector from the log, as a new read model is.
 *
 * `backlinks.recorded_at`: when the service recorded a backlink (its event's time), filled here from
 * the log for the backlinks already projected. A backlink a release without this column projects (a
 * rolling upgrade) gets the time it was projected, a moment after its event.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('article_history')
    .addColumn('article_id', 'text', (c) => c.notNull())
    .addColumn('revision', 'integer', (c) => c.notNull())
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('published_at', 'timestamptz')
    .addColumn('featured_image', 'jsonb')
    .addPrimaryKeyConstraint('article_history_pkey', ['article_id', 'revision'])
    .execute();
  // A site's list as of an instant: each article's last entry by then.
  await sql`create index article_history_site on article_history (site_id, article_id, revision desc) include (at)`.execute(
    db,
  );
  // A period's published articles as of an instant: the entries that put one in the period.
  await sql`create index article_history_site_published on article_history (site_id, published_at) include (at)`.execute(
    db,
  );

  await sql`alter table backlinks add column recorded_at timestamptz`.execute(db);
  await sql`
    update backlinks b set recorded_at = e.at
    from (
      select distinct on (data->>'backlinkId') data->>'backlinkId' as id, (metadata->>'at')::timestamptz as at
      from events where type = 'BacklinkAcquired'
      order by data->>'backlinkId', position
    ) e
    where e.id = b.id`.execute(db);
  await sql`update backlinks set recorded_at = now() where recorded_at is null`.execute(db);
  await sql`alter table backlinks alter column recorded_at set default now(), alter column recorded_at set not null`.execute(
    db,
  );
  // A period's backlinks as of an instant, counted from the index alone.
  await sql`create index backlinks_site_acquired_recorded on backlinks (site_id, acquired_on, recorded_at) include (category)`.execute(
    db,
  );
}

export async function down(db: AnyDb): Promise<void> {
  await sql`drop index if exists backlinks_site_acquired_recorded`.execute(db);
  await sql`alter table backlinks drop column if exists recorded_at`.execute(db);
  await db.schema.dropTable('article_history').ifExists().execute();
}
