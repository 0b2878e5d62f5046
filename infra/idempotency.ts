import { createHash } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { Database, Db } from './db/schema.ts';

/*
 * Where the answers of idempotent writes are kept: one row per (account, key), for 24 hours. What a
 * write under a key does (replay, refuse, run once) is the application's (apps/application/idempotency.ts).
 */

const WINDOW = sql`interval '24 hours'`;
/** An Idempotency-Key: 1 to 255 visible ASCII characters (the API's header and MCP's `idempotency_key`). */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export function requestHash(parts: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/** One write's key in its account, and the hash of the request it names. */
export type AnswerKey = { accountId: string; key: string; requestHash: string };

/**
 * What is kept under a key: the request's hash and the answer, or (`open`) a claim without an answer,
 * which only older versions of the service wrote (they claimed a key before running the write).
 */
export type Kept =
  | { requestHash: string; answer: unknown; open: false }
  | { requestHash: string; open: true };

/** What is kept under a key within the last 24 hours (an older row is deleted first). */
export async function findKept(db: Db, accountId: string, key: string): Promise<Kept | undefined> {
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .where('created_at', '<', sql<Date>`now() - ${WINDOW}`)
    .execute();
  const row = await db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status', 'body'])
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .executeTakeFirst();
  if (!row) return undefined;
  return row.status === null
    ? { requestHash: row.request_hash, open: true }
    : { requestHash: row.request_hash, answer: row.body, open: false };
}

/**
 * Keeps an answer under its key: in `executor` (the transaction of the change it answers, so both
 * commit or neither), failing on a key kept already (`isKeyTaken`); or, with `ifAbsent`, not at all
 * then (false). The status and headers columns are what older versions read: always 200 and none.
 */
export async function keepAnswer(
  executor: Kysely<Database>,
  at: AnswerKey,
  answer: unknown,
  opts: { ifAbsent?: boolean } = {},
): Promise<boolean> {
  const insert = executor.insertInto('idempotency_keys').values({
    account_id: at.accountId,
    key: at.key,
    request_hash: at.requestHash,
    status: 200,
    headers: '{}',
    body: JSON.stringify(answer),
  });
  const result = await (opts.ifAbsent
    ? insert.onConflict((oc) => oc.columns(['account_id', 'key']).doNothing())
    : insert
  ).executeTakeFirst();
  return (result.numInsertedOrUpdatedRows ?? 0n) > 0n;
}

/** Whether `error` is the unique violation of an idempotency key (another request kept it first). */
export function isKeyTaken(error: unknown): boolean {
  const e = error as { code?: unknown; constraint?: unknown };
  return e?.code === '23505' && e.constraint === 'idempotency_keys_pk';
}
