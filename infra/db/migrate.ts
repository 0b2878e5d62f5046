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
 * Where the database stands against this code's migrations, read in two small statements: a start on
 * a current database (most starts) and a readiness probe then leave the migrator, its lock and its
 * checks alone. `current`: every migration this code knows is applied, and `newer` lists the others
 * applied, all named after this code's last one: a newer release applied them (expand and contract,
 * docs/operations.md "Migrations and upgrades"), and this code runs beside it. Anything else (no
 * migration table, one pending, an unknown one before this code's last) is the migrator's to apply or
 * to refuse.
 */
// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
async function standing(db: Kysely<any>): Promise<{ current: true; newer: string[] } | { current: false }> {
  const table = await sql<{ present: boolean }>`
    select to_regclass(${DEFAULT_MIGRATION_TABLE}) is not null as present`.execute(db);
  if (table.rows[0]?.present !== true) return { current: false };
  const applied = await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)}`.execute(
    db,
  );
  const known = Object.keys(migrations);
  const last = known.at(-1) ?? '';
  const names = new Set(applied.rows.map((row) => row.name));
  if (!known.every((name) => names.has(name))) return { current: false };
  const unknown = [...names].filter((name) => !Object.hasOwn(migrations, name)).sort();
  return unknown.every((name) => name > last) ? { current: true, newer: unknown } : { current: false };
}

type Log = { warn(obj: object, msg: string): void };

/** The warning of a start beside a newer release: the migrations applied that this code does not know. */
export function newerMigrationsMessage(newer: readonly string[]): string {
  return `the database has ${newer.length} migration(s) newer than this version: ${newer.join(', ')}; running beside a newer release`;
}

/**
 * Runs every pending migration, in name order, in one transaction. A database a newer release has
 * migrated further (`newer`) is left as it is, with a warning to `log`.
 */
export async function migrateToLatest(
  // biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
  db: Kysely<any>,
  log?: Log,
): Promise<{ applied: string[]; newer: string[] }> {
  const now = await standing(db);
  if (now.current) {
    if (now.newer.length > 0) log?.warn({ newer: now.newer }, newerMigrationsMessage(now.newer));
    return { applied: [], newer: now.newer };
  }
  const { error, results = [] } = await migratorFor(db).migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((result) => result.status === 'Error');
    throw new MigrationFailedError(failed?.migrationName, error);
  }
  return {
    applied: results.filter((result) => result.status === 'Success').map((result) => result.migrationName),
    newer: [],
  };
}

/** The names of the migrations not yet applied (empty when the schema is current, or newer). */
// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
export async function pendingMigrations(db: Kysely<any>): Promise<string[]> {
  if ((await standing(db)).current) return [];
  const all = await migratorFor(db).getMigrations();
  return all.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
