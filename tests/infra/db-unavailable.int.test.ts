import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../infra/db/unavailable.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/*
 * A database connection that breaks while the application holds it (a PostgreSQL restart, a
 * terminated backend) fails the statement, not the process; the pool works again afterwards; and the
 * failure is recognised as "the database is unavailable" (a 503), unlike a statement PostgreSQL refused.
 */
describe('a PostgreSQL connection lost while checked out', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await test.drop();
  });

  it('fails the statement in flight, keeps the process up, and the pool serves the next one', async () => {
    const { db } = test.handle;
    const admin = new pg.Client({ connectionString: test.databaseUrl });
    await admin.connect();
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => {
      uncaught.push(err);
    };
    process.on('uncaughtException', onUncaught);
    try {
      const failure = await db
        .connection()
        .execute(async (conn) => {
          const rows = await (conn as typeof db)
            .selectNoFrom((eb) => eb.fn<number>('pg_backend_pid').as('pid'))
            .execute();
          // Terminated between two statements: the connection is idle in the application's hands.
          await admin.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
          await new Promise((r) => setTimeout(r, 300));
          await (conn as typeof db).selectNoFrom((eb) => eb.val(1).as('one')).execute();
        })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(failure).toBeInstanceOf(Error);
      expect(isDatabaseUnavailable(failure), String(failure)).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      expect(uncaught).toEqual([]);
      const again = await db.selectNoFrom((eb) => eb.val(2).as('two')).execute();
      expect(again).toEqual([{ two: '2' }]);
    } finally {
      process.off('uncaughtException', onUncaught);
      await admin.end();
    }
  });

  it('tells an unavailable database from a refused statement', async () => {
    const refused = await test.handle.db
      .selectFrom('no_such_table' as 'events')
      .selectAll()
      .execute()
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(isDatabaseUnavailable(refused)).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '57P01' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '57P03' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toBe(true);
    // A full disk (53100) or no memory (53200): the statement can run once space returns.
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '53100' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '53200' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '23505' }))).toBe(false);
    expect(
      isDatabaseUnavailable(new Error('wrapped', { cause: new Error('Connection terminated unexpectedly') })),
    ).toBe(true);
    expect(isDatabaseUnavailable(new Error('a bug'))).toBe(false);
    expect(isDatabaseUnavailable('57P01')).toBe(false);
  });
});
