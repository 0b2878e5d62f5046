import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { DomainError, parameterError } from '../domain/errors.ts';
import type { Db } from './db/schema.ts';

export type StoredResponse = { status: number; headers: Record<string, string>; body: unknown };

const WINDOW = sql`interval '24 hours'`;
/** An Idempotency-Key: 1 to 255 visible ASCII characters (the API's header and MCP's `idempotency_key`). */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export function requestHash(parts: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/**
 * Runs `work` once per (account, Idempotency-Key) within 24 hours. A retry with the same key and the same
 * request gets the first answer again, without running `work` (so no second revision, no second edit
 * counted); the same key with a different request is a 422; a retry while the first is still running
 * is a 409. Only successful answers are kept: after an error the key may be used again.
 */
export async function idempotent(
  db: Db,
  accountId: string,
  key: string,
  hash: string,
  work: () => Promise<StoredResponse>,
): Promise<{ replayed: boolean; response: StoredResponse }> {
  if (!IDEMPOTENCY_KEY.test(key)) {
    throw parameterError('The Idempotency-Key must be 1 to 255 visible ASCII characters', [
      { in: 'header', name: 'idempotency-key', message: 'must be 1 to 255 visible ASCII characters' },
    ]);
  }
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .where('created_at', '<', sql<Date>`now() - ${WINDOW}`)
    .execute();
  const claimed = await db
    .insertInto('idempotency_keys')
    .values({ account_id: accountId, key, request_hash: hash, status: null, headers: null, body: null })
    .onConflict((oc) => oc.columns(['account_id', 'key']).doNothing())
    .executeTakeFirst();
  if ((claimed.numInsertedOrUpdatedRows ?? 0n) === 0n) {
    const existing = await db
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'status', 'headers', 'body'])
      .where('account_id', '=', accountId)
      .where('key', '=', key)
      .executeTakeFirst();
    if (!existing) return idempotent(db, accountId, key, hash, work);
    if (existing.request_hash !== hash) {
      throw parameterError('This Idempotency-Key was used for a different request', [
        {
          in: 'header',
          name: 'idempotency-key',
          message: 'was used with a different request in the last 24 hours',
        },
      ]);
    }
    if (existing.status === null) {
      throw new DomainError(
        'conflict',
        'A request with this Idempotency-Key is still being processed; retry shortly',
      );
    }
    return {
      replayed: true,
      response: { status: existing.status, headers: existing.headers ?? {}, body: existing.body },
    };
  }
  let response: StoredResponse;
  try {
    response = await work();
  } catch (error) {
    await db
      .deleteFrom('idempotency_keys')
      .where('account_id', '=', accountId)
      .where('key', '=', key)
      .execute();
    throw error;
  }
  await db
    .updateTable('idempotency_keys')
    .set({
      status: response.status,
      headers: JSON.stringify(response.headers),
      body: JSON.stringify(response.body),
    })
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .execute();
  return { replayed: false, response };
}
