import type { Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrationProvider } from './migrations/index.ts';

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

/** Runs every pending migration, in name order, in one transaction. */
// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
export async function migrateToLatest(db: Kysely<any>): Promise<{ applied: string[] }> {
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
  const all = await migratorFor(db).getMigrations();
  return all.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
