import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import {
  ALWAYS_NAMED,
  createStatementNames,
  MAX_NAMED_LENGTH,
  NEVER_NAMED,
  namingClient,
  prepared,
  StatementNamingClient,
} from '../../infra/db/statement-cache.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestRuntime, setUpAccount } from '../support/runtime.ts';

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

  it('never names nor remembers a text longer than MAX_NAMED_LENGTH (a multi-row insert)', () => {
    const names = createStatementNames();
    const rows = (n: number): string =>
      `insert into t (a, b) values ${Array.from({ length: n }, (_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ')}`;
    const long = rows(400);
    expect(long.length).toBeGreaterThan(MAX_NAMED_LENGTH);
    for (let i = 0; i < 3; i++) expect(names.nameOf(long)).toBeUndefined();
    expect(names.named).toBe(0);
    // A short one is named as ever.
    names.nameOf(rows(2));
    expect(names.nameOf(rows(2))).toMatch(/^cs_\d+$/);
  });

  it('never names a text that begins with NEVER_NAMED (planned for its values each time)', () => {
    const names = createStatementNames();
    const search = `${NEVER_NAMED} select $1::text`;
    for (let i = 0; i < 3; i++) expect(names.nameOf(search)).toBeUndefined();
    expect(names.named).toBe(0);
    names.nameOf('select $1::text');
    expect(names.nameOf('select $1::text')).toMatch(/^cs_\d+$/);
  });

  it('names a long text that begins with ALWAYS_NAMED (a group of appends), up to its own limit', () => {
    const names = createStatementNames(500, 2);
    const group = (n: number): string =>
      `${ALWAYS_NAMED} with ${Array.from({ length: n }, (_, i) => `a_${i} as (select $${i + 1})`).join(', ')} select`;
    for (const n of [300, 301, 302]) expect(group(n).length).toBeGreaterThan(MAX_NAMED_LENGTH);
    expect(names.nameOf(group(300))).toBeUndefined();
    const first = names.nameOf(group(300));
    expect(first).toMatch(/^cs_\d+$/);
    names.nameOf(group(301));
    expect(names.nameOf(group(301))).toMatch(/^cs_\d+$/);
    // Two long texts named: a third stays unnamed, the named keep their names, short ones are still named.
    names.nameOf(group(302));
    expect(names.nameOf(group(302))).toBeUndefined();
    expect(names.nameOf(group(300))).toBe(first);
    names.nameOf('select $1');
    expect(names.nameOf('select $1')).toMatch(/^cs_\d+$/);
    expect(names.named).toBe(3);
  });
});

/** The statements prepared on the connection `on` runs on, whose text contains `probe`. */
async function preparedOn(
  on: { query(text: string, values: unknown[]): Promise<{ rows: unknown[] }> },
  probe: string,
): Promise<{ name: string; statement: string }[]> {
  const { rows } = await on.query(
    'select name, statement from pg_prepared_statements where statement like $1 order by name',
    [`%${probe}%`],
  );
  return rows as { name: string; statement: string }[];
}

/**
 * What the statement cache relies on in `pg` and kysely: these fail when an upgrade changes it.
 * pg-pool builds its clients from the `Client` option; kysely's PostgresDialect (pool.connect(), then
 * client.query(text, values)) and pool.query (client.query(text, values, callback)) reach the
 * client's `query`; a query with a name is prepared on the server connection under that name.
 */
describe.each(backends)('prepared statements on %s', (backend) => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase(backend);
  });
  afterAll(async () => test.drop());

  it("builds the pool's clients from its Client option: statement-naming clients", async () => {
    const client = await test.handle.pool.connect();
    try {
      expect(client).toBeInstanceOf(StatementNamingClient);
      expect(client).toBeInstanceOf(pg.Client);
    } finally {
      client.release();
    }
  });

  it('a statement run again gives the same rows as the first time', async () => {
    const { db } = test.handle;
    const run = () =>
      sql<{ n: number; t: string }>`select ${41}::int + 1 as n, ${'x'}::text as t`.execute(db);
    const results = [await run(), await run(), await run()];
    for (const r of results) expect(r.rows).toEqual([{ n: 42, t: 'x' }]);
  });

  it('prepares what kysely runs again on the server connection, under the name the pool gives it', async () => {
    const { db } = test.handle;
    // One connection for the whole check: a transaction holds it.
    const { once, again } = await db.transaction().execute(async (trx) => {
      await sql`select ${0}::int as probe_kysely`.execute(trx);
      const once = await sql<{ name: string; statement: string }>`
        select name, statement from pg_prepared_statements where statement like ${'%probe_kysely%'}`.execute(
        trx,
      );
      for (let i = 1; i < 3; i++) await sql`select ${i}::int as probe_kysely`.execute(trx);
      const again = await sql<{ name: string; statement: string }>`
        select name, statement from pg_prepared_statements where statement like ${'%probe_kysely%'}`.execute(
        trx,
      );
      return { once: once.rows, again: again.rows };
    });
    expect(once).toEqual([]);
    const client = await test.handle.pool.connect();
    let name: string | undefined;
    try {
      if (client instanceof StatementNamingClient) {
        name = client.statementNames?.nameOf('select $1::int as probe_kysely');
      }
    } finally {
      client.release();
    }
    expect(name).toMatch(/^cs_\d+$/);
    expect(again).toEqual([{ name, statement: 'select $1::int as probe_kysely' }]);
  });

  it('leaves a statement without parameters unnamed', async () => {
    const prepared = await test.handle.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 3; i++) await sql`select 1 as probe_constant`.execute(trx);
      const { rows } = await sql`
        select statement from pg_prepared_statements where statement like ${'%probe_constant%'}`.execute(trx);
      return rows;
    });
    expect(prepared).toEqual([]);
  });

  it('prepares what pool.query runs again (the callback form of client.query)', async () => {
    // A pool of one connection, so that every call runs on the connection that is then asked.
    const pool =
      test.databaseUrl === undefined
        ? test.handle.pool
        : new pg.Pool({ connectionString: test.databaseUrl, max: 1, Client: namingClient() });
    // pool.end() resolves before its client's backend has gone; the database dropped after this file
    // then terminates that backend, whose error the ended pool would otherwise throw.
    if (pool !== test.handle.pool) pool.on('error', () => {});
    try {
      for (let i = 0; i < 3; i++) {
        const { rows } = await pool.query('select $1::int as probe_pool', [i]);
        expect(rows).toEqual([{ probe_pool: i }]);
      }
      const found = await preparedOn(pool, 'probe_pool');
      expect(found).toEqual([
        { name: expect.stringMatching(/^cs_\d+$/), statement: 'select $1::int as probe_pool' },
      ]);
    } finally {
      if (pool !== test.handle.pool) await pool.end();
    }
  });
});

describe.each(backends)('prepared queries on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let accountId: string;
  let siteId: string;
  let otherSiteId: string;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    ({ accountId, siteId, otherSiteId } = await setUpAccount(runtime));
  });
  afterAll(async () => drop());

  const sitesOf = prepared(
    (db, v: { accountId: string; siteId: string }) =>
      db
        .selectFrom('sites')
        .select(['id', 'name'])
        .where('account_id', '=', v.accountId)
        .where('id', '<>', v.siteId)
        .where('name', '<>', 'a constant that stays a constant')
        .orderBy('id'),
    ['accountId', 'siteId'],
  );

  it('answers each call with its own values, as the built query does', async () => {
    for (const [account, excluded] of [
      [accountId, siteId],
      [accountId, otherSiteId],
      ['acc_nobody', siteId],
    ] as const) {
      const built = await runtime.db
        .selectFrom('sites')
        .select(['id', 'name'])
        .where('account_id', '=', account)
        .where('id', '<>', excluded)
        .orderBy('id')
        .execute();
      expect(await sitesOf(runtime.db, { accountId: account, siteId: excluded })).toEqual(built);
    }
    expect((await sitesOf(runtime.db, { accountId, siteId })).map((s) => s.id)).toEqual([otherSiteId]);
  });

  it('refuses a value the builder does not pass on as it is', async () => {
    const transformed = prepared(
      (db, v: { name: string }) =>
        db
          .selectFrom('sites')
          .select('id')
          .where('name', '=', sql<string>`upper(${`${v.name}!`})`),
      ['name'],
    );
    await expect(transformed(runtime.db, { name: 'x' })).rejects.toThrow(/does not reach the query/);
  });
});
