import type { FastifyInstance } from 'fastify';
import type { Db } from '../../../infra/db/schema.ts';
import type { GuardedFetchOptions } from '../../../infra/net/guarded-fetch.ts';
import type { Accounts } from '../../application/accounts.ts';
import type { PageKit } from '../http/page-kit.ts';
import { errorPageOf } from './error-page.ts';
import type { MetadataFetchLimits } from './fetch-limits.ts';
import { interactionRoutes } from './interactions.ts';
import type { OAuthSecrets } from './keys.ts';
import { protectedResourceMetadata, resourceMetadataUrl } from './metadata.ts';
import { providerMount } from './mount.ts';
import { createOAuthProvider, type LazyProvider, mcpResourceOf, onDemand } from './provider.ts';
import { createOAuthConnections, type OAuthConnections } from './verify.ts';

/*
 * The authorization side of /mcp, wired into the app: the authorization server (oidc-provider under
 * /oauth, metadata at the root), the protected resource metadata, the consent pages (in the web pages'
 * layout and session, through the PageKit handed in), and what the MCP endpoint and the Connect Site
 * page need from it. docs/oauth.md explains the whole.
 */

type OAuthSetup = OAuthConnections & {
  /** PUBLIC_URL/mcp: the resource indicator and the audience of every access token. */
  mcpResource: string;
  /** PUBLIC_URL/.well-known/oauth-protected-resource/mcp, for `WWW-Authenticate: Bearer resource_metadata="..."`. */
  resourceMetadataUrl: string;
  /** oidc-provider, made by the first request that needs it. */
  provider: LazyProvider;
};

type OAuthOptions = {
  db: Db;
  /** Finds account holders (sign-in, the claims of a grant). */
  accounts: Accounts;
  publicUrl: string;
  /** The persisted keys (loadOAuthSecrets). */
  secrets: OAuthSecrets;
  /** The web face's sessions, layout and forms, for the consent and error pages. */
  pages: PageKit;
  /** Trust settings for fetching client ID metadata documents: the image fetcher's (CA file, allowed networks). */
  fetchTrust?: Pick<GuardedFetchOptions, 'ca' | 'allowAddresses' | 'lookup'>;
  /** Client registrations allowed per client address per hour (default 60, per process). */
  registrationsPerHour?: number;
  /** How often client ID metadata documents may be fetched (default METADATA_FETCH_LIMITS, per process). */
  metadataFetchLimits?: MetadataFetchLimits;
  now?: () => Date;
};

declare module 'fastify' {
  interface FastifyInstance {
    /** The authorization server's services (registerOAuth). */
    oauth: OAuthSetup;
  }
}

/**
 * Registers the authorization server and its pages on `app` (the root instance) and returns what the
 * rest of the app needs; also available as `app.oauth`.
 */
export async function registerOAuth(app: FastifyInstance, opts: OAuthOptions): Promise<OAuthSetup> {
  const { db, publicUrl, secrets, pages } = opts;
  const now = opts.now ?? (() => new Date());
  const errorPage = errorPageOf(pages);
  const resource = mcpResourceOf(publicUrl);
  const provider = onDemand(() =>
    createOAuthProvider({
      db,
      accounts: opts.accounts,
      publicUrl,
      secrets,
      errorPage,
      logger: app.log.child({ component: 'oauth' }),
      ...(opts.fetchTrust ? { fetchTrust: opts.fetchTrust } : {}),
      ...(opts.metadataFetchLimits ? { metadataFetchLimits: opts.metadataFetchLimits } : {}),
      now,
    }),
  );
  const connections = createOAuthConnections({ provider, db, resource, now });

  await app.register(providerMount, {
    provider,
    publicUrl,
    errorPage,
    ...(opts.registrationsPerHour ? { registrationsPerHour: opts.registrationsPerHour } : {}),
  });
  await app.register(protectedResourceMetadata, { publicUrl, resource });
  await app.register(interactionRoutes, { provider, kit: pages, db, resource });

  // Expired tokens, codes, sessions and sign-in failure counts are deleted by the housekeeping job
  // `housekeeping.sessions` (infra/jobs/housekeeping.ts), not by each server process.
  app.addHook('onClose', async () => {
    await connections.stop();
  });

  const setup: OAuthSetup = {
    ...connections,
    mcpResource: resource,
    resourceMetadataUrl: resourceMetadataUrl(publicUrl),
    provider,
  };
  app.decorate('oauth', setup);
  return setup;
}
