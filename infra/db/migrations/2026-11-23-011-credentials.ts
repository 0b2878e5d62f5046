import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * Secrets out of the event log: password hashes (argon2id) and API key hashes (SHA-256) go to
 * `credentials`, one row per holder and kind, written by the command handlers in the same transaction as
 * the event that says a credential was set (apps/application/commands/credentials.ts). Not a read model: rebuilds never touch
 * it (the api_keys read model's `hash` is filled from it).
 *
 * The one place history is rewritten: the hashes that `AccountOpened` (`passwordHash`),
 * `StaffMemberAdded` (`passwordHash`) and `ApiKeyCreated` (`hash`) carried are moved here and removed
 * from those events' data; nothing else of any event changes. No credential should ever have been in
 * the log: a changed password's old hash could never be removed, and every reader of the log carried
 * them. The read models' copies (accounts.password_hash, staff.password_hash) are dropped.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('credentials')
    .addColumn('holder_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('password', 'api_key')`))
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('credentials_pk', ['holder_id', 'kind'])
    .execute();

  await sql`
    insert into credentials (holder_id, kind, secret, updated_at)
    select data->>'accountId', 'password', data->>'passwordHash', recorded_at from events
    where type = 'AccountOpened' and jsonb_typeof(data->'passwordHash') = 'string'
    union all
    select data->>'staffId', 'password', data->>'passwordHash', recorded_at from events
    where type = 'StaffMemberAdded' and jsonb_typeof(data->'passwordHash') = 'string'
    union all
    select data->>'keyId', 'api_key', data->>'hash', recorded_at from events
    where type = 'ApiKeyCreated' and jsonb_typeof(data->'hash') = 'string'
    on conflict (holder_id, kind) do nothing`.execute(db);
  await sql`
    update events set data = data - 'passwordHash'
    where type in ('AccountOpened', 'StaffMemberAdded') and data ? 'passwordHash'`.execute(db);
  await sql`update events set data = data - 'hash' where type = 'ApiKeyCreated' and data ? 'hash'`.execute(
    db,
  );

  await db.schema.alterTable('accounts').dropColumn('password_hash').execute();
  await db.schema.alterTable('staff').dropColumn('password_hash').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('accounts').addColumn('password_hash', 'text').execute();
  await db.schema.alterTable('staff').addColumn('password_hash', 'text').execute();
  await sql`
    update accounts set password_hash = c.secret from credentials c
    where c.holder_id = accounts.id and c.kind = 'password'`.execute(db);
  await sql`
    update staff set password_hash = c.secret from credentials c
    where c.holder_id = staff.id and c.kind = 'password'`.execute(db);
  await db.schema.dropTable('credentials').execute();
}
