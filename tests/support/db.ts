import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { it, type TestAPI } from 'vitest';
import { migrateToLatest } from '../../infra/db/migrate.ts';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';

export type Backend = 'postgres' | 'pglite';

/** Every integration test runs against both: `describe.each(backends)`. */
export const backends: Backend[] = ['postgres', 'pglite'];

const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

export interface TestDatabase {
  handle: DbHandle;
  /** On postgres, the fresh database's URL (to open a second handle on it); undefined on pglite. */
  databaseUrl: string | undefined;
  /** Closes the handle and, on postgres, drops the database. */
  drop(): Promise<void>;
}

/** The URL from TEST_DATABASE_URL (CI sets it), else the local default. */
function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  return url === undefined || url === '' ? DEFAULT_TEST_DATABASE_URL : url;
}

/**
 * A fresh, migrated database: on postgres a new `cs_test_<random>` database beside
 * TEST_DATABASE_URL's (an unreachable server fails the test: nothing is skipped), on pglite an
 * in-memory PGlite. Create one per test file, in beforeAll; drop it in afterAll.
 */
export async function createTestDatabase(kind: Backend): Promise<TestDatabase> {
  if (kind === 'pglite') {
    const handle = await openDatabase({ dataDir: 'memory://' });
    try {
      await migrateToLatest(handle.db);
    } catch (err) {
      await handle.close();
      throw err;
    }
    return { handle, databaseUrl: undefined, drop: () => handle.close() };
  }

  const adminUrl = testDatabaseUrl();
  const name = `cs_test_${randomBytes(6).toString('hex')}`;
  await withAdmin(adminUrl, (admin) => admin.query(`CREATE DATABASE ${name}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const databaseUrl = url.toString();

  const dropDatabase = (): Promise<unknown> =>
    withAdmin(adminUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));

  let handle: DbHandle;
  try {
    handle = await openDatabase({ databaseUrl, dataDir: 'memory://' });
  } catch (err) {
    await dropDatabase();
    throw err;
  }
  try {
    await migrateToLatest(handle.db);
  } catch (err) {
    await handle.close();
    await dropDatabase();
    throw err;
  }
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

async function withAdmin<T>(adminUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  try {
    await client.connect();
  } catch (err) {
    throw new Error(
      `PostgreSQL at ${redact(adminUrl)} is unreachable (set TEST_DATABASE_URL): ${(err as Error).message}`,
      { cause: err },
    );
  }
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function redact(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  if (url.password !== '') url.password = '***';
  return url.toString();
}

/**
 * `it` for tests of what only a PostgreSQL server has (LISTEN/NOTIFY, other connections, an
 * unreachable host): on PGlite such a test is reported as skipped.
 */
export function onPostgres(backend: Backend): ReturnType<TestAPI['runIf']> {
  return it.runIf(backend === 'postgres');
}
