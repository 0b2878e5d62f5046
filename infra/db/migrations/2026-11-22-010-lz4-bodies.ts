import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The large values an edit writes (the event's data, the body row) compressed with lz4 rather than
 * pglz, which is slower (docs/performance.md, "Snapshots"). Values already stored keep their
 * compression; new ones use lz4. PGlite is built without lz4 and keeps pglz.
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
