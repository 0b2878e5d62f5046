import type { FastifyRequest } from 'fastify';
import type { KeyScope } from '../../../domain/account/events.ts';
import type { DomainError } from '../../../domain/errors.ts';
import type { Actor } from '../../../domain/event.ts';
import type { Principal } from '../../application/call.ts';

/**
 * Who a request's credentials name (an account, through one API key or one OAuth grant): the
 * application's principal without what each call adds (its face's origin, its request id). `liveKey`
 * is the API key while this request has not yet seen it unrevoked in the database: confirmed by the
 * route's own statement, or by a lookup before the route runs (apps/server/api/auth.ts).
 */
export type RequestPrincipal = Omit<Principal, 'origin' | 'requestId'>;

/** What the credentials said about the caller even when the call is refused: a revoked key still names its account. */
export type AuthState = {
  principal: RequestPrincipal | null;
  accountId: string | null;
  actor: Actor | null;
  failure: DomainError | null;
};

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthState;
  }
  interface FastifyContextConfig {
    /** The key scope the route needs; `read` when not given. */
    scope?: KeyScope;
    /**
     * `statement`: the route's read confirms that the key is not revoked in its own statement
     * (it passes `liveKeyOf(request)` to the query); every other route has it confirmed before it runs.
     */
    keyCheck?: 'statement';
  }
}

/** Query parameters that would carry a credential (API key or access token): refused by every face. */
const QUERY_CREDENTIALS = ['api_key', 'apikey', 'key', 'access_token', 'token'];

/**
 * The name of the credential the request's query string carries, if any: credentials in URLs end up
 * in logs and browser histories, so each face refuses such a request in its own words.
 */
export function queryCredentialOf(request: FastifyRequest): string | undefined {
  const query = request.query as Record<string, unknown> | undefined;
  return QUERY_CREDENTIALS.find((name) => query && name in query);
}
