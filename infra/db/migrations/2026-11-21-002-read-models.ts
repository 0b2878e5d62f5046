import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/** The read models: rebuilt from the events at any time, so nothing here is the source of truth. */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`create unique index accounts_email on accounts (lower(email))`.execute(db);

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull().unique())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .execute();
  await db.schema
    .createIndex('api_keys_account')
    .on('api_keys')
    .columns(['account_id', 'created_at'])
    .execute();

  await db.schema
    .createTable('staff')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`create unique index staff_email on staff (lower(email))`.execute(db);

  await db.schema
    .createTable('sites')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('sites_account')
    .on('sites')
    .columns(['account_id', 'created_at', 'id'])
    .execute();

  await db.schema
    .createTable('articles')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('published_at', 'timestamptz')
    .addColumn('target_keyword', 'text')
    .addColumn('word_count', 'integer', (c) => c.notNull())
    .addColumn('featured_image', 'jsonb')
    .addColumn('revision', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
  // Lists are newest first with ties by id, optionally filtered by status: both orders served by an index.
  await sql`create index articles_site_published on articles (site_id, published_at desc nulls last, id desc)`.execute(
    db,
  );
  await sql`create index articles_site_status_published on articles (site_id, status, published_at desc nulls last, id desc)`.execute(
    db,
  );

  await db.schema
    .createTable('article_bodies')
    .addColumn('article_id', 'text', (c) => c.primaryKey())
    .addColumn('body', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('revisions')
    .addColumn('article_id', 'text', (c) => c.notNull())
    .addColumn('revision', 'integer', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('origin', 'text', (c) => c.notNull())
    .addColumn('actor', 'jsonb', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('word_count', 'integer', (c) => c.notNull())
    .addColumn('restored_from', 'integer')
    .addPrimaryKeyConstraint('revisions_pk', ['article_id', 'revision'])
    .execute();

  await db.schema
    .createTable('backlinks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('acquired_on', 'date', (c) => c.notNull())
    .addColumn('source_domain', 'text', (c) => c.notNull())
    .addColumn('source_url', 'text', (c) => c.notNull())
    .addColumn('target_url', 'text', (c) => c.notNull())
    .addColumn('anchor_text', 'text', (c) => c.notNull())
    .addColumn('anchor_type', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .execute();
  await sql`create index backlinks_site_acquired on backlinks (site_id, acquired_on desc, id desc)`.execute(
    db,
  );
  await sql`create index backlinks_site_category_acquired on backlinks (site_id, category, acquired_on desc, id desc)`.execute(
    db,
  );

  await db.schema
    .createTable('stats_buckets')
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('grain', 'text', (c) => c.notNull())
    .addColumn('bucket', 'date', (c) => c.notNull())
    .addColumn('articles_published', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('backlinks_industry', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('backlinks_local', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('stats_buckets_pk', ['site_id', 'grain', 'bucket'])
    .execute();

  await db.schema
    .createTable('stats_articles')
    .addColumn('article_id', 'text', (c) => c.primaryKey())
    .addColumn('site_id', 'text', (c) => c.notNull())
    .addColumn('counted_on', 'date')
    .execute();

  await db.schema
    .createTable('activity')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('actor', 'jsonb', (c) => c.notNull())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('site_id', 'text')
    .addColumn('article_id', 'text')
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('request_id', 'text')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .execute();
  await sql`create index activity_account_at on activity (account_id, at desc, id desc)`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of [
    'activity',
    'stats_articles',
    'stats_buckets',
    'backlinks',
    'revisions',
    'article_bodies',
    'articles',
    'sites',
    'staff',
    'api_keys',
    'accounts',
  ]) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
