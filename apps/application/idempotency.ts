import { isDeepStrictEqual } from 'node:util';
import { DomainError, isDomainError } from '../../domain/errors.ts';
import type { Db } from '../../infra/db/schema.ts';
import {
  type AnswerKey,
  findKept,
  IDEMPOTENCY_KEY,
  isKeyTaken,
  type Kept,
  keepAnswer,
  requestHash,
} from '../../infra/idempotency.ts';
import type { Idempotency } from './call.ts';
import { parameterError } from './contract.ts';

/** A write's answer, and whether it is the first answer replayed (a retry under the same idempotency key). */
export type Answer<T> = { value: T; replayed: boolean };

/**
 * A write with an optional idempotency key: with one, `once`; without, `write` as it is, given no key
 * (never a replay). What every face's writes go through: the article changes and the webhook endpoints.
 */
export function onceIfKeyed<T>(
  db: Db,
  accountId: string,
  idempotency: Idempotency | undefined,
  write: (key: AnswerKey | undefined) => Promise<T>,
): Promise<Answer<T>> {
  if (idempotency === undefined) return write(undefined).then((value) => ({ value, replayed: false }));
  return once(db, accountId, idempotency, write);
}

/**
 * `work` in a transaction that keeps its answer under `key` too (none without a key), so that the
 * change and its answer commit together or not at all: for a write whose change is its own statements
 * (an article change keeps its answer in the append instead). Should another request have kept the key
 * first, the transaction fails and changes nothing, and `once` answers with the other's answer.
 */
export function keepingAnswer<T>(
  db: Db,
  key: AnswerKey | undefined,
  work: (trx: Db) => Promise<T>,
): Promise<T> {
  return db.transaction().execute(async (trx) => {
    const answer = await work(trx);
    if (key !== undefined) await keepAnswer(trx, key, answer);
    return answer;
  });
}

/**
 * Runs a write once per (account, idempotency key) within 24 hours: a retry with the same key and the
 * same request gets the first answer again without running (no second revision, no second edit
 * counted); the same key with a different request is refused (`invalid_request`, 400). `write` is
 * given the key: it keeps its answer in the transaction that commits its change (an article change's
 * append), so a process killed between the two leaves neither or both. A write that commits nothing has
 * its answer kept after it. A retry sent while the first runs waits for the first's commit (the key's
 * row) and replays its answer; one refused because of what the first did meanwhile (a deletion finding
 * the endpoint gone) gets the first's answer too. Only answers are kept: after a refusal the key may
 * be used again.
 */
export async function once<T>(
  db: Db,
  accountId: string,
  idempotency: Idempotency,
  write: (key: AnswerKey) => Promise<T>,
): Promise<Answer<T>> {
  if (!IDEMPOTENCY_KEY.test(idempotency.key)) {
    throw parameterError('The Idempotency-Key must be 1 to 255 visible ASCII characters', [
      { in: 'header', name: 'idempotency-key', message: 'must be 1 to 255 visible ASCII characters' },
    ]);
  }
  const key: AnswerKey = { accountId, key: idempotency.key, requestHash: requestHash(idempotency.request) };
  const first = await findKept(db, accountId, key.key);
  if (first) return { value: replay<T>(first, key), replayed: true };
  let value: T;
  try {
    value = await write(key);
  } catch (error) {
    // Another request with this key committed first: its answer is this one's. So too when this one
    // was refused for what the other did meanwhile (a deletion that finds the endpoint gone).
    const taken =
      isKeyTaken(error) || isDomainError(error) ? await findKept(db, accountId, key.key) : undefined;
    if (taken) return { value: replay<T>(taken, key), replayed: true };
    throw error;
  }
  if (!(await keepAnswer(db, key, value, { ifAbsent: true }))) {
    // Kept already: by the write's own transaction, or by another request with the key that committed
    // first (this one then changed nothing); the other's answer is this one's.
    const kept = await findKept(db, accountId, key.key);
    if (kept && !kept.open && !isDeepStrictEqual(kept.answer, JSON.parse(JSON.stringify(value)))) {
      return { value: kept.answer as T, replayed: true };
    }
  }
  return { value, replayed: false };
}

/** The kept answer for a retry: refused for a different request under the key, or for a claim still open. */
function replay<T>(kept: Kept, key: AnswerKey): T {
  if (kept.requestHash !== key.requestHash) {
    throw parameterError('This Idempotency-Key was used for a different request', [
      {
        in: 'header',
        name: 'idempotency-key',
        message: 'was used with a different request in the last 24 hours',
      },
    ]);
  }
  if (kept.open) {
    throw new DomainError(
      'conflict',
      'A request with this Idempotency-Key is still being processed; retry shortly',
    );
  }
  return kept.answer as T;
}
