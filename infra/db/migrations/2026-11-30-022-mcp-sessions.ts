import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/*
 * The 2025 era's MCP sessions (apps/server/mcp/): operational data, not read models, like the OAuth and
 * web sessions; projection rebuilds leave them alone.
 *
 * - mcp_sessions: one per `initialize`, for the account and OAuth client that made it. `last_seen_at` is
 *   moved on by every request that carries it; a session not seen for 24 hours is gone (refused on use,
 *   deleted by housekeeping). Any process of the service answers any session: nothing of it is in memory.
 * - mcp_session_subscriptions: the resources (`content-service://articles/{id}`) a session subscribed to;
 *   the primary key answers "is this session subscribed to this URI" in one lookup.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('mcp_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('mcp_sessions_last_seen').on('mcp_sessions').column('last_seen_at').execute();
  await db.schema
    .createTable('mcp_session_subscriptions')
    .addColumn('session_id', 'text', (c) => c.notNull().references('mcp_sessions.id').onDelete('cascade'))
    .addColumn('uri', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('mcp_session_subscriptions_pk', ['session_id', 'uri'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('mcp_session_subscriptions').ifExists().execute();
  await db.schema.dropTable('mcp_sessions').ifExists().execute();
}
