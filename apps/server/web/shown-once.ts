import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../../../infra/db/schema.ts';
import { hashSession, type WebSession } from './sessions.ts';

/*
 * A secret shown once (a new API key, a new webhook endpoint's signing secret). The form that makes it
 * answers with a 303 to the page (a reload does not send the form again), and the secret waits for
 * that page with the web session, server-side, never in an address: `web_sessions.shown_once`
 * (migration 023), encrypted (AES-256-GCM) under a key derived from the web secret and the session's
 * cookie value, which the database does not hold (only its hash), so the row alone cannot be read.
 * The next page of the Connect Site takes it, clearing it in the same statement: shown once, then
 * gone. Not taken within SHOWN_ONCE_MS, it is not shown; signing out deletes it with the session.
 */

/** How long a secret waits for its page. */
export const SHOWN_ONCE_MS = 5 * 60 * 1000;

export type ShownOnce =
  | { kind: 'api_key'; name: string; key: string }
  | { kind: 'webhook_secret'; url: string; secret: string };

export type ShownOnceStore = {
  /** Keeps `value` for the next page of this session (replacing one not shown yet). */
  keep(session: Pick<WebSession, 'secret'>, value: ShownOnce): Promise<void>;
  /** The value kept for this session, cleared as it is read; null when none, or it is too old. */
  take(session: Pick<WebSession, 'secret'>): Promise<ShownOnce | null>;
};

export function createShownOnce(deps: { db: Db; secret: Buffer; now: () => Date }): ShownOnceStore {
  const keyOf = (session: Pick<WebSession, 'secret'>): Buffer =>
    createHmac('sha256', deps.secret).update(`shown-once:${session.secret}`).digest();

  function seal(session: Pick<WebSession, 'secret'>, value: ShownOnce): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', keyOf(session), iv);
    const sealed = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url');
  }

  function open(session: Pick<WebSession, 'secret'>, text: string): ShownOnce | null {
    try {
      const bytes = Buffer.from(text, 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', keyOf(session), bytes.subarray(0, 12));
      decipher.setAuthTag(bytes.subarray(12, 28));
      const plain = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8');
      return JSON.parse(plain) as ShownOnce;
    } catch {
      // Not sealed for this session (or by this web secret): nothing to show.
      return null;
    }
  }

  return {
    async keep(session, value) {
      await deps.db
        .updateTable('web_sessions')
        .set({
          shown_once: seal(session, value),
          shown_once_until: new Date(deps.now().getTime() + SHOWN_ONCE_MS),
        })
        .where('id_hash', '=', hashSession(session.secret))
        .execute();
    },
    async take(session) {
      // Read and cleared in one statement: two pages loaded at once cannot both show it.
      const { rows } = await sql<{ shown_once: string; shown_once_until: Date | null }>`
        update web_sessions s set shown_once = null, shown_once_until = null
          from (select id_hash, shown_once, shown_once_until from web_sessions
                 where id_hash = ${hashSession(session.secret)} and shown_once is not null for update) o
         where s.id_hash = o.id_hash
        returning o.shown_once, o.shown_once_until`.execute(deps.db);
      const row = rows[0];
      if (!row?.shown_once_until || row.shown_once_until <= deps.now()) return null;
      return open(session, row.shown_once);
    },
  };
}
