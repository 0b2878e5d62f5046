import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { runtimeOn } from '../../apps/runtime.ts';
import { migrateToLatest, pendingMigrations } from '../../infra/db/migrate.ts';
import { migrations } from '../../infra/db/migrations/index.ts';
import { openDatabase } from '../../infra/db/open.ts';
import { listSites } from '../../projections/sites.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli } from '../support/process.ts';
import { setUpAccount } from '../support/runtime.ts';
import { startServer } from '../support/server.ts';

/*
 * Expand and contract (docs/operations.md, "Migrations and upgrades"): during a rolling upgrade the
 * new release migrates first, and the old one keeps running against the newer schema. A database whose
 * extra migrations all sort after this version's last one is left as it is, with a warning; any other
 * difference is refused by the migrator, as before.
 */

const known = Object.keys(migrations);
const last = known.at(-1) as string;
const NEWER = '2999-01-01-001-newer-release';

type Warned = { obj: object; msg: string };

/** Records a migration row as kysely's migrator does. */
async function recordMigration(test: TestDatabase, name: string): Promise<void> {
  await sql`insert into kysely_migration (name, timestamp) values (${name}, ${new Date().toISOString()})`.execute(
    test.handle.db,
  );
}

describe('a database migrated by a newer release', () => {
  let test: TestDatabase | undefined;
  afterEach(async () => {
    await test?.drop();
    test = undefined;
  });

  it('is left as it is: the server, the CLI and the runtime start beside it with a warning, and work', async () => {
    test = await createTestDatabase('postgres');
    // What the newer release added: its migration's row and a column (an expansion only).
    await recordMigration(test, NEWER);
    await sql`alter table sites add column newer_release_note text not null default ''`.execute(
      test.handle.db,
    );
    const message = `the database has 1 migration(s) newer than this version: ${NEWER}; running beside a newer release`;

    const warned: Warned[] = [];
    const log = { warn: (obj: object, msg: string) => warned.push({ obj, msg }) };
    expect(await migrateToLatest(test.handle.db, log)).toEqual({ applied: [], newer: [NEWER] });
    expect(warned).toEqual([{ obj: { newer: [NEWER] }, msg: message }]);
    expect(await pendingMigrations(test.handle.db)).toEqual([]);

    // The runtime as the server and the worker open it (migrate: true), writing and reading.
    const handle = await openDatabase({ databaseUrl: test.databaseUrl as string, dataDir: 'memory://' });
    const logger = { ...log, info: () => {}, error: () => {} };
    const runtime = await runtimeOn(Promise.resolve(handle), { migrate: true, logger });
    try {
      const { accountId, siteId } = await setUpAccount(runtime);
      const sites = await listSites(runtime.db, accountId, { page: 1, perPage: 20 });
      expect(sites.rows.map((s) => s.id)).toContain(siteId);
      expect(warned).toHaveLength(2);
    } finally {
      await runtime.close();
    }

    const migrate = await cli(['migrate'], { DATABASE_URL: test.databaseUrl });
    expect(migrate.code, migrate.stderr).toBe(0);
    expect(migrate.stderr).toContain(`warning: ${message}`);

    const server = await startServer({ DATABASE_URL: test.databaseUrl, DATA_DIR: '/nonexistent' });
    try {
      const lines = await server.logsNow();
      expect(lines.some((l) => l.includes(message) && l.includes('"level":40'))).toBe(true);
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
      expect((await fetch(`${server.url}/sign-in`)).status).toBe(200);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    // Nothing was applied or undone: the newer release's migration and column are still there.
    const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(
      test.handle.db,
    );
    expect(rows.rows.map((r) => r.name)).toEqual([...known, NEWER]);
  });

  it('refuses an unknown migration named before this version’s last one', async () => {
    test = await createTestDatabase('postgres');
    await recordMigration(test, `${last.slice(0, 10)}-000-unknown`);
    await expect(migrateToLatest(test.handle.db)).rejects.toThrow(/corrupted migrations/);
  });

  it('refuses a database that lacks one of this version’s migrations, newer ones or not', async () => {
    test = await createTestDatabase('postgres');
    await sql`delete from kysely_migration where name = ${last}`.execute(test.handle.db);
    await recordMigration(test, NEWER);
    await expect(migrateToLatest(test.handle.db)).rejects.toThrow(/corrupted migrations/);
  });
});
