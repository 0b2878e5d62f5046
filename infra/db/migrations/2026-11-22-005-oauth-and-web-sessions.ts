import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * The OAuth authorization server (apps/server/oauth/) and the web sign-in (apps/server/web/).
 * Operational data, not read models: nothing here is derived from events, and projection rebuilds leave
 * it alone.
 *
 * - oauth_models: everything oidc-provider persists (clients, grants, codes, tokens, interactions,
 *   sessions), one row per artifact. `id` (and `uid`, `user_code`) hold SHA-256 hashes of the values,
 *   never the values: a copy of the table yields no usable token. `grant_id` links tokens to their grant
 *   so revoking a grant kills them in one statement; `expires_at` is honoured on every read.
 * - oauth_keys: the provider's signing key set, cookie keys and the web secret: generated once, never
 *   regenerated while a row exists.
 * - oauth_grants: what a person allowed (account, assistant, access), for the Connect Site page and
 *   the MCP token check; `revoked_at` when disconnected.
 * - web_sessions: signed-in browsers; `id_hash` is the SHA-256 of the cookie's value.
 * - sign_in_failures: failed sign-ins per email and per client address, for slowing and locking.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('oauth_models')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('grant_id', 'text')
    .addColumn('uid', 'text')
    .addColumn('user_code', 'text')
    .addColumn('expires_at', 'timestamptz')
    .addColumn('consumed_at', 'timestamptz')
    .addPrimaryKeyConstraint('oauth_models_pk', ['kind', 'id'])
    .execute();
  await db.schema.createIndex('oauth_models_grant').on('oauth_models').column('grant_id').execute();
  await db.schema.createIndex('oauth_models_uid').on('oauth_models').columns(['kind', 'uid']).execute();
  await db.schema
    .createIndex('oauth_models_user_code')
    .on('oauth_models')
    .columns(['kind', 'user_code'])
    .execute();
  await db.schema.createIndex('oauth_models_expires').on('oauth_models').column('expires_at').execute();

  await db.schema
    .createTable('oauth_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('material', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('oauth_grants')
    .addColumn('grant_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('client_name', 'text', (c) => c.notNull())
    .addColumn('redirect_host', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    .execute();
  await db.schema
    .createIndex('oauth_grants_account')
    .on('oauth_grants')
    .columns(['account_id', 'client_id'])
    .execute();

  await db.schema
    .createTable('web_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('web_sessions_account').on('web_sessions').column('account_id').execute();
  await db.schema.createIndex('web_sessions_expires').on('web_sessions').column('expires_at').execute();

  await db.schema
    .createTable('sign_in_failures')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('first_failed_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_failed_at', 'timestamptz', (c) => c.notNull())
    .addColumn('locked_until', 'timestamptz')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of ['sign_in_failures', 'web_sessions', 'oauth_grants', 'oauth_keys', 'oauth_models']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
