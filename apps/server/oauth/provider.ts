import type { FastifyBaseLogger } from 'fastify';
import type Provider from 'oidc-provider';
import type { Client, KoaContextWithOIDC } from 'oidc-provider';
import type { Db } from '../../../infra/db/schema.ts';
import { createGuardedFetch, type GuardedFetchOptions } from '../../../infra/net/guarded-fetch.ts';
import type { Accounts } from '../../application/accounts.ts';
import { redactUrl } from '../http/log-redaction.ts';
import { SCOPES } from '../http/oauth-port.ts';
import { createOAuthAdapter } from './adapter.ts';
import { applicationTypeOf, redirectUriProblem } from './client-rules.ts';
import type { ErrorPage } from './error-page.ts';
import { createMetadataFetchLimiter, type MetadataFetchLimits } from './fetch-limits.ts';
import { metadataTextProblem } from './input-rules.ts';
import type { OAuthSecrets } from './keys.ts';

/*
 * The OAuth 2.1 authorization server for /mcp: oidc-provider, configured for exactly what the MCP
 * authorization specification needs and nothing more.
 *
 * - issuer PUBLIC_URL; every endpoint under /oauth; metadata (RFC 8414) at the origin root;
 * - open dynamic client registration (RFC 7591), redirect URI rules in client-rules.ts;
 * - client ID metadata documents (an https client_id), fetched through the SSRF guard, rate limited
 *   (fetch-limits.ts) and cached briefly;
 * - client metadata with control characters or unpaired surrogates in any string is refused
 *   (input-rules.ts);
 * - authorization code only, PKCE S256 required of every client (oidc-provider knows no `plain`);
 * - one resource (RFC 8707), PUBLIC_URL/mcp: the audience of every access token, requested or not;
 * - opaque access tokens (1 hour), refresh tokens (30 days) rotated at every use, revocation (RFC 7009);
 * - scopes `content:read`, `content:write` (and `offline_access`, `openid`, which change nothing here);
 * - every authorization asks the person (no remembered consent); the consent is a Grant bound to one
 *   account and to the access allowed;
 * - an error of the authorization request itself, raised before the person has acted, is shown on our
 *   own error page (error-page.ts) and never sent to the redirect URI (RFC 9700 section 4.11.2): only
 *   the person's answer (a code, or access_denied after Deny) goes back to the client.
 */

export const OAUTH_PREFIX = '/oauth';
const ACCESS_TOKEN_TTL_S = 60 * 60;
const REFRESH_TOKEN_TTL_S = 30 * 24 * 60 * 60;
/** How long a connection may last without being renewed by a new consent. */
const GRANT_TTL_S = 365 * 24 * 60 * 60;
/**
 * oidc-provider's cookies. Its session cookie never outlives one authorization: the mount drops it from
 * every new authorization request (mount.ts), so the account is always the web session's. Under an
 * https PUBLIC_URL (where they are Secure) the session cookie is named `__Host-` (Path=/, no Domain);
 * the interaction and resume cookies are set on their interaction's own path, which `__Host-` forbids,
 * so they are named `__Secure-`.
 */
export function providerCookieNames(publicUrl: string): {
  session: string;
  interaction: string;
  resume: string;
} {
  const https = new URL(publicUrl).protocol === 'https:';
  return {
    session: `${https ? '__Host-' : ''}cs_oauth_session`,
    interaction: `${https ? '__Secure-' : ''}cs_oauth_interaction`,
    resume: `${https ? '__Secure-' : ''}cs_oauth_resume`,
  };
}

const UNSTATED = 'unstated';

type ProviderDeps = {
  db: Db;
  accounts: Accounts;
  publicUrl: string;
  secrets: OAuthSecrets;
  /** The page of an error not sent back to the client. */
  errorPage: ErrorPage;
  logger: FastifyBaseLogger;
  /** How client ID metadata documents are fetched: the image fetcher's trust settings (CA, networks). */
  fetchTrust?: Pick<GuardedFetchOptions, 'ca' | 'allowAddresses' | 'lookup'>;
  /** How often client ID metadata documents may be fetched (default METADATA_FETCH_LIMITS). */
  metadataFetchLimits?: MetadataFetchLimits;
  now?: () => Date;
};

/** The MCP endpoint's resource identifier: PUBLIC_URL/mcp. */
export function mcpResourceOf(publicUrl: string): string {
  return `${publicUrl}/mcp`;
}

function sameResource(a: string, b: string): boolean {
  return URL.parse(a)?.href === URL.parse(b)?.href;
}

/**
 * oidc-provider's `fetch`, used for client ID metadata documents only (no other fetching feature is on):
 * through the same guard as image URLs (https, public addresses only, pinned connection), no redirects,
 * 16 KiB and 5 s at most.
 */
function metadataDocumentFetch(deps: ProviderDeps): (url: string | URL) => Promise<Response> {
  const fetch = createGuardedFetch({
    noun: { one: 'client metadata document', many: 'client metadata documents' },
    failureCode: 'invalid_request',
    tooLargeCode: 'invalid_request',
    accept: 'application/json',
    userAgent: 'ContentService-OAuth/1 (+client metadata documents)',
    maxBytes: 16 * 1024,
    maxRedirects: 0,
    timeoutMs: 5_000,
    ...deps.fetchTrust,
  });
  return async (url) => {
    try {
      const answer = await fetch(String(url));
      const headers = new Headers();
      for (const name of ['content-type', 'cache-control', 'expires']) {
        const value = answer.headers[name];
        if (typeof value === 'string') headers.set(name, value);
      }
      return new Response(Buffer.from(answer.body), { status: 200, headers });
    } catch (error) {
      deps.logger.info(
        {
          client_id: redactUrl(String(url)),
          reason: error instanceof Error ? error.message : 'failed',
          // What the caller is not told (which address a host resolved to): for the log only.
          ...(error instanceof Error && error.cause !== undefined ? { cause: String(error.cause) } : {}),
        },
        'client metadata document refused',
      );
      throw error;
    }
  };
}

/**
 * The authorization server, made by the first request that needs it (onDemand): oidc-provider and what
 * it loads (Koa, jose) are a large part of a start otherwise, and most starts serve no OAuth request.
 */
export type LazyProvider = () => Promise<Provider>;

/** `make` once, when first asked for; a failure is every asker's. */
export function onDemand(make: () => Promise<Provider>): LazyProvider {
  let made: Promise<Provider> | undefined;
  return () => {
    made ??= make();
    return made;
  };
}

export async function createOAuthProvider(deps: ProviderDeps): Promise<Provider> {
  const { default: OidcProvider, errors } = await import('oidc-provider');
  const { db, publicUrl } = deps;
  const resource = mcpResourceOf(publicUrl);
  const now = deps.now ?? (() => new Date());
  const metadataFetches = createMetadataFetchLimiter(deps.metadataFetchLimits);
  /** The documents each request has fetched (or tried to): at most one fetch per request and document. */
  const fetchedBy = new WeakMap<object, Set<string>>();

  /**
   * Whether the document at `id` may be fetched now (oidc-provider asks only when it has none cached).
   * Counted against the requesting client's address and the process (fetch-limits.ts); over either
   * budget, the request is answered 429 with Retry-After (on the authorization endpoint: the error
   * page). A request fetches a document once: oidc-provider's error handler looks the client up again
   * after a failed fetch, which is refused here instead of fetching (and counting) twice. A lookup
   * outside a request (the consent page, for a client whose cached document expired while the person
   * signed in) is not counted: that client has just been through the authorization endpoint.
   */
  async function allowMetadataFetch(ctx: KoaContextWithOIDC | undefined, id: string): Promise<boolean> {
    if (!ctx) return true;
    const seen = fetchedBy.get(ctx) ?? new Set<string>();
    fetchedBy.set(ctx, seen);
    if (seen.has(id)) return false;
    seen.add(id);
    const decision = await metadataFetches.consume(ctx.ip);
    if (decision.allowed) return true;
    deps.logger.warn(
      { client_id: redactUrl(id), scope: decision.scope, ip: ctx.ip },
      'client metadata document fetch refused: rate limited',
    );
    ctx.set('retry-after', String(decision.retryAfterSeconds));
    const refused = new errors.OIDCProviderError(429, 'temporarily_unavailable');
    refused.error_description =
      decision.scope === 'address'
        ? `Too many client metadata documents fetched for this address; retry in ${decision.retryAfterSeconds} s`
        : `Too many client metadata documents fetched just now; retry in ${decision.retryAfterSeconds} s`;
    throw refused;
  }

  const configuration = {
    adapter: createOAuthAdapter(db, now),
    clients: [],
    jwks: { keys: deps.secrets.signingKeys },
    cookies: {
      keys: deps.secrets.cookieKeys,
      names: providerCookieNames(publicUrl),
      long: { httpOnly: true, sameSite: 'lax' },
      short: { httpOnly: true, sameSite: 'lax' },
    },
    async findAccount(_ctx: KoaContextWithOIDC, sub: string) {
      const account = await deps.accounts.find(sub);
      if (!account) return undefined;
      return { accountId: account.id, claims: async () => ({ sub: account.id }) };
    },
    claims: { openid: ['sub'] },
    scopes: ['openid', 'offline_access', SCOPES.read, SCOPES.write],
    responseTypes: ['code'],
    clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
    // A placeholder default application_type: the validator below replaces it with the type
    // client-rules.ts infers from the redirect URIs, so "none stated" can be told from "web".
    clientDefaults: {
      application_type: UNSTATED,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
    extraClientMetadata: {
      properties: ['software_id', 'software_version'],
      validator(_ctx: unknown, key: string, _value: unknown, metadata: Record<string, unknown>) {
        if (key !== 'software_id') return;
        // Before oidc-provider's own checks, which let some of these through to the database.
        const textProblem = metadataTextProblem(metadata);
        if (textProblem) throw new errors.InvalidClientMetadata(textProblem);
        const problem = redirectUriProblem(metadata.redirect_uris);
        if (problem) throw new errors.InvalidClientMetadata(problem);
        const stated = metadata.application_type === UNSTATED ? undefined : metadata.application_type;
        metadata.application_type = applicationTypeOf(stated, metadata.redirect_uris);
      },
    },
    pkce: { required: () => true },
    routes: {
      authorization: `${OAUTH_PREFIX}/authorize`,
      backchannel_authentication: `${OAUTH_PREFIX}/backchannel`,
      code_verification: `${OAUTH_PREFIX}/device`,
      challenge: `${OAUTH_PREFIX}/challenge`,
      device_authorization: `${OAUTH_PREFIX}/device/auth`,
      end_session: `${OAUTH_PREFIX}/session/end`,
      introspection: `${OAUTH_PREFIX}/introspect`,
      jwks: `${OAUTH_PREFIX}/jwks`,
      pushed_authorization_request: `${OAUTH_PREFIX}/par`,
      registration: `${OAUTH_PREFIX}/register`,
      revocation: `${OAUTH_PREFIX}/revoke`,
      token: `${OAUTH_PREFIX}/token`,
      userinfo: `${OAUTH_PREFIX}/userinfo`,
      credential: `${OAUTH_PREFIX}/credential`,
    },
    interactions: {
      url: async (_ctx: KoaContextWithOIDC, interaction: { uid: string }) =>
        `${OAUTH_PREFIX}/interaction/${interaction.uid}`,
    },
    features: {
      devInteractions: { enabled: false },
      dPoP: { enabled: false },
      userinfo: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      introspection: { enabled: false },
      registration: { enabled: true, initialAccessToken: false, issueRegistrationAccessToken: false },
      revocation: {
        enabled: true,
        // A client revokes its own tokens only; another client's token is answered as if revoked.
        async allowedPolicy(_ctx: unknown, client: Client, token: { clientId: string }) {
          return token.clientId === client.clientId;
        },
      },
      resourceIndicators: {
        enabled: true,
        // A client that names no resource gets the MCP endpoint's: the only one there is.
        async defaultResource(_ctx: unknown, _client: unknown, oneOf?: string[]) {
          return oneOf ?? resource;
        },
        async useGrantedResource() {
          return true;
        },
        async getResourceServerInfo(_ctx: unknown, indicator: string) {
          if (!sameResource(indicator, resource)) {
            throw new errors.InvalidTarget(`the only resource here is ${resource}`);
          }
          return {
            scope: `${SCOPES.read} ${SCOPES.write}`,
            audience: resource,
            accessTokenTTL: ACCESS_TOKEN_TTL_S,
            accessTokenFormat: 'opaque',
          };
        },
      },
      clientIdMetadataDocument: {
        enabled: true,
        ack: 'draft-02',
        allowFetch: allowMetadataFetch,
        async allowClient(_ctx: unknown, client: Client) {
          return client.redirectUris.length > 0;
        },
        // Cached briefly: a changed document is seen within minutes.
        cacheDuration: { min: 60, max: 300 },
      },
    },
    fetch: metadataDocumentFetch(deps),
    fetchResponseBodyLimits: { 'client_id metadata document': 16 * 1024 },
    // Every authorization shows the consent page; only the grant just made there is used.
    async loadExistingGrant(ctx: KoaContextWithOIDC) {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    async issueRefreshToken(_ctx: unknown, client: Client) {
      return client.grantTypeAllowed('refresh_token');
    },
    rotateRefreshToken: () => true,
    async expiresWithSession() {
      return false;
    },
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      ClientCredentials: 600,
      DeviceCode: 600,
      BackchannelAuthenticationRequest: 600,
      PreAuthorizedCode: 600,
      IdToken: 3600,
      Interaction: 30 * 60,
      RefreshToken: REFRESH_TOKEN_TTL_S,
      Session: 12 * 60 * 60,
      Grant: GRANT_TTL_S,
    },
    // Browser-based clients may call the token endpoint from their redirect URIs' origins.
    clientBasedCORS(_ctx: unknown, origin: string, client: Client) {
      if (origin === 'null') return false;
      return client.redirectUris.some((uri) => URL.parse(uri)?.origin === origin);
    },
    async renderError(ctx: KoaContextWithOIDC, out: Record<string, unknown>) {
      // A prompt=none refusal carries 303, meant for a redirect it no longer gets.
      if (ctx.status < 400) ctx.status = 400;
      for (const [name, value] of Object.entries(deps.errorPage.headers)) ctx.set(name, value);
      ctx.type = 'html';
      ctx.body = deps.errorPage.html(out);
    },
  };

  const provider = new OidcProvider(publicUrl, configuration);
  // Behind a TLS-terminating proxy the app sees http: app.ts normalises the forwarded headers to
  // PUBLIC_URL before oidc-provider reads them.
  provider.proxy = true;
  // Errors of the authorization request itself (route `authorization`; `resume` is after the person
  // acted) are never redirected to the client: the error handler emits its event, then redirects only
  // errors that allow it. These listeners run in between, so the error is shown on our page instead.
  const keepOnOurPage = (ctx: unknown, error: unknown): void => {
    const route = (ctx as Partial<KoaContextWithOIDC> | undefined)?.oidc?.route;
    if (route === 'authorization' && typeof error === 'object' && error !== null) {
      (error as { allow_redirect?: boolean }).allow_redirect = false;
    }
  };
  provider.on('authorization.error', keepOnOurPage);
  provider.on('server_error', keepOnOurPage);
  provider.on('server_error', (_ctx: unknown, error: unknown) => {
    deps.logger.error({ err: error }, 'authorization server error');
  });
  for (const event of [
    'grant.error',
    'authorization.error',
    'registration_create.error',
    'revocation.error',
  ]) {
    provider.on(event, (_ctx: unknown, error: unknown) => {
      const e = error as { error?: string; error_description?: string };
      deps.logger.info(
        { event, error: e.error, error_description: e.error_description },
        'oauth request refused',
      );
    });
  }
  return provider;
}
