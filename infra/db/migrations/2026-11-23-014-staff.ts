import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * Support staff:
 * - they sign in on the same page as account holders: a web session belongs to an account
 *   (`account_id`) or to a staff member (`staff_id`), never both;
 * - they find an account by a request id a customer quotes: `activity.request_id` is indexed.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('web_sessions').addColumn('staff_id', 'text').execute();
  await db.schema
    .alterTable('web_sessions')
    .alterColumn('account_id', (c) => c.dropNotNull())
    .execute();
  await db.schema
    .alterTable('web_sessions')
    .addCheckConstraint('web_sessions_one_holder', sql`(account_id is null) <> (staff_id is null)`)
    .execute();
  await db.schema
    .createIndex('activity_request_id')
    .on('activity')
    .column('request_id')
    .where(sql.ref('request_id'), 'is not', null)
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('activity_request_id').ifExists().execute();
  await db.deleteFrom('web_sessions').where('staff_id', 'is not', null).execute();
  await db.schema.alterTable('web_sessions').dropConstraint('web_sessions_one_holder').execute();
  await db.schema.alterTable('web_sessions').dropColumn('staff_id').execute();
  await db.schema
    .alterTable('web_sessions')
    .alterColumn('account_id', (c) => c.setNotNull())
    .execute();
}
