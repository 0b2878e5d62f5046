import type { ColumnType, Kysely } from 'kysely';
import type { EventMetadata } from '../../domain/event.ts';
import type { ReadModelTables } from './read-model-tables.ts';

/*
 * The one kysely `Database` interface of the app.
 *
 * Column types follow what `pg` returns over the wire, on both backends (PostgreSQL and PGlite
 * behind pglite-socket go through the same `pg` driver):
 * - `bigint` (int8) comes back as a decimal string: pg's default, lossless and JSON-safe; no
 *   global type parser is installed. The event store turns positions into JS `bigint` at its
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

/** When each API key was last used; written in batches, not a read model (migration 003). */
export interface ApiKeyUsageTable {
  key_id: string;
  last_used_at: ColumnType<Date, Date | string, Date | string>;
}

/** First answers to writes with an Idempotency-Key (migration 004); `status` null: an old version's claim. */
export interface IdempotencyKeysTable {
  account_id: string;
  key: string;
  request_hash: string;
  status: number | null;
  headers: ColumnType<Record<string, string> | null, string | null, string | null>;
  body: ColumnType<unknown, string | null, string | null>;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

/** What oidc-provider persists (migration 005): ids are SHA-256 hashes of the artifacts' values. */
export interface OAuthModelsTable {
  kind: string;
  id: string;
  payload: ColumnType<Record<string, unknown>, string, string>;
  grant_id: string | null;
  uid: string | null;
  user_code: string | null;
  expires_at: ColumnType<Date | null, Date | null, Date | null>;
  consumed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** The authorization server's keys (signing keys, cookie keys, web secret), generated once (migration 005). */
export interface OAuthKeysTable {
  id: string;
  material: ColumnType<unknown, string, never>;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

/** What a person allowed an assistant to do for their account (migration 005). */
export interface OAuthGrantsTable {
  grant_id: string;
  account_id: string;
  client_id: string;
  client_name: string;
  redirect_host: string;
  scope: string;
  created_at: ColumnType<Date, Date, never>;
  last_used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  revoked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** Signed-in browsers (migration 005); `id_hash` is the SHA-256 of the cookie's value. */
export interface WebSessionsTable {
  id_hash: string;
  /** The account holder signed in, or null for a staff member's session. */
  account_id: string | null;
  /** The support staff member signed in, or null for an account holder's session. */
  staff_id: ColumnType<string | null, string | null | undefined, never>;
  created_at: ColumnType<Date, Date, never>;
  expires_at: ColumnType<Date, Date, Date>;
  /** A secret to show once on the next page (migration 023, apps/server/web/shown-once.ts): encrypted, or null. */
  shown_once: ColumnType<string | null, string | null | undefined, string | null>;
  /** Until when `shown_once` may be shown. */
  shown_once_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** A 2025-era MCP session (migration 022): made by `initialize`, for one account and OAuth client. */
export interface McpSessionsTable {
  id: string;
  account_id: string;
  client_id: string;
  created_at: ColumnType<Date, Date, never>;
  last_seen_at: ColumnType<Date, Date, Date>;
}

/** A resource a 2025-era MCP session subscribed to (migration 022). */
export interface McpSessionSubscriptionsTable {
  session_id: string;
  uri: string;
}

/** Failed sign-ins per email, per email from a client and per client address (migration 005, throttle.ts). */
export interface SignInFailuresTable {
  key: string;
  failures: number;
  first_failed_at: ColumnType<Date, Date, Date>;
  last_failed_at: ColumnType<Date, Date, Date>;
  locked_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/**
 * Secrets, outside the event log and the read models (migration 011): a password's argon2id hash
 * (`holder_id` an account or staff id) or an API key's SHA-256 (`holder_id` the key id). Written with
 * the event that says it was set, in the same transaction (apps/application/commands/credentials.ts).
 */
export interface CredentialsTable {
  holder_id: string;
  kind: 'password' | 'api_key';
  secret: string;
  updated_at: ColumnType<Date, Date, Date>;
}

/** An account's webhook endpoints (migration 015); `secret` (`whsec_...`) signs every delivery. */
export interface WebhookEndpointsTable {
  id: string;
  account_id: string;
  url: string;
  /** The event types it receives (domain/vocabulary.ts WEBHOOK_EVENT_TYPES). */
  events: string[];
  description: string | null;
  secret: string;
  enabled: boolean;
  /** Why it was disabled: `gone` (it answered 410), `failing` (3 days of failures), `account` (turned off). */
  disabled_reason: string | null;
  disabled_at: Date | null;
  /** The first failure since its last success; null while it succeeds. */
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** One message to send to an endpoint (migration 015); an endpoint's go out one at a time, by `seq`. */
export interface WebhookDeliveriesTable {
  seq: ColumnType<string, never, never>;
  id: string;
  endpoint_id: string;
  account_id: string;
  /** The message id: the log's event id; `webhook-id` and the body's `id`, the same on every attempt. */
  event_id: string;
  event_type: string;
  /** The body sent: `{id, type, created_at, data}`. */
  payload: ColumnType<unknown, string, string>;
  /** `live` (the subscription, once per event and endpoint), `replay` or `redelivery`. */
  source: 'live' | 'replay' | 'redelivery';
  /** The replay's id, or the delivery redelivered. */
  source_id: string | null;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  next_attempt_at: Date;
  /** Set while a worker sends it; a claim past this time was lost with its worker. */
  claimed_until: Date | null;
  last_attempt_at: Date | null;
  last_status_code: number | null;
  last_duration_ms: number | null;
  last_error: string | null;
  delivered_at: Date | null;
  created_at: Date;
}

/** Every attempt of a delivery (migration 015). */
export interface WebhookAttemptsTable {
  delivery_id: string;
  attempt: number;
  at: Date;
  /** The endpoint's HTTP status; null when it did not answer (timeout, refused, ...). */
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

/** Every table: the event store's, the read models' (read-model-tables.ts) and the service's own state. */
export interface Database extends ReadModelTables {
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  credentials: CredentialsTable;
  api_key_usage: ApiKeyUsageTable;
  idempotency_keys: IdempotencyKeysTable;
  events: EventsTable;
  streams: StreamsTable;
  checkpoints: CheckpointsTable;
  oauth_models: OAuthModelsTable;
  oauth_keys: OAuthKeysTable;
  oauth_grants: OAuthGrantsTable;
  web_sessions: WebSessionsTable;
  mcp_sessions: McpSessionsTable;
  mcp_session_subscriptions: McpSessionSubscriptionsTable;
  sign_in_failures: SignInFailuresTable;
}

export type Db = Kysely<Database>;
