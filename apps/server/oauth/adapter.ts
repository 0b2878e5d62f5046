import { createHash } from 'node:crypto';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { Db } from '../../../infra/db/schema.ts';

/*
 * oidc-provider's storage in PostgreSQL: one table, `oauth_models`, one row per artifact (a client, a
 * grant, an authorization code, an access or refresh token, an interaction, a session).
 *
 * The row's key is the SHA-256 of the artifact's id, never the id: for codes and opaque tokens the id IS
 * the secret, so a copy of the table gives nobody a usable token. The id is put back into the payload
 * (`jti`) when a row is read by it. Sessions (and the device-flow artifacts, unused here) are also looked
 * up by `uid`/`userCode`, where the caller does not know the id: theirs stays in the payload.
 *
 * Expiry is honoured on every read (an expired row is as good as absent) and expired rows are deleted by
 * the housekeeping job `housekeeping.sessions` (infra/jobs/housekeeping.ts `purgeExpiredSessions`).
 */

const KEEP_ID_IN_PAYLOAD = new Set(['Session', 'DeviceCode', 'BackchannelAuthenticationRequest']);

/** The stored form of an id (and of a uid or user code): SHA-256, base64url. */
export function hashOAuthId(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

function epochSeconds(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

/** An adapter factory for oidc-provider's `adapter` option: one adapter per model name. */
export function createOAuthAdapter(db: Db, now: () => Date = () => new Date()): (name: string) => Adapter {
  return (kind) => {
    const keepId = KEEP_ID_IN_PAYLOAD.has(kind);

    const live = async (where: { column: 'id' | 'uid' | 'user_code'; value: string }) => {
      const row = await db
        .selectFrom('oauth_models')
        .select(['id', 'payload', 'consumed_at'])
        .where('kind', '=', kind)
        .where(where.column, '=', hashOAuthId(where.value))
        .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now())]))
        .executeTakeFirst();
      if (!row) return undefined;
      const payload: AdapterPayload = { ...row.payload };
      if (row.consumed_at) payload.consumed = epochSeconds(row.consumed_at);
      return payload;
    };

    return {
      async upsert(id, payload, expiresIn) {
        const { jti: _jti, ...rest } = payload;
        const stored = keepId ? payload : rest;
        const grantId = kind === 'Grant' ? id : typeof payload.grantId === 'string' ? payload.grantId : null;
        const values = {
          payload: JSON.stringify(stored),
          grant_id: grantId,
          uid: typeof payload.uid === 'string' ? hashOAuthId(payload.uid) : null,
          user_code: typeof payload.userCode === 'string' ? hashOAuthId(payload.userCode) : null,
          expires_at: typeof expiresIn === 'number' ? new Date(now().getTime() + expiresIn * 1000) : null,
        };
        await db
          .insertInto('oauth_models')
          .values({ kind, id: hashOAuthId(id), ...values })
          .onConflict((oc) => oc.columns(['kind', 'id']).doUpdateSet(values))
          .execute();
      },
      async find(id) {
        const payload = await live({ column: 'id', value: id });
        if (!payload) return undefined;
        if (kind === 'Client') return payload;
        return { ...payload, jti: id };
      },
      async findByUid(uid) {
        return live({ column: 'uid', value: uid });
      },
      async findByUserCode(userCode) {
        return live({ column: 'user_code', value: userCode });
      },
      async consume(id) {
        await db
          .updateTable('oauth_models')
          .set({ consumed_at: now() })
          .where('kind', '=', kind)
          .where('id', '=', hashOAuthId(id))
          .execute();
      },
      async destroy(id) {
        await db
          .deleteFrom('oauth_models')
          .where('kind', '=', kind)
          .where('id', '=', hashOAuthId(id))
          .execute();
      },
      async revokeByGrantId(grantId) {
        await db
          .deleteFrom('oauth_models')
          .where('kind', '=', kind)
          .where('grant_id', '=', grantId)
          .execute();
      },
    };
  };
}
