import { type Kysely, type Selectable, sql } from 'kysely';
import type { Database, Db, WebhookAttemptsTable, WebhookDeliveriesTable } from '../db/schema.ts';
import type { RowWindow } from './endpoints.ts';

/*
 * Where webhook deliveries wait and are listed (tables `webhook_deliveries`, `webhook_attempts`): the
 * statements that queue them (live, replay, redelivery), find the endpoints that have some pending,
 * and list them with their attempts. Claiming and recording a send are in claims.ts and attempts.ts.
 * What to queue, when and for whom is the delivery engine's (apps/application/webhook-*.ts).
 */

/** Rows per multi-row insert, ids per `in` list. */
const ROWS_PER_STATEMENT = 500;

/** A delivery row as the subscription and replays insert it. */
export type NewDelivery = {
  id: string;
  endpoint_id: string;
  account_id: string;
  event_id: string;
  event_type: string;
  payload: string;
  source: 'live' | 'replay';
  source_id: string | null;
  status: 'pending';
  attempts: number;
  next_attempt_at: Date;
  created_at: Date;
};

/**
 * Inserts deliveries in `executor` (their batch's transaction), in their order. `live`: at most one live
 * delivery per (endpoint, event), the unique index's; one already there is kept and this one dropped.
 */
export async function insertDeliveries(
  executor: Kysely<Database>,
  rows: readonly NewDelivery[],
  opts: { live: boolean },
): Promise<void> {
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    const insert = executor.insertInto('webhook_deliveries').values(rows.slice(i, i + ROWS_PER_STATEMENT));
    await (opts.live
      ? insert
          // The live-once index's predicate, as a literal: a parameter cannot prove the partial index applies.
          .onConflict((oc) =>
            oc.columns(['endpoint_id', 'event_id']).where(sql<boolean>`source = 'live'`).doNothing(),
          )
          .execute()
      : insert.execute());
  }
}

/** An enabled endpoint as the subscription matches events to it. */
export type SubscribedEndpoint = { id: string; account_id: string; events: string[]; created_at: Date };

/** The enabled endpoints of these accounts, oldest first (ties by id). */
export function enabledEndpointsOf(
  executor: Kysely<Database>,
  accountIds: readonly string[],
): Promise<SubscribedEndpoint[]> {
  return executor
    .selectFrom('webhook_endpoints')
    .select(['id', 'account_id', 'events', 'created_at'])
    .where('enabled', '=', true)
    .where('account_id', 'in', accountIds)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** The endpoints with a pending live delivery of one of these events. */
export async function endpointsWithLivePending(db: Db, eventIds: readonly string[]): Promise<Set<string>> {
  const endpoints = new Set<string>();
  for (let i = 0; i < eventIds.length; i += ROWS_PER_STATEMENT) {
    const rows = await db
      .selectFrom('webhook_deliveries')
      .select('endpoint_id')
      .distinct()
      .where('source', '=', 'live')
      .where('status', '=', 'pending')
      .where('event_id', 'in', eventIds.slice(i, i + ROWS_PER_STATEMENT))
      .execute();
    for (const row of rows) endpoints.add(row.endpoint_id);
  }
  return endpoints;
}

/** Every enabled endpoint with a pending delivery, by id. */
export async function endpointsWithPending(db: Db): Promise<string[]> {
  const rows = await db
    .selectFrom('webhook_endpoints as e')
    .select('e.id')
    .where('e.enabled', '=', true)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('webhook_deliveries as d')
          .select(sql`1`.as('one'))
          .whereRef('d.endpoint_id', '=', 'e.id')
          .where('d.status', '=', 'pending'),
      ),
    )
    .orderBy('e.id')
    .execute();
  return rows.map((row) => row.id);
}

/** An endpoint's oldest pending delivery, with what planning its job needs. */
export type PendingHead = {
  id: string;
  attempts: number;
  next_attempt_at: Date;
  claimed_until: Date | null;
  /** The endpoint's version: its `updated_at`. */
  endpoint_updated_at: Date;
};

/** The endpoint's oldest pending delivery, when the endpoint is enabled. */
export function headOf(db: Db, endpointId: string): Promise<PendingHead | undefined> {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select([
      'd.id',
      'd.attempts',
      'd.next_attempt_at',
      'd.claimed_until',
      'e.updated_at as endpoint_updated_at',
    ])
    .where('d.endpoint_id', '=', endpointId)
    .where('d.status', '=', 'pending')
    .where('e.enabled', '=', true)
    .orderBy('d.seq')
    .limit(1)
    .executeTakeFirst();
}

/** A delivery row as the deliveries list shows it: everything but its payload and claim. */
const DELIVERY_COLUMNS = [
  'id',
  'endpoint_id',
  'account_id',
  'event_id',
  'event_type',
  'source',
  'source_id',
  'status',
  'attempts',
  'next_attempt_at',
  'last_attempt_at',
  'last_status_code',
  'last_duration_ms',
  'last_error',
  'delivered_at',
  'created_at',
] as const;

/** A delivery without its payload and claim. */
export type DeliveryRow = Omit<Selectable<WebhookDeliveriesTable>, 'payload' | 'seq' | 'claimed_until'>;
/** One attempt of a delivery. */
export type AttemptRow = Selectable<WebhookAttemptsTable>;

/** A page of an endpoint's deliveries, newest first, and how many it has. */
export async function listDeliveries(
  db: Db,
  endpointId: string,
  window: RowWindow,
): Promise<{ rows: DeliveryRow[]; total: number }> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('webhook_deliveries')
      .select(DELIVERY_COLUMNS)
      .where('endpoint_id', '=', endpointId)
      .orderBy('seq', 'desc')
      .limit(window.limit)
      .offset(window.offset)
      .execute(),
    db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('endpoint_id', '=', endpointId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/** The latest `latest` attempts of each delivery, newest first, by delivery id. */
export async function attemptLogs(
  db: Db,
  deliveryIds: readonly string[],
  latest: number,
): Promise<Map<string, AttemptRow[]>> {
  const logs = new Map<string, AttemptRow[]>();
  if (deliveryIds.length === 0) return logs;
  const rows = await db
    .selectFrom((eb) =>
      eb
        .selectFrom('webhook_attempts')
        .selectAll()
        .select(sql<number>`row_number() over (partition by delivery_id order by attempt desc)`.as('rank'))
        .where('delivery_id', 'in', deliveryIds)
        .as('a'),
    )
    .select(['delivery_id', 'attempt', 'at', 'status_code', 'duration_ms', 'error'])
    .where('rank', '<=', latest)
    .orderBy('delivery_id')
    .orderBy('attempt', 'desc')
    .execute();
  for (const row of rows) {
    const log = logs.get(row.delivery_id) ?? [];
    log.push(row);
    logs.set(row.delivery_id, log);
  }
  return logs;
}

/**
 * Queues a copy of a delivery of the account's endpoint as a new pending delivery `id` (`source:
 * redelivery`, `source_id` the original, no attempts, due `now`), with the original's message: its
 * event id, type and payload. The copy, or undefined when the account's endpoint has no such delivery.
 */
export function insertRedelivery(
  db: Db,
  copy: { id: string; accountId: string; endpointId: string; deliveryId: string; now: Date },
): Promise<DeliveryRow | undefined> {
  const { id, now } = copy;
  return db
    .insertInto('webhook_deliveries')
    .columns([
      'id',
      'endpoint_id',
      'account_id',
      'event_id',
      'event_type',
      'payload',
      'source',
      'source_id',
      'status',
      'attempts',
      'next_attempt_at',
      'created_at',
    ])
    .expression((eb) =>
      eb
        .selectFrom('webhook_deliveries')
        .select((s) => [
          sql.val(id).as('id'),
          'endpoint_id',
          'account_id',
          'event_id',
          'event_type',
          'payload',
          sql.lit('redelivery').as('source'),
          'id as source_id',
          sql.lit('pending').as('status'),
          sql.lit(0).as('attempts'),
          s.val(now).as('next_attempt_at'),
          s.val(now).as('created_at'),
        ])
        .where('id', '=', copy.deliveryId)
        .where('endpoint_id', '=', copy.endpointId)
        .where('account_id', '=', copy.accountId),
    )
    .returning(DELIVERY_COLUMNS)
    .executeTakeFirst();
}

/**
 * What the deliveries look like now, for the metrics: enabled endpoints whose last attempt failed
 * (failing since then), and deliveries waiting to be sent.
 */
export async function webhookBacklog(
  db: Db,
): Promise<{ failingEndpoints: number; pendingDeliveries: number }> {
  const [failing, pending] = await Promise.all([
    db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('enabled', '=', true)
      .where('failing_since', 'is not', null)
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow(),
  ]);
  return { failingEndpoints: Number(failing.n), pendingDeliveries: Number(pending.n) };
}
