import { createHash, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../../../infra/db/schema.ts';
import { clearCookie, cookieName, readCookie, setCookie } from './cookies.ts';

/*
 * Web sessions: a signed-in browser holds `cs_session`, an opaque random value (256 bits, base64url);
 * the database holds only its SHA-256 (`web_sessions.id_hash`), the account and the expiry. The cookie
 * is HttpOnly, SameSite=Lax, Path=/, and Secure and named `__Host-cs_session` when PUBLIC_URL is https
 * (cookies.ts). A new value is issued at every sign-in and password change (no fixation); signing out
 * deletes the row.
 */

const SESSION_COOKIE = 'cs_session';
/** How long a sign-in lasts. */
const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

const SESSION_VALUE = /^[A-Za-z0-9_-]{43}$/;

export type WebSession = {
  accountId: string;
  account: { id: string; name: string; email: string };
  /** The cookie's value: the CSRF tokens of this session derive from it. Never log it. */
  secret: string;
  expiresAt: Date;
};

/** A support staff member's session: read-only pages under /staff, never an account's pages or forms. */
export type StaffSession = {
  staff: { id: string; name: string; email: string };
  /** The cookie's value: the CSRF tokens of this session derive from it. Never log it. */
  secret: string;
  expiresAt: Date;
};

export type WebSessions = {
  /** Signs the browser in as `accountId`: a new session and its cookie. */
  create(reply: FastifyReply, accountId: string): Promise<void>;
  /** Signs the browser in as the support staff member `staffId`. */
  createStaff(reply: FastifyReply, staffId: string): Promise<void>;
  /**
   * The account holder's session the request's cookie names, if it is live and its account exists.
   * A staff member's session is not one: every account page and form refuses it.
   */
  current(request: FastifyRequest): Promise<WebSession | null>;
  /** The staff member's session the request's cookie names, if it is live and the staff member exists. */
  currentStaff(request: FastifyRequest): Promise<StaffSession | null>;
  /** Signs the browser out: the row is deleted and the cookie cleared. */
  end(request: FastifyRequest, reply: FastifyReply): Promise<void>;
};

/** What the database keeps of a session's cookie value (`web_sessions.id_hash`). */
export function hashSession(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

export function createWebSessions(deps: {
  db: Db;
  secure: boolean;
  now?: () => Date;
  ttlMs?: number;
}): WebSessions {
  const { db, secure } = deps;
  const sessionCookie = cookieName(SESSION_COOKIE, secure);
  const now = deps.now ?? (() => new Date());
  const ttlMs = deps.ttlMs ?? SESSION_TTL_MS;
  const cached = new WeakMap<FastifyRequest, Promise<WebSession | null>>();

  async function lookup(request: FastifyRequest): Promise<WebSession | null> {
    const secret = readCookie(request, sessionCookie);
    if (!secret || !SESSION_VALUE.test(secret)) return null;
    const row = await db
      .selectFrom('web_sessions as s')
      .innerJoin('accounts as a', 'a.id', 's.account_id')
      .select(['s.account_id', 's.expires_at', 'a.name', 'a.email'])
      .where('s.id_hash', '=', hashSession(secret))
      .where('s.expires_at', '>', now())
      .executeTakeFirst();
    if (!row?.account_id) return null;
    return {
      accountId: row.account_id,
      account: { id: row.account_id, name: row.name, email: row.email },
      secret,
      expiresAt: row.expires_at,
    };
  }

  async function lookupStaff(request: FastifyRequest): Promise<StaffSession | null> {
    const secret = readCookie(request, sessionCookie);
    if (!secret || !SESSION_VALUE.test(secret)) return null;
    const row = await db
      .selectFrom('web_sessions as s')
      .innerJoin('staff as t', 't.id', 's.staff_id')
      .select(['t.id', 't.name', 't.email', 's.expires_at'])
      .where('s.id_hash', '=', hashSession(secret))
      .where('s.expires_at', '>', now())
      .executeTakeFirst();
    if (!row) return null;
    return { staff: { id: row.id, name: row.name, email: row.email }, secret, expiresAt: row.expires_at };
  }

  async function start(
    reply: FastifyReply,
    holder: { account_id: string } | { staff_id: string },
  ): Promise<void> {
    const secret = randomBytes(32).toString('base64url');
    const at = now();
    const expiresAt = new Date(at.getTime() + ttlMs);
    await db
      .insertInto('web_sessions')
      .values({
        id_hash: hashSession(secret),
        account_id: null,
        ...holder,
        created_at: at,
        expires_at: expiresAt,
      })
      .execute();
    setCookie(reply, sessionCookie, secret, { secure, maxAge: ttlMs / 1000 });
  }
  const staffCache = new WeakMap<FastifyRequest, Promise<StaffSession | null>>();

  return {
    create: (reply, accountId) => start(reply, { account_id: accountId }),
    createStaff: (reply, staffId) => start(reply, { staff_id: staffId }),
    currentStaff(request) {
      let session = staffCache.get(request);
      if (!session) {
        session = lookupStaff(request);
        staffCache.set(request, session);
      }
      return session;
    },
    current(request) {
      let session = cached.get(request);
      if (!session) {
        session = lookup(request);
        cached.set(request, session);
      }
      return session;
    },
    async end(request, reply) {
      const secret = readCookie(request, sessionCookie);
      if (secret && SESSION_VALUE.test(secret)) {
        await db.deleteFrom('web_sessions').where('id_hash', '=', hashSession(secret)).execute();
      }
      cached.set(request, Promise.resolve(null));
      staffCache.set(request, Promise.resolve(null));
      clearCookie(reply, sessionCookie, { secure });
    },
  };
}
