import { type CliDeps, parse } from '../command.ts';

/** `migrate`: applies the migrations not yet applied, on a runtime that does not apply them itself. */
export async function run(args: string[], { open, err }: CliDeps): Promise<number> {
  parse(args, {});
  const { migrateToLatest, newerMigrationsMessage } = await import('../../../infra/db/migrate.ts');
  const rt = await open({ migrate: false, poolSize: 1 });
  const { applied, newer } = await migrateToLatest(rt.db);
  err(
    applied.length
      ? `applied ${applied.length} migration(s): ${applied.join(', ')}`
      : newer.length
        ? `warning: ${newerMigrationsMessage(newer)}`
        : 'database is up to date',
  );
  return 0;
}
