import { type Kysely, sql } from 'kysely';

// The event store: an append-only `events` log, one `streams` row per stream (the row optimistic
// concurrency is decided on) and the subscribers' `checkpoints`.

// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('events')
    .addColumn('position', 'bigint', (col) => col.generatedAlwaysAsIdentity().primaryKey())
    .addColumn('event_id', 'uuid', (col) => col.notNull().unique())
    .addColumn('stream_id', 'text', (col) => col.notNull())
    .addColumn('version', 'integer', (col) => col.notNull())
    .addColumn('type', 'text', (col) => col.notNull())
    .addColumn('data', 'jsonb', (col) => col.notNull())
    .addColumn('metadata', 'jsonb', (col) => col.notNull())
    .addColumn('transaction_id', sql`xid8`, (col) => col.notNull().defaultTo(sql`pg_current_xact_id()`))
    .addColumn('recorded_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('events_stream_id_version_key', ['stream_id', 'version'])
    .execute();

  // Subscribers read the log in (transaction_id, position) order, all of it or by event type.
  await db.schema
    .createIndex('events_transaction_id_position_idx')
    .on('events')
    .columns(['transaction_id', 'position'])
    .execute();
  await db.schema
    .createIndex('events_type_transaction_id_position_idx')
    .on('events')
    .columns(['type', 'transaction_id', 'position'])
    .execute();

  await db.schema
    .createTable('streams')
    .addColumn('stream_id', 'text', (col) => col.primaryKey())
    .addColumn('version', 'integer', (col) => col.notNull())
    .addColumn('stream_type', 'text', (col) => col.notNull())
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('checkpoints')
    .addColumn('name', 'text', (col) => col.primaryKey())
    .addColumn('transaction_id', sql`xid8`, (col) => col.notNull())
    .addColumn('position', 'bigint', (col) => col.notNull())
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();
}

// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('checkpoints').execute();
  await db.schema.dropTable('streams').execute();
  await db.schema.dropTable('events').execute();
}
