import type { IncomingMessage } from 'node:http';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Provider } from 'oidc-provider';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { noRouteProblem, type Problem } from '../http/errors.ts';
import { addressKey } from '../http/limits.ts';
import type { ErrorPage } from './error-page.ts';
import { parameterTextProblem } from './input-rules.ts';
import { type LazyProvider, OAUTH_PREFIX, providerCookieNames } from './provider.ts';

/*
 * oidc-provider (a Koa app) inside fastify: its routes are handed the raw request and response
 * (`reply.hijack()`), in a plugin scope whose only body "parser" reads nothing, so the request body
 * stream reaches oidc-provider untouched (it parses its own bodies).
 *
 * Before handing over:
 * - Host and X-Forwarded-Proto are set from PUBLIC_URL (and other X-Forwarded-* removed): every URL
 *   oidc-provider writes (metadata, redirects, cookie paths) is PUBLIC_URL's, whatever the client or a
 *   proxy sent, and its cookies are Secure when PUBLIC_URL is https. X-Forwarded-For is set to the
 *   client address fastify worked out (TRUST_PROXY), so oidc-provider's `ctx.ip` is that address (the
 *   metadata document fetch limits count by it).
 * - A query parameter with a control character or an unpaired surrogate (input-rules.ts) is refused
 *   with 400 here, before oidc-provider would store it (PostgreSQL cannot hold a NUL): on the
 *   authorization endpoint with the error page, elsewhere with an OAuth JSON error. Form and JSON
 *   bodies are checked where oidc-provider reads them (client metadata in provider.ts; the token and
 *   revocation endpoints only look values up by their hash).
 * - A new authorization request (`GET /oauth/authorize`, not the resume `/oauth/authorize/:uid`) is
 *   stripped of oidc-provider's session cookie: every authorization starts signed out of oidc-provider
 *   and is signed in as the web session's account (interactions.ts). oidc-provider's session can never
 *   name another account than the person now signed in.
 *
 * Registration is open (RFC 7591, no initial access token), so it is limited per client address
 * (`registrationsPerHour`, counted in each process): a flood of registrations is refused with 429.
 */

/** Client registrations per client address per hour, by default. */
export const REGISTRATIONS_PER_HOUR = 60;

function withoutCookies(header: string | undefined, names: ReadonlySet<string>): string | undefined {
  if (!header) return header;
  const kept = header
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part !== '' && !names.has(part.slice(0, Math.max(0, part.indexOf('='))).trim()));
  return kept.length > 0 ? kept.join('; ') : undefined;
}

function normalise(
  raw: IncomingMessage,
  publicUrl: URL,
  clientAddress: string,
  sessionCookies: ReadonlySet<string>,
): void {
  raw.headers.host = publicUrl.host;
  raw.headers['x-forwarded-proto'] = publicUrl.protocol.replace(/:$/, '');
  raw.headers['x-forwarded-for'] = clientAddress;
  delete raw.headers['x-forwarded-host'];
  delete raw.headers['x-forwarded-port'];
  delete raw.headers.forwarded;
  const path = (raw.url ?? '').split('?')[0];
  if (path === `${OAUTH_PREFIX}/authorize`) {
    const cookie = withoutCookies(raw.headers.cookie, sessionCookies);
    if (cookie === undefined) delete raw.headers.cookie;
    else raw.headers.cookie = cookie;
  }
}

/** For each request handed to oidc-provider: its 404 problem, should none of its endpoints take it. */
const noRoute = new WeakMap<IncomingMessage, () => Problem>();

/**
 * oidc-provider answers a path under /oauth that none of its endpoints takes (or not with this method:
 * `GET /oauth/token`) with Koa's text/plain "Not Found"; answered here as every other address of the
 * service that no route takes, problem+json `not_found` with the request id.
 */
function answeringNoRoute(provider: Provider): Provider {
  return provider.use(async (ctx, next) => {
    await next();
    const problem = noRoute.get(ctx.req);
    if (ctx._matchedRoute !== undefined || ctx.status !== 404 || ctx.body != null || !problem) return;
    ctx.status = 404;
    ctx.type = 'application/problem+json; charset=utf-8';
    ctx.body = JSON.stringify(problem());
  });
}

export const providerMount: FastifyPluginAsync<{
  provider: LazyProvider;
  publicUrl: string;
  errorPage: ErrorPage;
  registrationsPerHour?: number;
}> = async (app, { provider, publicUrl, errorPage, registrationsPerHour }) => {
  let callback: ReturnType<Awaited<ReturnType<LazyProvider>>['callback']> | undefined;
  const origin = new URL(publicUrl);
  const { session } = providerCookieNames(publicUrl);
  const sessionCookies = new Set([session, `${session}.sig`]);
  const registrations = new RateLimiterMemory({
    points: registrationsPerHour ?? REGISTRATIONS_PER_HOUR,
    duration: 3600,
  });

  /** False (and the 429 sent) when the address registered too many clients this hour. */
  async function registrationAllowed(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    if (request.method !== 'POST' || request.url.split('?')[0] !== `${OAUTH_PREFIX}/register`) return true;
    try {
      await registrations.consume(addressKey(request.ip));
      return true;
    } catch (error) {
      if (!(error instanceof RateLimiterRes)) throw error;
      const seconds = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
      await reply
        .status(429)
        .header('retry-after', String(seconds))
        .header('cache-control', 'no-store')
        .send({
          error: 'temporarily_unavailable',
          error_description: `Too many client registrations from this address; retry in ${seconds} s`,
        });
      return false;
    }
  }
  /** False (and the 400 sent) when a query parameter holds text no OAuth parameter may hold. */
  async function queryAllowed(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const url = request.raw.url ?? '';
    const at = url.indexOf('?');
    if (at === -1) return true;
    const problem = parameterTextProblem(new URLSearchParams(url.slice(at + 1)));
    if (!problem) return true;
    const out = { error: 'invalid_request', error_description: problem };
    reply.status(400).header('cache-control', 'no-store');
    if (url.startsWith(`${OAUTH_PREFIX}/authorize`)) {
      await reply.headers(errorPage.headers).type('text/html; charset=utf-8').send(errorPage.html(out));
    } else {
      await reply.send(out);
    }
    return false;
  }

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!(await queryAllowed(request, reply))) return;
    if (!(await registrationAllowed(request, reply))) return;
    noRoute.set(request.raw, () => noRouteProblem(request));
    callback ??= answeringNoRoute(await provider()).callback();
    normalise(request.raw, origin, request.ip, sessionCookies);
    reply.hijack();
    reply.raw.setHeader('x-request-id', String(request.id));
    await callback(request.raw, reply.raw);
  };
  const methods: ('GET' | 'POST' | 'OPTIONS' | 'DELETE' | 'PUT')[] = [
    'GET',
    'POST',
    'OPTIONS',
    'DELETE',
    'PUT',
  ];
  app.route({ method: methods, url: `${OAUTH_PREFIX}/*`, schema: { hide: true }, handler });
  // RFC 8414 metadata at the origin root (the issuer has no path), and its OpenID Connect twin, which
  // some clients look for first.
  for (const url of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
    app.route({ method: ['GET', 'OPTIONS'], url, schema: { hide: true }, handler });
  }
};
