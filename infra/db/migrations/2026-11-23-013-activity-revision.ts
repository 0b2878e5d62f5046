import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * The revision an activity record's call created (`activity.revision`), null for a call that created
 * none. Calls recorded before the column name none: their rows stay null, as a replay leaves them.
 * A change of the content pipeline is a revision itself (its row is keyed `act_<event id>`): those
 * rows get their event's stream version, which is what the projector writes for them.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('activity').addColumn('revision', 'integer').execute();
  await sql`
    update activity a set revision = e.version
    from events e
    where a.source = 'rewrite' and a.id like 'act\\_%'
      and e.event_id = substring(a.id from 5)::uuid`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('activity').dropColumn('revision').execute();
}
