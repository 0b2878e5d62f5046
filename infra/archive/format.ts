import { z } from 'zod';
import type { Database } from '../db/schema.ts';

/*
 * The export archive (`npm run cli -- export`): one gzip'd tar holding the installation's sources of
 * truth, everything that no replay of the event log can make again:
 *
 *   events/000001.ndjson ...           the event log in position order, one row per line
 *   checkpoints/000001.ndjson          the subscriptions' checkpoints (webhooks, publishing), not the read models'
 *   tables/<table>/000001.ndjson ...   each table of SOURCE_TABLES, one row per line
 *   media/<ab>/<sha256>.<ext>          each stored image, as MEDIA_DIR holds it
 *   manifest.json                      last: what the archive holds, each NDJSON part's rows, bytes and SHA-256
 *
 * A row is the database's own JSON of it (`to_jsonb(row)`), so every value (timestamps to the
 * microsecond, bigints, arrays, jsonb) comes back as it was through `jsonb_populate_recordset`. Parts
 * are cut at about PART_BYTES, so that a part is written whole without holding the installation.
 * The read models are not in it: the import replays the log into them. An image's checksum is its
 * name (the store is content-addressed), so the manifest counts the images and their bytes rather than
 * listing each: its size does not grow with the number of images.
 */

/** The archive is not one this code can import; nothing was written. */
export class ArchiveRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArchiveRefused';
  }
}

export const FORMAT = 'content-service-export';
/** The archive formats this code reads; the one it writes is the last. */
export const FORMAT_VERSIONS = [1] as const;
export const FORMAT_VERSION = 1;

/** A part is cut once it holds this many bytes (a row is never split). */
export const PART_BYTES = 4 * 1024 * 1024;

export const MANIFEST = 'manifest.json';

type TableName = keyof Database & string;

/**
 * The tables that are sources of truth besides the event log, in the order an import loads them (a
 * table after those it refers to): credentials and sessions, the authorization server's state, the
 * webhook endpoints and their work. `order`: how rows are written, so that two exports of the same
 * installation are alike. `sequence`: a column filled by a sequence, whose next value the import sets.
 * Every other table of the schema is a read model (its projector's `tables`), the event store's
 * (`events`, `checkpoints`) or kysely's migration bookkeeping: tests/cli/import-refusals.int.test.ts holds
 * the list to the schema.
 */
export const SOURCE_TABLES: ReadonlyArray<{ name: TableName; order: readonly string[]; sequence?: string }> =
  [
    { name: 'streams', order: ['stream_id'] },
    { name: 'credentials', order: ['holder_id', 'kind'] },
    { name: 'api_key_usage', order: ['key_id'] },
    { name: 'idempotency_keys', order: ['account_id', 'key'] },
    { name: 'oauth_keys', order: ['id'] },
    { name: 'oauth_models', order: ['kind', 'id'] },
    { name: 'oauth_grants', order: ['grant_id'] },
    { name: 'web_sessions', order: ['id_hash'] },
    { name: 'mcp_sessions', order: ['id'] },
    { name: 'mcp_session_subscriptions', order: ['session_id', 'uri'] },
    { name: 'sign_in_failures', order: ['key'] },
    { name: 'webhook_endpoints', order: ['id'] },
    { name: 'webhook_deliveries', order: ['seq'], sequence: 'seq' },
    { name: 'webhook_attempts', order: ['delivery_id', 'attempt'] },
  ];

/** The tables of the migrations' own bookkeeping, in no archive. */
export const MIGRATION_TABLES = ['kysely_migration', 'kysely_migration_lock'] as const;

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);

/** One NDJSON part of the archive: its path, what it holds, its rows (lines), its bytes and SHA-256. */
export const Part = z.strictObject({
  path: z.string().min(1),
  kind: z.enum(['events', 'checkpoints', 'table']),
  /** For a `table` part: which table. */
  table: z.string().optional(),
  rows: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  sha256: Sha256,
});
export type Part = z.infer<typeof Part>;

export const Manifest = z.strictObject({
  format: z.literal(FORMAT),
  version: z.number().int(),
  created_at: z.string(),
  /** The last migration of the schema the rows are in. */
  schema: z.string().min(1),
  source: z.strictObject({ backend: z.enum(['postgres', 'pglite']) }),
  /** Rows per kind: `events`, `checkpoints`, each table's name; `media` files and `media_bytes`. */
  counts: z.record(z.string(), z.number().int().nonnegative()),
  parts: z.array(Part),
});
export type Manifest = z.infer<typeof Manifest>;

/** The name of a part: `events/000001.ndjson`, `tables/credentials/000002.ndjson`. */
export function partPath(prefix: string, n: number): string {
  return `${prefix}/${String(n).padStart(6, '0')}.ndjson`;
}
