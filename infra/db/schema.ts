import type { ColumnType, Kysely } from 'kysely';
import type { EventMetadata } from '../../domain/event.ts';
import type { ReadModelTables } from './read-model-tables.ts';

/*
 * The one kysely `Database` interface of the app.
 *
 * Column types follow what `pg` returns over the wire, on both backends (PostgreSQL and PGlite
 * behind pglite-socket go through the same `pg` driver):
 * - `bigint` (int8) comes back as a decimal string: pg's default, lossless and JSON-safe; we do
 *   not install a global type parser. The event store turns positions into JS `bigint` at its
 *   boundary (see infra/event-store.ts).
 * - `xid8` has no pg parser and comes back as a string as well.
 * - `timestamptz` comes back as a JS `Date`; `jsonb` as parsed JSON.
 * - jsonb is written as a JSON string (`JSON.stringify`), never as a raw JS value: pg would turn a
 *   JS array into a PostgreSQL array literal.
 */

/** The append-only event log. `position` is the global position, `version` the 1-based stream version. */
export interface EventsTable {
  position: ColumnType<string, never, never>;
  event_id: string;
  stream_id: string;
  version: number;
  type: string;
  data: ColumnType<unknown, string, never>;
  metadata: ColumnType<EventMetadata, string, never>;
  /** xid8 of the appending transaction; set by the default `pg_current_xact_id()`. */
  transaction_id: ColumnType<string, never, never>;
  recorded_at: ColumnType<Date, never, never>;
}

/** One row per stream: its current version, the row optimistic concurrency is decided on. */
export interface StreamsTable {
  stream_id: string;
  version: number;
  /** The stream id's prefix before the first `-`, e.g. `article`. */
  stream_type: string;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

/** Subscribers' checkpoints in the global log, written in the same transaction as the rows they cover. */
export interface CheckpointsTable {
  name: string;
  /** xid8, as a decimal string. */
  transaction_id: string;
  /** bigint, as a decimal string. */
  position: string;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

/** The event store's tables and the read models' (read-model-tables.ts). */
/** When each API key was last used; written in batches, not a read model (migration 003). */
export interface ApiKeyUsageTable {
  key_id: string;
  last_used_at: ColumnType<Date, Date | string, Date | string>;
}

/** First answers to writes sent with an Idempotency-Key (migration 004); `status` null while in progress. */
export interface IdempotencyKeysTable {
  account_id: string;
  key: string;
  request_hash: string;
  status: number | null;
  headers: ColumnType<Record<string, string> | null, string | null, string | null>;
  body: ColumnType<unknown, string | null, string | null>;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface Database extends ReadModelTables {
  api_key_usage: ApiKeyUsageTable;
  idempotency_keys: IdempotencyKeysTable;
  events: EventsTable;
  streams: StreamsTable;
  checkpoints: CheckpointsTable;
}

export type Db = Kysely<Database>;
