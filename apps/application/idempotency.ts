import { isDeepStrictEqual } from 'node:util';
import { DomainError, parameterError } from '../../domain/errors.ts';
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

/**
 * Runs a write once per (account, idempotency key) within 24 hours: a retry with the same key and the
 * same request gets the first answer again without running (no second revision, no second edit
 * counted); the same key with a different request is refused (`invalid_request`, 422). `write` is
 * given the key: it keeps its answer in the transaction that commits its change (an article change's
 * append), so a process killed between the two leaves neither or both. A write that commits nothing has
 * its answer kept after it. A retry sent while the first runs waits for the first's commit (the key's
 * row) and replays its answer. Only answers are kept: after a refusal the key may be used again.
 */
export async function once<T>(
  db: Db,
  accountId: string,
  idempotency: Idempotency,
  write: (key: AnswerKey) => Promise<T>,
): Promise<{ value: T; replayed: boolean }> {
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
    // Another request with this key committed first: its answer is this one's.
    const taken = isKeyTaken(error) ? await findKept(db, accountId, key.key) : undefined;
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
