import { randomBytes } from 'node:crypto';
import { cpSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { it, type TestAPI } from 'vitest';
import { migrateToLatest } from '../../infra/db/migrate.ts';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';
import { withoutPassword } from '../../infra/url-password.ts';

export type Backend = 'postgres' | 'pglite';

/** Every integration test runs against both: `describe.each(backends)`. */
export const backends: Backend[] = ['postgres', 'pglite'];

const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Migrated templates made once per run by tests/support/global-setup.ts: a PostgreSQL database that
 * `CREATE DATABASE ... TEMPLATE` copies, and a PGlite folder that is copied. Without them (a script
 * outside vitest) each database is migrated itself.
 */
const PG_TEMPLATE = 'CS_TEST_PG_TEMPLATE';
const PGLITE_TEMPLATE = 'CS_TEST_PGLITE_TEMPLATE';

export interface TestDatabase {
  handle: DbHandle;
  /** On postgres, the fresh database's URL (to open a second handle on it); undefined on pglite. */
  databaseUrl: string | undefined;
  /** Closes the handle and, on postgres, drops the database. */
  drop(): Promise<void>;
}

/** The URL from TEST_DATABASE_URL (CI sets it), else the local default. */
export function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  return url === undefined || url === '' ? DEFAULT_TEST_DATABASE_URL : url;
}

function urlOf(name: string): string {
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A fresh, migrated database: on postgres a new `cs_test_<random>` database beside
 * TEST_DATABASE_URL's (an unreachable server fails the test: nothing is skipped), on pglite a
 * PGlite of its own. Create one per test file, in beforeAll; drop it in afterAll.
 */
export async function createTestDatabase(kind: Backend): Promise<TestDatabase> {
  return kind === 'pglite' ? createPglite() : createPostgres();
}

async function createPglite(): Promise<TestDatabase> {
  const template = process.env[PGLITE_TEMPLATE];
  if (!template) {
    const handle = await openDatabase({ dataDir: 'memory://' });
    await migrateOrClose(handle, async () => {});
    return { handle, databaseUrl: undefined, drop: () => handle.close() };
  }
  // Opening a copied folder skips PGlite's initdb, which is most of its start. Copied synchronously:
  // Node copies a folder natively only so (0.2 s against 0.8, infra/db/embedded-template.ts).
  const dataDir = await mkdtemp(join(tmpdir(), 'cs-test-pglite-'));
  const remove = (): Promise<void> => rm(dataDir, { recursive: true, force: true });
  let handle: DbHandle;
  try {
    cpSync(template, dataDir, { recursive: true });
    handle = await openDatabase({ dataDir });
  } catch (err) {
    await remove();
    throw err;
  }
  return {
    handle,
    databaseUrl: undefined,
    async drop() {
      try {
        await handle.close();
      } finally {
        await remove();
      }
    },
  };
}

async function createPostgres(): Promise<TestDatabase> {
  const adminUrl = testDatabaseUrl();
  const name = `cs_test_${randomBytes(6).toString('hex')}`;
  // Without its template (none made for this run, or gone), the database is migrated itself.
  const template = await withAdmin(adminUrl, async (admin) => {
    const from = process.env[PG_TEMPLATE];
    if (from) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${from}`);
        return from;
      } catch (err) {
        if ((err as { code?: unknown }).code !== '3D000') throw err;
      }
    }
    await admin.query(`CREATE DATABASE ${name}`);
    return undefined;
  });
  const databaseUrl = urlOf(name);
  const dropDatabase = (): Promise<unknown> => dropByName(adminUrl, name);

  let handle: DbHandle;
  try {
    handle = await openDatabase({ databaseUrl, dataDir: 'memory://' });
  } catch (err) {
    await dropDatabase();
    throw err;
  }
  if (!template) await migrateOrClose(handle, dropDatabase);
  return {
    handle,
    databaseUrl,
    async drop() {
      try {
        await handle.close();
      } finally {
        await dropDatabase();
      }
    },
  };
}

async function migrateOrClose(handle: DbHandle, cleanUp: () => Promise<unknown>): Promise<void> {
  try {
    await migrateToLatest(handle.db);
  } catch (err) {
    await handle.close();
    await cleanUp();
    throw err;
  }
}

function dropByName(adminUrl: string, name: string): Promise<unknown> {
  return withAdmin(adminUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/**
 * Makes the migrated templates (both at once) and names them in the environment the test workers
 * inherit; returns what removes them. Called once per run by tests/support/global-setup.ts.
 */
export async function makeTemplates(): Promise<() => Promise<void>> {
  const adminUrl = testDatabaseUrl();
  const name = `cs_test_template_${randomBytes(6).toString('hex')}`;
  const dataDir = await mkdtemp(join(tmpdir(), 'cs-test-pglite-template-'));
  const removeAll = async (): Promise<void> => {
    await Promise.all([dropByName(adminUrl, name), rm(dataDir, { recursive: true, force: true })]);
  };
  const migrated = async (open: () => Promise<DbHandle>): Promise<void> => {
    const handle = await open();
    try {
      await migrateToLatest(handle.db);
    } finally {
      await handle.close();
    }
  };
  try {
    await Promise.all([
      withAdmin(adminUrl, (admin) => admin.query(`CREATE DATABASE ${name}`)).then(() =>
        migrated(() => openDatabase({ databaseUrl: urlOf(name), dataDir: 'memory://' })),
      ),
      migrated(() => openDatabase({ dataDir })),
    ]);
  } catch (err) {
    await removeAll();
    throw err;
  }
  process.env[PG_TEMPLATE] = name;
  process.env[PGLITE_TEMPLATE] = dataDir;
  return async () => {
    delete process.env[PG_TEMPLATE];
    delete process.env[PGLITE_TEMPLATE];
    await removeAll();
  };
}

/** Runs one statement on the run's PostgreSQL server as its admin (CREATE or DROP DATABASE, say). */
export async function adminStatement(statement: string): Promise<void> {
  await withAdmin(testDatabaseUrl(), (admin) => admin.query(statement));
}

async function withAdmin<T>(adminUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  try {
    await client.connect();
  } catch (err) {
    throw new Error(
      `PostgreSQL at ${withoutPassword(adminUrl)} is unreachable (set TEST_DATABASE_URL): ${(err as Error).message}`,
      { cause: err },
    );
  }
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * `it` for tests of what only a PostgreSQL server has (LISTEN/NOTIFY, other connections, an
 * unreachable host): on PGlite such a test is reported as skipped.
 */
export function onPostgres(backend: Backend): ReturnType<TestAPI['runIf']> {
  return it.runIf(backend === 'postgres');
}
