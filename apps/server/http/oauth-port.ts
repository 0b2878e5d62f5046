import type { KeyScope } from '../../../domain/account/events.ts';
import type { RequestPrincipal } from './auth.ts';

/*
 * What other faces need of the authorization server, as ports: the token verifier and the scopes of
 * /mcp, the connected assistants of the Connect Site page. The authorization server (apps/server/oauth)
 * implements them; the composition root hands them over.
 */

/** The scopes of an access token for /mcp: to read the account's content, and to change it. */
export const SCOPES = { read: 'content:read', write: 'content:write' } as const;

/**
 * The principal of a bearer token presented to /mcp, or null when the token is unknown, expired,
 * revoked, for another audience/resource, or its grant was revoked: actor `{ type: 'oauth_client',
 * id: clientId, name: client_name ?? clientId }`, scope `write` when the grant includes content:write,
 * else `read`.
 */
export type McpTokenVerifier = (token: string) => Promise<RequestPrincipal | null>;

/** An assistant connected to an account (for the Connect Site page). */
export type ConnectedClient = {
  clientId: string;
  name: string;
  redirectHost: string;
  access: KeyScope;
  connectedAt: Date;
  lastUsedAt?: Date;
};

/** The assistants connected to an account, as the Connect Site page lists and disconnects them. */
export type ConnectedClients = {
  /** The assistants connected to the account: one entry per client, however many times it was allowed. */
  listConnectedClients(accountId: string): Promise<ConnectedClient[]>;
  /**
   * Disconnects an assistant from the account: every grant of the account to that client is revoked,
   * with its access and refresh tokens and pending codes, at once (the next call with them gets null).
   */
  disconnectClient(accountId: string, clientId: string): Promise<void>;
};
