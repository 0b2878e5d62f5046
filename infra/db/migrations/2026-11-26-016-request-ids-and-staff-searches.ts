import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * Request ids and the staff-side audit:
 * - `activity.client_request_id`: the client's own `X-Request-Id`, kept apart from the service's request
 *   id. Rows written when a client's valid id became the request id hold it in `request_id`: a value
 *   there that the service could not have made (`req_` and 26 lowercase Crockford base32 characters) is
 *   moved to `client_request_id`, as the activity projector does on a replay of those records;
 * - `staff_searches`: support staff's searches (who, when, the query, the accounts listed), from
 *   `StaffSearched` events;
 * - staff views are read across accounts by the audit page: indexed by time.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('activity').addColumn('client_request_id', 'text').execute();
  await sql`
    update activity set client_request_id = request_id, request_id = null
     where request_id is not null and request_id !~ '^req_[0-9abcdefghjkmnpqrstvwxyz]{26}$'`.execute(db);
  await db.schema
    .createIndex('activity_staff_views')
    .on('activity')
    .column('at')
    .where(sql.ref('operation'), '=', 'staff_view')
    .execute();

  await db.schema
    .createTable('staff_searches')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('staff_id', 'text', (c) => c.notNull())
    .addColumn('staff_name', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('query', 'text', (c) => c.notNull())
    .addColumn('account_ids', 'jsonb', (c) => c.notNull())
    .addColumn('result_count', 'integer', (c) => c.notNull())
    .addColumn('request_id', 'text')
    .execute();
  await db.schema.createIndex('staff_searches_at').on('staff_searches').column('at').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('staff_searches').ifExists().execute();
  await db.schema.dropIndex('activity_staff_views').ifExists().execute();
  await sql`
    update activity set request_id = client_request_id
     where request_id is null and client_request_id is not null`.execute(db);
  await db.schema.alterTable('activity').dropColumn('client_request_id').execute();
}
