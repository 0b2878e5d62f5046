import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { once } from '../../apps/application/idempotency.ts';
import type { Db } from '../../infra/db/schema.ts';
import { type AnswerKey, keepAnswer } from '../../infra/idempotency.ts';
import { backends, createTestDatabase, onPostgres, type TestDatabase } from '../support/db.ts';

/*
 * A write under an idempotency key keeps its answer in the transaction that commits its change: a
 * process killed after that commit leaves an answer its retry replays (no second change), one killed
 * before it leaves nothing (the retry runs the change).
 */

const request = { key: 'k', request: ['PATCH', '/api/v1/articles/art_1', null, { title: 'T' }] };
const answer = (revision: number) => ({ revision });

/** A change that commits its answer with it (as an article change's append does) and then runs `after`. */
function change(db: Db, value: { revision: number }, after: () => Promise<void> = async () => {}) {
  return async (key: AnswerKey) => {
    await db.transaction().execute(async (trx) => {
      await keepAnswer(trx, key, value);
      await after();
    });
    return value;
  };
}

describe.each(backends)('writes under an idempotency key on %s', (backend) => {
  let test: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    test = await createTestDatabase(backend);
    db = test.handle.db;
  });
  afterAll(async () => test.drop());

  it('replays the answer of a change committed by a process that died before answering', async () => {
    const died = new Error('killed after the commit');
    const key = { ...request, key: 'after-commit' };
    await expect(
      once(db, 'acc_1', key, async (at) => {
        await change(db, answer(2))(at);
        throw died;
      }),
    ).rejects.toBe(died);
    let ran = false;
    const retry = await once(db, 'acc_1', key, async () => {
      ran = true;
      return answer(3);
    });
    expect(ran).toBe(false);
    expect(retry).toEqual({ replayed: true, value: answer(2) });
  });

  it('runs the change again when the first was rolled back with its answer', async () => {
    const key = { ...request, key: 'rolled-back' };
    await expect(
      once(
        db,
        'acc_1',
        key,
        change(db, answer(2), async () => {
          throw new Error('killed before the commit');
        }),
      ),
    ).rejects.toThrow('killed before the commit');
    expect(await once(db, 'acc_1', key, change(db, answer(2)))).toEqual({
      replayed: false,
      value: answer(2),
    });
    expect(await once(db, 'acc_1', key, change(db, answer(9)))).toEqual({ replayed: true, value: answer(2) });
  });

  it('keeps the answer of a change that committed nothing, after it', async () => {
    const key = { ...request, key: 'no-change' };
    expect(await once(db, 'acc_1', key, async () => answer(4))).toEqual({
      replayed: false,
      value: answer(4),
    });
    expect(await once(db, 'acc_1', key, async () => answer(5))).toEqual({ replayed: true, value: answer(4) });
  });

  it('refuses the same key with another request, and a malformed key, without running', async () => {
    const key = { ...request, key: 'other-request' };
    await once(db, 'acc_1', key, async () => answer(1));
    const run = vi.fn(async () => answer(2));
    await expect(once(db, 'acc_1', { ...key, request: ['PATCH', '/other'] }, run)).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(once(db, 'acc_1', { ...key, key: 'has space' }, run)).rejects.toMatchObject({
      code: 'invalid_request',
    });
    // Another account's key of the same name is its own.
    expect(await once(db, 'acc_2', key, run)).toEqual({ replayed: false, value: answer(2) });
    expect(run).toHaveBeenCalledTimes(1);
  });

  onPostgres(backend)(
    'a retry sent while the first runs waits for its commit and replays its answer',
    async () => {
      const key = { ...request, key: 'concurrent' };
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let kept: () => void = () => {};
      const firstKept = new Promise<void>((resolve) => {
        kept = resolve;
      });
      const first = once(
        db,
        'acc_1',
        key,
        change(db, answer(6), async () => {
          kept();
          await held;
        }),
      );
      await firstKept;
      const second = once(db, 'acc_1', key, change(db, answer(7)));
      // The second's insert waits on the first's uncommitted row.
      await vi.waitFor(
        async () => {
          const waiting = await sql<{ n: number }>`
            select count(*)::int as n from pg_locks where not granted and locktype = 'transactionid'`.execute(
            db,
          );
          expect(waiting.rows[0]?.n).toBeGreaterThan(0);
        },
        { timeout: 30_000, interval: 20 },
      );
      release();
      expect(await first).toEqual({ replayed: false, value: answer(6) });
      expect(await second).toEqual({ replayed: true, value: answer(6) });
    },
  );
});
