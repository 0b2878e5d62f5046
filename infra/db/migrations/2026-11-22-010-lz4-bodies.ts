import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The 20 KB values an edit writes (the event's data, the body row) compressed with lz4 instead of
 * pglz: about 0.03 ms a value instead of 0.25 ms on the benchmark machine, and reading them back is
 * no slower. Values already stored keep their compression; new ones use lz4. PGlite is built without
 * lz4 and keeps pglz.
 */
export async function up(db: AnyDb): Promise<void> {
  await setCompression(db, 'lz4');
}

export async function down(db: AnyDb): Promise<void> {
  await setCompression(db, 'pglz');
}

async function setCompression(db: AnyDb, method: 'lz4' | 'pglz'): Promise<void> {
  await sql`
    do $$ begin
      alter table article_bodies alter column body set compression ${sql.raw(method)};
      alter table events alter column data set compression ${sql.raw(method)};
    exception when feature_not_supported then null;
    end $$`.execute(db);
}
