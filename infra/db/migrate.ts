import { type Kysely, sql } from 'kysely';
import { DEFAULT_MIGRATION_TABLE, Migrator } from 'kysely/migration';
import { migrationProvider, migrations } from './migrations/index.ts';

/** A migration failed; the ones before it in the same run are rolled back with it. */
class MigrationFailedError extends Error {
  readonly migrationName: string | undefined;

  constructor(migrationName: string | undefined, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      migrationName === undefined
        ? `Migrating the database failed: ${reason}`
        : `Migration ${migrationName} failed: ${reason}`,
      { cause },
    );
    this.name = 'MigrationFailedError';
    this.migrationName = migrationName;
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
function migratorFor(db: Kysely<any>): Migrator {
  return new Migrator({ db, provider: migrationProvider });
}

/**
 * Whether the database has exactly the migrations this code knows applied, read in two small
 * statements: a start on a current database (most starts) and a readiness probe then leave the
 * migrator, its lock and its checks alone. Anything else (no migration table, one pending, one this
 * code does not know) is the migrator's to apply or to refuse.
 */
// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
async function upToDate(db: Kysely<any>): Promise<boolean> {
  const table = await sql<{ present: boolean }>`
    select to_regclass(${DEFAULT_MIGRATION_TABLE}) is not null as present`.execute(db);
  if (table.rows[0]?.present !== true) return false;
  const applied = await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)}`.execute(
    db,
  );
  const known = Object.keys(migrations);
  const names = new Set(applied.rows.map((row) => row.name));
  return names.size === known.length && known.every((name) => names.has(name));
}

/** Runs every pending migration, in name order, in one transaction. */
// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
export async function migrateToLatest(db: Kysely<any>): Promise<{ applied: string[] }> {
  if (await upToDate(db)) return { applied: [] };
  const { error, results = [] } = await migratorFor(db).migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((result) => result.status === 'Error');
    throw new MigrationFailedError(failed?.migrationName, error);
  }
  return {
    applied: results.filter((result) => result.status === 'Success').map((result) => result.migrationName),
  };
}

/** The names of the migrations not yet applied (empty when the schema is current). */
// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
export async function pendingMigrations(db: Kysely<any>): Promise<string[]> {
  if (await upToDate(db)) return [];
  const all = await migratorFor(db).getMigrations();
  return all.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
