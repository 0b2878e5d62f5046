import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepared } from '../../infra/db/prepared.ts';
import type { Runtime } from '../../infra/runtime.ts';
import { backends } from '../support/db.ts';
import { createTestRuntime, setUpAccount } from '../support/runtime.ts';

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
