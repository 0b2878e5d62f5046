import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * Webhooks (CONTRACT "Webhooks", docs/webhooks.md):
 * - `webhook_endpoints`: an account's endpoints, with the signing secret (it must be read to sign) and
 *   why and when an endpoint was disabled;
 * - `webhook_deliveries`: one row per message to send to an endpoint: made once per (event, endpoint)
 *   by the webhook subscription (`source` live; the partial unique index says so), or by a replay or a
 *   redelivery. `seq` orders an endpoint's deliveries: they go out one at a time in that order;
 * - `webhook_attempts`: every attempt of a delivery, what the endpoint answered and how long it took.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', sql`text[]`, (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('disabled_reason', 'text')
    .addColumn('disabled_at', 'timestamptz')
    .addColumn('failing_since', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_endpoints_account')
    .on('webhook_endpoints')
    .column('account_id')
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('seq', 'bigserial', (c) => c.primaryKey())
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('endpoint_id', 'text', (c) =>
      c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
    )
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('source_id', 'text')
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending'))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull())
    .addColumn('claimed_until', 'timestamptz')
    .addColumn('last_attempt_at', 'timestamptz')
    .addColumn('last_status_code', 'integer')
    .addColumn('last_duration_ms', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('delivered_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addCheckConstraint('webhook_deliveries_source', sql`source in ('live', 'replay', 'redelivery')`)
    .addCheckConstraint('webhook_deliveries_status', sql`status in ('pending', 'succeeded', 'failed')`)
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_live_once')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'event_id'])
    .unique()
    .where(sql.ref('source'), '=', 'live')
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_pending')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'seq'])
    .where(sql.ref('status'), '=', 'pending')
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_endpoint')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'seq desc'])
    .execute();

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('delivery_id', 'text', (c) =>
      c.notNull().references('webhook_deliveries.id').onDelete('cascade'),
    )
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addPrimaryKeyConstraint('webhook_attempts_pkey', ['delivery_id', 'attempt'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('webhook_attempts').ifExists().execute();
  await db.schema.dropTable('webhook_deliveries').ifExists().execute();
  await db.schema.dropTable('webhook_endpoints').ifExists().execute();
}
