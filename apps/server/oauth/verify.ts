import { sql } from 'kysely';
import type { Db } from '../../../infra/db/schema.ts';
import {
  type ConnectedClient,
  type ConnectedClients,
  type McpTokenVerifier,
  SCOPES,
} from '../http/oauth-port.ts';
import type { LazyProvider } from './provider.ts';

/** An assistant connected to an account (for the Connect Site page). */
export type OAuthConnections = ConnectedClients & {
  verifyMcpToken: McpTokenVerifier;
  /** Writes pending last-use times (the server calls it on close). */
  flush(): Promise<void>;
  stop(): Promise<void>;
};

const TOKEN_SHAPE = /^[A-Za-z0-9_-]{20,512}$/;

function audienceIs(aud: string | string[] | undefined, resource: string): boolean {
  if (typeof aud === 'string') return aud === resource;
  return Array.isArray(aud) && aud.length === 1 && aud[0] === resource;
}

/**
 * The verifier and the connection list over oidc-provider's storage. Every check reads the database
 * (no cache): a disconnect or a revocation takes effect on the very next call. Last use is remembered
 * in memory and written every `flushMs`.
 */
export function createOAuthConnections(deps: {
  provider: LazyProvider;
  db: Db;
  resource: string;
  now?: () => Date;
  flushMs?: number;
}): OAuthConnections {
  const { db, resource } = deps;
  const now = deps.now ?? (() => new Date());
  let pending = new Map<string, Date>();

  const flush = async (): Promise<void> => {
    if (pending.size === 0) return;
    const batch = [...pending.entries()];
    pending = new Map();
    for (const [grantId, at] of batch) {
      await db
        .updateTable('oauth_grants')
        .set({ last_used_at: sql`greatest(last_used_at, ${at})` })
        .where('grant_id', '=', grantId)
        .execute();
    }
  };
  const timer = setInterval(() => {
    flush().catch(() => {});
  }, deps.flushMs ?? 10_000);
  timer.unref();

  const verifyMcpToken: McpTokenVerifier = async (token) => {
    if (typeof token !== 'string' || !TOKEN_SHAPE.test(token)) return null;
    const provider = await deps.provider();
    const at = await provider.AccessToken.find(token);
    // find() allows oidc-provider's clock tolerance past `exp`; an expired token is refused here strictly.
    if (!at || at.isExpired) return null;
    if (!audienceIs(at.aud, resource) || at.isSenderConstrained()) return null;
    if (!at.accountId || !at.grantId) return null;
    const grant = await provider.Grant.find(at.grantId);
    if (!grant || grant.isExpired || grant.accountId !== at.accountId || grant.clientId !== at.clientId) {
      return null;
    }
    const granted = new Set(grant.getResourceScope(resource).split(' ').filter(Boolean));
    const scopes = [...at.scopes].filter((s) => granted.has(s));
    if (scopes.length === 0) return null;
    const row = await db
      .selectFrom('oauth_grants as g')
      .innerJoin('accounts as a', 'a.id', 'g.account_id')
      .select(['g.client_name'])
      .where('g.grant_id', '=', at.grantId)
      .where('g.account_id', '=', at.accountId)
      .where('g.revoked_at', 'is', null)
      .executeTakeFirst();
    if (!row) return null;
    pending.set(at.grantId, now());
    return {
      accountId: at.accountId,
      scope: scopes.includes(SCOPES.write) ? 'write' : 'read',
      actor: { type: 'oauth_client', id: at.clientId, name: row.client_name },
    };
  };

  return {
    verifyMcpToken,

    async listConnectedClients(accountId) {
      const at = now();
      const rows = await db
        .selectFrom('oauth_grants as g')
        .select([
          'g.grant_id',
          'g.client_id',
          'g.client_name',
          'g.redirect_host',
          'g.scope',
          'g.created_at',
          'g.last_used_at',
        ])
        .where('g.account_id', '=', accountId)
        .where('g.revoked_at', 'is', null)
        .where((eb) =>
          eb.exists(
            eb
              .selectFrom('oauth_models as m')
              .select(sql<number>`1`.as('one'))
              .where('m.kind', '=', 'Grant')
              .whereRef('m.grant_id', '=', 'g.grant_id')
              .where((w) => w.or([w('m.expires_at', 'is', null), w('m.expires_at', '>', at)])),
          ),
        )
        .orderBy('g.created_at')
        .orderBy('g.grant_id')
        .execute();
      const byClient = new Map<string, ConnectedClient>();
      for (const row of rows) {
        const used = pending.get(row.grant_id) ?? row.last_used_at ?? undefined;
        const access = row.scope.split(' ').includes(SCOPES.write) ? 'write' : 'read';
        const seen = byClient.get(row.client_id);
        if (!seen) {
          byClient.set(row.client_id, {
            clientId: row.client_id,
            name: row.client_name,
            redirectHost: row.redirect_host,
            access,
            connectedAt: row.created_at,
            ...(used ? { lastUsedAt: used } : {}),
          });
          continue;
        }
        // The latest consent names it; the earliest says since when it is connected.
        seen.name = row.client_name;
        seen.redirectHost = row.redirect_host;
        if (access === 'write') seen.access = 'write';
        if (used && (!seen.lastUsedAt || used > seen.lastUsedAt)) seen.lastUsedAt = used;
      }
      return [...byClient.values()];
    },

    async disconnectClient(accountId, clientId) {
      await db.transaction().execute(async (trx) => {
        const grants = await trx
          .updateTable('oauth_grants')
          .set({ revoked_at: now() })
          .where('account_id', '=', accountId)
          .where('client_id', '=', clientId)
          .where('revoked_at', 'is', null)
          .returning('grant_id')
          .execute();
        const ids = grants.map((g) => g.grant_id);
        if (ids.length === 0) return;
        // The grants themselves and every code, access token and refresh token issued under them.
        await trx.deleteFrom('oauth_models').where('grant_id', 'in', ids).execute();
        for (const id of ids) pending.delete(id);
      });
    },

    flush,
    async stop() {
      clearInterval(timer);
      await flush();
    },
  };
}
