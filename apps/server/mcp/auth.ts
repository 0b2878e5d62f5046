import type { FastifyRequest } from 'fastify';
import { DomainError } from '../../../domain/errors.ts';
import type { Call } from '../../application/call.ts';
import { type AuthState, queryCredentialOf, type RequestPrincipal } from '../http/auth.ts';
import { type McpTokenVerifier, SCOPES } from '../http/oauth-port.ts';

/** RFC 6750 `b64token`. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** What a request presents: no credentials, a malformed one, or a bearer token. */
export function presentedToken(
  request: FastifyRequest,
): { token: string } | { malformed: string } | { none: true } {
  const inQuery = queryCredentialOf(request);
  if (inQuery) {
    return {
      malformed: `Tokens are not accepted in the query string (${inQuery}); send Authorization: Bearer <token>`,
    };
  }
  const authorization = request.headers.authorization;
  if (authorization === undefined) return { none: true };
  const match = BEARER.exec(authorization);
  if (!match?.[1]) return { malformed: 'The Authorization header must be "Bearer <access token>"' };
  return { token: match[1] };
}

/**
 * The scope a 401 names (RFC 6750 section 3): what a client asks for when it signs in. Both, as every
 * tool needs content:read and the write tools content:write; the person decides on the consent page
 * whether to allow editing, and a read-only grant simply does not see the write tools.
 */
export const CHALLENGE_SCOPE = `${SCOPES.read} ${SCOPES.write}`;

/**
 * `WWW-Authenticate` of a 401 from /mcp (MCP authorization, RFC 9728 section 5.1): where the
 * protected resource metadata is, the scope to ask for, and `error="invalid_token"` when a token was
 * sent and refused.
 */
export function wwwAuthenticate(resourceMetadataUrl: string, tokenSent: boolean): string {
  const params = `resource_metadata="${resourceMetadataUrl}", scope="${CHALLENGE_SCOPE}"`;
  return tokenSent ? `Bearer error="invalid_token", ${params}` : `Bearer ${params}`;
}

/**
 * Resolves the request's bearer token into `request.auth` (the shape /api/v1 uses, so the request
 * limiter and the activity log read it alike). Tokens are never logged: the verifier gets the token,
 * nothing else does.
 */
export async function resolveMcpAuth(request: FastifyRequest, verify: McpTokenVerifier): Promise<AuthState> {
  const state: AuthState = { principal: null, accountId: null, actor: null, failure: null };
  const presented = presentedToken(request);
  if ('none' in presented) {
    state.failure = new DomainError(
      'unauthenticated',
      'Sign in first: this endpoint needs an OAuth access token (Authorization: Bearer <token>)',
    );
    return state;
  }
  if ('malformed' in presented) {
    state.failure = new DomainError('unauthenticated', presented.malformed);
    return state;
  }
  const principal = await verify(presented.token);
  if (!principal) {
    state.failure = new DomainError(
      'unauthenticated',
      'The access token is not valid (unknown, expired, revoked or for another resource); sign in again',
    );
    return state;
  }
  state.principal = principal;
  state.accountId = principal.accountId;
  state.actor = principal.actor;
  return state;
}

/** The application call of an MCP request by `principal`: its account, actor and scope, through the `mcp` face. */
export function mcpCall(principal: RequestPrincipal, requestId: string): Call {
  return {
    principal: {
      accountId: principal.accountId,
      actor: principal.actor,
      scope: principal.scope,
      origin: 'mcp',
      requestId,
    },
  };
}
