import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { type Kysely, sql } from 'kysely';
import { DomainError, parameterError } from '../domain/errors.ts';
import type { Database, Db } from './db/schema.ts';

export type StoredResponse = { status: number; headers: Record<string, string>; body: unknown };

const WINDOW = sql`interval '24 hours'`;
/** An Idempotency-Key: 1 to 255 visible ASCII characters (the API's header and MCP's `idempotency_key`). */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export function requestHash(parts: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/** Writes the answer to keep for a key, in the transaction of the change it answers (see `idempotent`). */
export type KeepResponse = (response: StoredResponse) => (trx: Kysely<Database>) => Promise<void>;

type Stored = {
  request_hash: string;
  status: number | null;
  headers: Record<string, string> | null;
  body: unknown;
};

/**
 * Runs `work` once per (account, Idempotency-Key) within 24 hours. A retry with the same key and the same
 * request gets the first answer again, without running `work` (so no second revision, no second edit
 * counted); the same key with a different request is a 422. `work` is given `keep`: the answer's row is
 * written by the transaction that commits the change (an article change's events), so a process killed
 * between the two leaves neither or both, and a retry after the crash either runs the change or replays
 * its answer. A retry sent while the first is still running waits for the first's commit and replays its
 * answer. A change that commits nothing (no events) has its answer kept after it. Only successful answers
 * are kept: after an error the key may be used again.
 */
export async function idempotent(
  db: Db,
  accountId: string,
  key: string,
  hash: string,
  work: (keep: KeepResponse) => Promise<StoredResponse>,
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
  const first = await storedAnswer(db, accountId, key);
  if (first) return { replayed: true, response: replay(first, hash) };
  const row = (response: StoredResponse) => ({
    account_id: accountId,
    key,
    request_hash: hash,
    status: response.status,
    headers: JSON.stringify(response.headers),
    body: JSON.stringify(response.body),
  });
  let response: StoredResponse;
  try {
    response = await work((answer) => async (trx) => {
      await trx.insertInto('idempotency_keys').values(row(answer)).execute();
    });
  } catch (error) {
    // Another request with this key committed first: its answer is this one's.
    const taken = isKeyTaken(error) ? await storedAnswer(db, accountId, key) : undefined;
    if (taken) return { replayed: true, response: replay(taken, hash) };
    throw error;
  }
  const inserted = await db
    .insertInto('idempotency_keys')
    .values(row(response))
    .onConflict((oc) => oc.columns(['account_id', 'key']).doNothing())
    .executeTakeFirst();
  if ((inserted.numInsertedOrUpdatedRows ?? 0n) === 0n) {
    // Kept already: by this change's transaction, or by another request with the key that committed
    // first (this one then changed nothing); the other's answer is this one's.
    const kept = await storedAnswer(db, accountId, key);
    if (kept && !isDeepStrictEqual(kept.body, JSON.parse(JSON.stringify(response.body)))) {
      return { replayed: true, response: replay(kept, hash) };
    }
  }
  return { replayed: false, response };
}

async function storedAnswer(db: Db, accountId: string, key: string): Promise<Stored | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status', 'headers', 'body'])
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .executeTakeFirst();
}

/** The kept answer for a retry: a 422 for a different request under the key, a 409 for a claim still open. */
function replay(existing: Stored, hash: string): StoredResponse {
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
    // Every row is written with its answer; one without is a claim left by an older version of the service.
    throw new DomainError(
      'conflict',
      'A request with this Idempotency-Key is still being processed; retry shortly',
    );
  }
  return { status: existing.status, headers: existing.headers ?? {}, body: existing.body };
}

/** Whether `error` is the unique violation of an idempotency key (another request kept it first). */
function isKeyTaken(error: unknown): boolean {
  const e = error as { code?: unknown; constraint?: unknown };
  return e?.code === '23505' && e.constraint === 'idempotency_keys_pk';
}
