import { type Insertable, type Kysely, type Selectable, sql } from 'kysely';
import type { Database, Db, WebhookEndpointsTable } from '../db/schema.ts';

/*
 * Where an account's webhook endpoints are kept (table `webhook_endpoints`): the statements of the
 * endpoint use cases (apps/application/webhooks.ts), which decide what to ask. Each takes the executor
 * it runs on: the database, or the transaction that keeps the change's idempotent answer.
 */

/** An endpoint row as its use cases read it: everything but the secret. */
const ENDPOINT_COLUMNS = [
  'id',
  'account_id',
  'url',
  'events',
  'description',
  'enabled',
  'disabled_reason',
  'disabled_at',
  'failing_since',
  'created_at',
  'updated_at',
] as const;

/** An endpoint without its secret. */
export type EndpointRow = Omit<Selectable<WebhookEndpointsTable>, 'secret'>;

/** A page of rows: at most `limit`, after skipping `offset`. */
export type RowWindow = { limit: number; offset: number };

/** The account's endpoint, or undefined (another account's too). */
export function findEndpoint(
  db: Db,
  accountId: string,
  endpointId: string,
): Promise<EndpointRow | undefined> {
  return db
    .selectFrom('webhook_endpoints')
    .select(ENDPOINT_COLUMNS)
    .where('id', '=', endpointId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

/** A page of the account's endpoints, oldest first (ties by id), and how many it has. */
export async function listEndpoints(
  db: Db,
  accountId: string,
  window: RowWindow,
): Promise<{ rows: EndpointRow[]; total: number }> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('webhook_endpoints')
      .select(ENDPOINT_COLUMNS)
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .orderBy('id')
      .limit(window.limit)
      .offset(window.offset)
      .execute(),
    db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/**
 * How many endpoints the account has, counted under a lock of the account's endpoints held to the end
 * of `trx`: two registrations at once count one after the other.
 */
export async function countEndpointsLocked(trx: Kysely<Database>, accountId: string): Promise<number> {
  await sql`select pg_advisory_xact_lock(hashtext(${`webhook-endpoints:${accountId}`}))`.execute(trx);
  const { n } = await trx
    .selectFrom('webhook_endpoints')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(n);
}

/** Stores a new endpoint; its row as read back, without the secret. */
export function insertEndpoint(
  executor: Kysely<Database>,
  row: Insertable<WebhookEndpointsTable>,
): Promise<EndpointRow> {
  return executor
    .insertInto('webhook_endpoints')
    .values(row)
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirstOrThrow();
}

/**
 * A change of an endpoint: fields given are set. `enabled: true` clears the reason and time it was
 * disabled, and its failure streak unless it was enabled already; `enabled: false` disables it with
 * reason `account` at `now` unless it was disabled already (its first reason and time stay).
 */
export type EndpointChange = {
  url?: string | undefined;
  events?: readonly string[] | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
};

/** Changes the account's endpoint (its `updated_at` to `now`); its row as changed, or undefined when it has none. */
export function updateEndpoint(
  executor: Kysely<Database>,
  accountId: string,
  endpointId: string,
  change: EndpointChange,
  now: Date,
): Promise<EndpointRow | undefined> {
  const { url, events, description, enabled } = change;
  return executor
    .updateTable('webhook_endpoints')
    .set({
      updated_at: now,
      ...(url !== undefined ? { url } : {}),
      ...(events !== undefined ? { events: [...events] } : {}),
      ...(description !== undefined ? { description } : {}),
      ...(enabled === true
        ? {
            enabled: true,
            disabled_reason: null,
            disabled_at: null,
            failing_since: sql<Date | null>`case when enabled then failing_since end`,
          }
        : {}),
      ...(enabled === false
        ? {
            enabled: false,
            disabled_reason: sql<string | null>`case when enabled then 'account' else disabled_reason end`,
            disabled_at: sql<Date | null>`case when enabled then ${now}::timestamptz else disabled_at end`,
          }
        : {}),
    })
    .where('id', '=', endpointId)
    .where('account_id', '=', accountId)
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirst();
}

/**
 * Deletes the account's endpoint, and with it (the foreign keys cascade) its deliveries and their
 * attempts; false when the account has no such endpoint.
 */
export async function deleteEndpoint(
  executor: Kysely<Database>,
  accountId: string,
  endpointId: string,
): Promise<boolean> {
  const row = await executor
    .deleteFrom('webhook_endpoints')
    .where('id', '=', endpointId)
    .where('account_id', '=', accountId)
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}
