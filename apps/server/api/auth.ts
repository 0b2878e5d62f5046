import type { FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { KeyScope } from '../../../domain/account/events.ts';
import { DomainError } from '../../../domain/errors.ts';
import type { Actor } from '../../../domain/event.ts';
import type { Db } from '../../../infra/db/schema.ts';
import { API_KEY_PATTERN, hashApiKey } from '../../../infra/ids.ts';
import { invalidKeyError, type Keys } from '../../application/keys.ts';
import { type AuthState, queryCredentialOf, type RequestPrincipal } from '../http/auth.ts';

export const WWW_AUTHENTICATE = 'Bearer realm="content-service"';

function failure(detail: string): DomainError {
  return new DomainError('unauthenticated', detail);
}

/** The key the request presents, or the reason it presents none that can be used. */
function presentedKey(request: FastifyRequest): { key: string } | { error: DomainError } | null {
  const inQuery = queryCredentialOf(request);
  if (inQuery) {
    return {
      error: failure(
        `Credentials are not accepted in the query string (${inQuery}); send Authorization: Bearer <key> or X-API-Key`,
      ),
    };
  }
  const authorization = request.headers.authorization;
  const xApiKey = request.headers['x-api-key'];
  if (Array.isArray(xApiKey)) return { error: failure('Send X-API-Key once') };
  let bearer: string | undefined;
  if (authorization !== undefined) {
    const match = /^Bearer +(\S+) *$/i.exec(authorization);
    if (!match?.[1]) return { error: failure('The Authorization header must be "Bearer <key>"') };
    bearer = match[1];
  }
  if (bearer !== undefined && xApiKey !== undefined && bearer !== xApiKey) {
    return { error: failure('Authorization and X-API-Key carry different keys; send one') };
  }
  const key = bearer ?? xApiKey;
  if (key === undefined) return null;
  if (!API_KEY_PATTERN.test(key)) return { error: failure('The API key is malformed') };
  return { key };
}

/**
 * Remembers when keys were used and writes it in one statement every few seconds, so a request
 * costs no database write. `flush()` on shutdown writes what is pending.
 */
export function createUsageRecorder(
  db: Db,
  intervalMs = 10_000,
): { touch(keyId: string, at: Date): void; flush(): Promise<void>; stop(): Promise<void> } {
  let pending = new Map<string, Date>();
  const flush = async (): Promise<void> => {
    if (pending.size === 0) return;
    const batch = [...pending.entries()];
    pending = new Map();
    await db
      .insertInto('api_key_usage')
      .values(batch.map(([key_id, at]) => ({ key_id, last_used_at: at })))
      .onConflict((oc) =>
        oc.column('key_id').doUpdateSet({
          last_used_at: sql`greatest(api_key_usage.last_used_at, excluded.last_used_at)`,
        }),
      )
      .execute();
  };
  const timer = setInterval(() => {
    flush().catch(() => {});
  }, intervalMs);
  timer.unref();
  return {
    touch(keyId, at) {
      pending.set(keyId, at);
    },
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
    },
  };
}

type AuthResolver = ((request: FastifyRequest) => Promise<AuthState>) & {
  /** Forgets what this process knew of the request's key (found revoked: the next request looks it up). */
  forget(request: FastifyRequest): void;
};

/** What never changes about a key, remembered by hash: and whether it was revoked, which is final. */
type KnownKey = { id: string; accountId: string; name: string; scope: KeyScope; revoked: boolean };
const KNOWN_KEYS = 10_000;

/**
 * What the request's credentials say, computed once per request (memoised): the authenticate hook
 * and the activity log (which may need it when the client hung up before the hooks ran) share it.
 * Keys are remembered by hash (at most 10,000, least recently used first out): a known key costs no
 * lookup, and its principal says the key is not yet confirmed unrevoked in this request.
 */
export function createAuthResolver(
  keys: Pick<Keys, 'findByHash'>,
  usage: { touch(keyId: string, at: Date): void },
): AuthResolver {
  const resolved = new WeakMap<FastifyRequest, Promise<AuthState>>();
  const hashes = new WeakMap<FastifyRequest, string>();
  const known = new Map<string, KnownKey>();
  const remember = (hash: string, key: KnownKey): void => {
    known.delete(hash);
    known.set(hash, key);
    if (known.size > KNOWN_KEYS) {
      const oldest = known.keys().next().value;
      if (oldest !== undefined) known.delete(oldest);
    }
  };
  async function resolve(request: FastifyRequest): Promise<AuthState> {
    const state: AuthState = { principal: null, accountId: null, actor: null, failure: null };
    const presented = presentedKey(request);
    if (presented === null) {
      state.failure = failure('Send an API key: Authorization: Bearer <key> or X-API-Key: <key>');
      return state;
    }
    if ('error' in presented) {
      state.failure = presented.error;
      return state;
    }
    const hash = hashApiKey(presented.key);
    hashes.set(request, hash);
    let key = known.get(hash);
    let confirmed = false;
    if (key) {
      remember(hash, key);
    } else {
      const row = await keys.findByHash(hash);
      if (!row) {
        state.failure = invalidKeyError();
        return state;
      }
      key = {
        id: row.id,
        accountId: row.account_id,
        name: row.name,
        scope: row.scope,
        revoked: row.revoked_at !== null,
      };
      remember(hash, key);
      confirmed = true;
    }
    const actor: Actor = { type: 'api_key', id: key.id, name: key.name };
    state.accountId = key.accountId;
    state.actor = actor;
    if (key.revoked) {
      // Answered exactly as an unknown key: the answer does not tell a revoked key from a made-up one.
      state.failure = invalidKeyError();
      return state;
    }
    state.principal = {
      accountId: key.accountId,
      scope: key.scope,
      actor,
      liveKey: confirmed ? undefined : key.id,
    };
    usage.touch(key.id, new Date());
    return state;
  }
  const resolver = (request: FastifyRequest): Promise<AuthState> => {
    let state = resolved.get(request);
    if (!state) {
      state = resolve(request);
      resolved.set(request, state);
    }
    return state;
  };
  resolver.forget = (request: FastifyRequest): void => {
    const hash = hashes.get(request);
    if (hash !== undefined) known.delete(hash);
  };
  return resolver;
}

/**
 * onRequest, after requireAuth: a known key is confirmed unrevoked with one lookup before the route
 * runs, unless the route confirms it in its own statement (`keyCheck: 'statement'`). A promise only
 * when there is a lookup to wait for.
 */
export function confirmKey(keys: Pick<Keys, 'isLive'>) {
  return (request: FastifyRequest): Promise<void> | undefined => {
    const principal = request.auth.principal;
    if (!principal?.liveKey) return undefined;
    if (request.routeOptions.config.keyCheck === 'statement') return undefined;
    return keys.isLive(principal.liveKey).then((live) => {
      if (!live) throw invalidKeyError();
      principal.liveKey = undefined;
    });
  };
}

/**
 * The key a route's statement must confirm unrevoked (pass it to the read-model query), or
 * undefined when this request has confirmed it already.
 */
export function liveKeyOf(request: FastifyRequest): string | undefined {
  return request.auth.principal?.liveKey;
}

/** onRequest, after the rate limit: 401 without a usable key, 403 for a read key on a write route. */
export function requireAuth(request: FastifyRequest, reply: FastifyReply): void {
  if (request.auth.failure || !request.auth.principal) {
    reply.header(
      'www-authenticate',
      request.auth.failure?.message.startsWith('Send an API key')
        ? WWW_AUTHENTICATE
        : `${WWW_AUTHENTICATE}, error="invalid_token"`,
    );
    throw request.auth.failure ?? failure('Authentication required');
  }
  const needs = request.routeOptions.config.scope ?? 'read';
  if (needs === 'write' && request.auth.principal.scope !== 'write') {
    throw new DomainError(
      'insufficient_scope',
      'This key can only read; create a key with the write scope to edit',
    );
  }
}

/** The authenticated principal of a route behind requireAuth. */
export function principalOf(request: FastifyRequest): RequestPrincipal {
  const principal = request.auth.principal;
  if (!principal) throw new DomainError('unauthenticated', 'Authentication required');
  return principal;
}
