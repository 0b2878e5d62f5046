import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../infra/db/schema.ts';
import { idempotent, type KeepResponse, type StoredResponse } from '../../infra/idempotency.ts';
import { backends, createTestDatabase, onPostgres, type TestDatabase } from '../support/db.ts';

/*
 * An Idempotency-Key's answer is kept by the transaction that commits the change it answers: a process
 * killed after that commit leaves an answer its retry replays (no second change), one killed before it
 * leaves nothing (the retry runs the change). Before, the key was claimed first and its answer written
 * after the change: a kill in between left the claim "still being processed" for 24 hours.
 */

const hash = 'c'.repeat(64);
const answer = (revision: number): StoredResponse => ({ status: 200, headers: {}, body: { revision } });

/** A change that commits `response`'s row with it (as an article change's append does) and then runs `after`. */
function change(db: Db, response: StoredResponse, after: () => Promise<void> = async () => {}) {
  return async (keep: KeepResponse): Promise<StoredResponse> => {
    await db.transaction().execute(async (trx) => {
      await keep(response)(trx);
      await after();
    });
    return response;
  };
}

describe.each(backends)('idempotency keys on %s', (backend) => {
  let test: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    test = await createTestDatabase(backend);
    db = test.handle.db;
  });
  afterAll(async () => test.drop());

  it('replays the answer of a change committed by a process that died before answering', async () => {
    const died = new Error('killed after the commit');
    await expect(
      idempotent(db, 'acc_1', 'after-commit', hash, async (keep) => {
        await change(db, answer(2))(keep);
        throw died;
      }),
    ).rejects.toBe(died);
    let ran = false;
    const retry = await idempotent(db, 'acc_1', 'after-commit', hash, async () => {
      ran = true;
      return answer(3);
    });
    expect(ran).toBe(false);
    expect(retry).toEqual({ replayed: true, response: answer(2) });
  });

  it('runs the change again when the first was rolled back with its answer', async () => {
    await expect(
      idempotent(
        db,
        'acc_1',
        'rolled-back',
        hash,
        change(db, answer(2), async () => {
          throw new Error('killed before the commit');
        }),
      ),
    ).rejects.toThrow('killed before the commit');
    const retry = await idempotent(db, 'acc_1', 'rolled-back', hash, change(db, answer(2)));
    expect(retry).toEqual({ replayed: false, response: answer(2) });
    expect(await idempotent(db, 'acc_1', 'rolled-back', hash, change(db, answer(9)))).toEqual({
      replayed: true,
      response: answer(2),
    });
  });

  it('keeps the answer of a change that committed nothing, after it', async () => {
    const first = await idempotent(db, 'acc_1', 'no-change', hash, async () => answer(4));
    expect(first.replayed).toBe(false);
    expect(await idempotent(db, 'acc_1', 'no-change', hash, async () => answer(5))).toEqual({
      replayed: true,
      response: answer(4),
    });
  });

  onPostgres(backend)(
    'a retry sent while the first runs waits for its commit and replays its answer',
    async () => {
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const first = idempotent(
        db,
        'acc_1',
        'concurrent',
        hash,
        change(db, answer(6), () => held),
      );
      await new Promise((r) => setTimeout(r, 100));
      const second = idempotent(db, 'acc_1', 'concurrent', hash, change(db, answer(7)));
      await new Promise((r) => setTimeout(r, 100));
      release();
      expect(await first).toEqual({ replayed: false, response: answer(6) });
      expect(await second).toEqual({ replayed: true, response: answer(6) });
    },
  );
});
