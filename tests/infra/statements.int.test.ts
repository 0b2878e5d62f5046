import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStatementNames } from '../../infra/db/statements.ts';
import { backends, createTestDatabase, onPostgres, type TestDatabase } from '../support/db.ts';

describe('statement names', () => {
  it('names a text the second time it is seen, the same name ever after, up to the limit', () => {
    const names = createStatementNames(2);
    expect(names.nameOf('select $1')).toBeUndefined();
    const first = names.nameOf('select $1');
    expect(first).toMatch(/^cs_\d+$/);
    expect(names.nameOf('select $1')).toBe(first);
    names.nameOf('select $1, $2');
    const second = names.nameOf('select $1, $2');
    expect(second).not.toBe(first);
    // The limit reached: other texts stay unnamed, the named keep their names.
    names.nameOf('select $1, $2, $3');
    expect(names.nameOf('select $1, $2, $3')).toBeUndefined();
    expect(names.nameOf('select $1')).toBe(first);
    expect(names.named).toBe(2);
  });
});

describe.each(backends)('prepared statements on %s', (backend) => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase(backend);
  });
  afterAll(async () => test.drop());

  it('a statement run again gives the same rows as the first time', async () => {
    const { db } = test.handle;
    const run = () =>
      sql<{ n: number; t: string }>`select ${41}::int + 1 as n, ${'x'}::text as t`.execute(db);
    const results = [await run(), await run(), await run()];
    for (const r of results) expect(r.rows).toEqual([{ n: 42, t: 'x' }]);
  });

  onPostgres(backend)('is prepared on the server connection from its second run', async () => {
    const { db } = test.handle;
    // One connection for the whole check: a transaction holds it.
    const prepared = await db.transaction().execute(async (trx) => {
      for (let i = 0; i < 3; i++) await sql`select ${i}::int as probe_statement`.execute(trx);
      const { rows } = await sql<{ statement: string }>`
        select statement from pg_prepared_statements where statement like ${'%probe_statement%'}`.execute(
        trx,
      );
      return rows.map((r) => r.statement);
    });
    expect(prepared).toEqual(['select $1::int as probe_statement']);
  });
});
