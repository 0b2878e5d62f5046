import type { Db } from './db/schema.ts';
import { MCP_SESSION_IDLE_MS } from './jobs/housekeeping.ts';

/*
 * The 2025-era MCP sessions and their resource subscriptions (`mcp_sessions`,
 * `mcp_session_subscriptions`, migration 022): kept in the database so that any process answers a
 * session. A session is only ever found, seen, or ended by the account and OAuth client that made it
 * (`owner`), and only while it was seen within MCP_SESSION_IDLE_MS of `now`.
 */

export type SessionOwner = { accountId: string; clientId: string };

/** The live sessions of an owner. */
function ownSessions(db: Db, owner: SessionOwner, now: Date) {
  return db
    .selectFrom('mcp_sessions')
    .select('id')
    .where('account_id', '=', owner.accountId)
    .where('client_id', '=', owner.clientId)
    .where('last_seen_at', '>', new Date(now.getTime() - MCP_SESSION_IDLE_MS));
}

export async function insertMcpSession(db: Db, id: string, owner: SessionOwner, now: Date): Promise<void> {
  await db
    .insertInto('mcp_sessions')
    .values({
      id,
      account_id: owner.accountId,
      client_id: owner.clientId,
      created_at: now,
      last_seen_at: now,
    })
    .execute();
}

/** Marks the owner's live session seen at `now`; false when there is no such session. */
export async function touchMcpSession(db: Db, owner: SessionOwner, id: string, now: Date): Promise<boolean> {
  const touched = await db
    .updateTable('mcp_sessions')
    .set({ last_seen_at: now })
    .where('id', 'in', ownSessions(db, owner, now).where('id', '=', id))
    .executeTakeFirst();
  return touched.numUpdatedRows > 0n;
}

/** Deletes the owner's live session and its subscriptions; false when there is no such session. */
export async function deleteMcpSession(db: Db, owner: SessionOwner, id: string, now: Date): Promise<boolean> {
  const ended = await db
    .deleteFrom('mcp_sessions')
    .where('id', 'in', ownSessions(db, owner, now).where('id', '=', id))
    .executeTakeFirst();
  return ended.numDeletedRows > 0n;
}

/**
 * How often a session whose stream is open is marked seen: often enough that it never comes near
 * MCP_SESSION_IDLE_MS, seldom enough that watching a stream writes no row most of the time.
 */
export const SESSION_SEEN_EVERY_MS = 60 * 60_000;

/**
 * Of these sessions (each with a stream open on a process, whoever owns it), those still live at `now`;
 * those last seen more than SESSION_SEEN_EVERY_MS ago are marked seen now.
 */
export async function keepMcpSessions(db: Db, ids: readonly string[], now: Date): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const live = await db
    .selectFrom('mcp_sessions')
    .select(['id', 'last_seen_at'])
    .where('id', 'in', [...ids])
    .where('last_seen_at', '>', new Date(now.getTime() - MCP_SESSION_IDLE_MS))
    .execute();
  const due = new Date(now.getTime() - SESSION_SEEN_EVERY_MS);
  const stale = live.filter((row) => row.last_seen_at <= due).map((row) => row.id);
  if (stale.length > 0) {
    await db.updateTable('mcp_sessions').set({ last_seen_at: now }).where('id', 'in', stale).execute();
  }
  return new Set(live.map((row) => row.id));
}

/** Whether the owner has this live session. */
export async function hasMcpSession(db: Db, owner: SessionOwner, id: string, now: Date): Promise<boolean> {
  return (await ownSessions(db, owner, now).where('id', '=', id).executeTakeFirst()) !== undefined;
}

export async function insertSubscription(db: Db, sessionId: string, uri: string): Promise<void> {
  await db
    .insertInto('mcp_session_subscriptions')
    .values({ session_id: sessionId, uri })
    .onConflict((oc) => oc.doNothing())
    .execute();
}

export async function deleteSubscription(db: Db, sessionId: string, uri: string): Promise<void> {
  await db
    .deleteFrom('mcp_session_subscriptions')
    .where('session_id', '=', sessionId)
    .where('uri', '=', uri)
    .execute();
}

/** The URIs a session subscribes to. */
export async function sessionSubscriptions(db: Db, sessionId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('mcp_session_subscriptions')
    .select('uri')
    .where('session_id', '=', sessionId)
    .orderBy('uri')
    .execute();
  return rows.map((r) => r.uri);
}

/** Which of these sessions are subscribed to the URI: one lookup of the primary key. */
export async function sessionsSubscribedTo(
  db: Db,
  sessionIds: readonly string[],
  uri: string,
): Promise<Set<string>> {
  if (sessionIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('mcp_session_subscriptions')
    .select('session_id')
    .where('session_id', 'in', [...sessionIds])
    .where('uri', '=', uri)
    .execute();
  return new Set(rows.map((r) => r.session_id));
}
