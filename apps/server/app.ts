import { readFileSync } from 'node:fs';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
  LogController,
} from 'fastify';
import { validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { type ArticleEvent, articleEventTypes, articleStream } from '../../domain/article/events.ts';
import { EDIT_LIMIT_PER_DAY, REQUESTS_PER_MINUTE } from '../../domain/vocabulary.ts';
import { type Config, PAGE_VIEWS_PER_MINUTE, REQUEST_ARRIVAL_SECONDS } from '../../infra/config.ts';
import type { Reads } from '../../infra/db/replicas.ts';
import { followLog } from '../../infra/event-store/follow.ts';
import { isAfter, newestAfter, positionOfText, positionText } from '../../infra/event-store/log.ts';
import type { JobSink } from '../../infra/jobs/queue.ts';
import {
  type Counter,
  createEditLimiter,
  createHeavyPageLimiter,
  createPageLimiter,
} from '../../infra/limits.ts';
import { allowNetworks, createImageFetcher, type FetchImage } from '../../infra/media/fetch.ts';
import { createDirectoryMediaStore, type MediaStore } from '../../infra/media/store.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { EditLimit } from '../application/call.ts';
import { createApplication } from '../application/index.ts';
import type { Runtime } from '../runtime.ts';
import { apiV1 } from './api/index.ts';
import { createDrain, type Drain } from './http/drain.ts';
import { clientErrorHandler, frameworkErrorsOf, installErrorHandling } from './http/errors.ts';
import { createHeavyWork, type HeavyWork, installHeavyWork } from './http/heavy-work.ts';
import { createRequestLimiter, type LimitHook } from './http/limits.ts';
import { LOG_REDACTION, redactUrl, requestSerializer } from './http/log-redaction.ts';
import { installRequestMetrics } from './http/metrics.ts';
import type { McpTokenVerifier } from './http/oauth-port.ts';
import { probeRoutes } from './http/probes.ts';
import { newRequestId } from './http/request-ids.ts';
import { requestArrivalOptions } from './http/request-timeout.ts';
import { installSlicedResponses } from './http/sliced-responses.ts';
import { mcpRoutes } from './mcp/index.ts';
import { STREAM_CHECK_MS, streamWatch } from './mcp/stream-watch.ts';
import { mediaRoutes } from './media-routes.ts';
import { registerOAuth } from './oauth/index.ts';
import { loadOAuthSecrets } from './oauth/keys.ts';
import { apiDocument, registerOpenApi } from './openapi.ts';
import { accountPasswordRoutes } from './web/account-password.ts';
import { connectSiteRoutes } from './web/connect-site.ts';
import { registerWeb } from './web/index.ts';
import { webPages } from './web/pages.ts';
import { installPublicAddress } from './web/public-address.ts';
import { PAGE_REFUSALS } from './web/refusal.ts';

type AppDeps = {
  runtime: Runtime;
  config: Pick<Config, 'PUBLIC_URL' | 'LOG_LEVEL' | 'MEDIA_DIR'> &
    Partial<
      Pick<
        Config,
        | 'MEDIA_FETCH_CA_FILE'
        | 'OUTBOUND_ALLOW_NETWORKS'
        | 'TRUST_PROXY'
        | 'PAGE_RATE_LIMIT_PER_MINUTE'
        | 'SHUTDOWN_TIMEOUT_SECONDS'
        | 'RATE_LIMIT_PER_MINUTE'
        | 'EDIT_LIMIT_PER_DAY'
        | 'HEAVY_WAITING_PER_ACCOUNT'
        | 'REQUEST_BODY_TIMEOUT_SECONDS'
      >
    >;
  /** The clock (periods such as this_month); tests fix it. */
  now?: () => Date;
  /** The web pages' clock (sessions, the sign-in throttle); tests move it. */
  webNow?: () => Date;
  limit?: LimitHook;
  /** The daily edit limit; without one, this process counts EDIT_LIMIT_PER_DAY (configured) a day alone, in memory. */
  editLimit?: EditLimit;
  /** Page views per web session; without one, this process counts PAGE_RATE_LIMIT_PER_MINUTE alone, in memory. */
  pageLimit?: Counter;
  /** Heavy pages per account; without one, this process counts RATE_LIMIT_PER_MINUTE (the API's quota) alone, in memory. */
  heavyPageLimit?: Counter;
  /** Heavy requests one at a time, turns shared between accounts (heavy-work.ts); default: this process's own. */
  heavy?: HeavyWork;
  /** Where featured images are kept; default a directory store in MEDIA_DIR. */
  media?: MediaStore;
  /** How image URLs are fetched; default the SSRF-guarded fetcher (trusting MEDIA_FETCH_CA_FILE too). */
  fetchImage?: FetchImage;
  /** pino options (a level, a stream), always with the redaction of secrets; tests pass `false` to keep quiet. */
  logger?: false | Record<string, unknown>;
  /** The drain on SIGTERM (serve.ts): `/readyz` answers 503 `stopping` and answers close their connection. */
  drain?: Drain;
  /** Where use cases add jobs (a webhook delivery to send now); without one the workers' sweep finds the work. */
  jobSink?: JobSink;
  /** Resolves the OAuth access tokens presented to /mcp; without one, /mcp answers 401 to everything. */
  verifyToken?: McpTokenVerifier;
  /** Named in /mcp's 401 `WWW-Authenticate`; default PUBLIC_URL/.well-known/oauth-protected-resource/mcp. */
  resourceMetadataUrl?: string;
  /** How often the open MCP notification streams are checked again (their token, their session); default 15 s. */
  streamCheckMs?: number;
  /** This process's metrics (infra/metrics.ts): every request is observed; without them, nothing is. */
  metrics?: Metrics;
  /** Where the use cases' reads run (read replicas: infra/db/replicas.ts); default the runtime's database. */
  reads?: Reads;
};

/**
 * Strict-Transport-Security under an https PUBLIC_URL: browsers use https only for a year for the host
 * and its subdomains (no `preload`: entering the browsers' preload list is the operator's decision).
 */
const HSTS = 'max-age=31536000; includeSubDomains';

/**
 * One access-log line per request, when it is answered: fastify's "request completed" with the
 * request (method, URL, client) that its "incoming request" line, left out, would have carried.
 */
class AccessLog extends LogController {
  override incomingRequest(): void {}
  override requestCompleted(
    error: Error | null,
    request: FastifyRequest,
    reply: FastifyReply,
    metadata: Parameters<LogController['requestCompleted']>[3],
  ): void {
    if (error || this.isLogDisabled(request)) {
      super.requestCompleted(error, request, reply, metadata);
      return;
    }
    reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
  override routeNotFound(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return;
    request.log.info(`Route ${request.raw.method}:${redactUrl(request.raw.url ?? '')} not found`);
  }
}

/**
 * The app's pino options: `given` (a level, a stream) with what keeps secrets out of the log: the
 * request's URL redacted (log-redaction.ts), no header logged (the `req` fields are method, URL, host
 * and client), errors and messages without the service's keys and tokens.
 */
function loggerOptions(given: Record<string, unknown> | undefined, level: string): Record<string, unknown> {
  const own = (given?.serializers ?? {}) as Record<string, unknown>;
  return {
    level,
    ...given,
    ...LOG_REDACTION,
    serializers: { ...own, ...LOG_REDACTION.serializers, req: requestSerializer },
  };
}

/**
 * The app's schema compilers: zod validates, JSON.stringify sends. Fastify types its compiler factories
 * as ajv's; at run time it calls them for the root context and hands each route's schema to what they
 * return, which is all `validatorCompiler` and the serializer need.
 */
const ZOD_COMPILERS = {
  buildValidator: () => validatorCompiler,
  buildSerializer: () => () => (data: unknown) => JSON.stringify(data),
} as unknown as NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;

/** The fastify app, without listening: tests inject into it or listen on port 0. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const https = new URL(deps.config.PUBLIC_URL).protocol === 'https:';
  const routerRefusal = frameworkErrorsOf(PAGE_REFUSALS);
  const app = Fastify({
    logger: deps.logger === false ? false : loggerOptions(deps.logger, deps.config.LOG_LEVEL),
    trustProxy: trustProxyOf(deps.config.TRUST_PROXY),
    // What the router refuses runs no hook: the header is set here for it.
    frameworkErrors: (error, request, reply) => {
      if (https) reply.header('strict-transport-security', HSTS);
      routerRefusal(error, request, reply);
    },
    clientErrorHandler,
    genReqId: newRequestId,
    bodyLimit: 3 * 1024 * 1024,
    // A request that has not arrived in full within the bound: a 408 and the connection closed.
    ...requestArrivalOptions(deps.config.REQUEST_BODY_TIMEOUT_SECONDS ?? REQUEST_ARRIVAL_SECONDS),
    return503OnClosing: true,
    logController: new AccessLog(),
    // Requests are validated by their zod schemas. Responses are built by the resources' mappers
    // (apps/application) (their types are the zod schemas'), and every response the end-to-end tests
    // receive is checked against the OpenAPI document made from those schemas. They are sent with
    // JSON.stringify, not parsed by their schema once more per request (on a page of 100 articles
    // that parse cost more than writing the JSON). Given here, as the schema controller's compilers,
    // fastify's own (ajv, fast-json-stringify) are never loaded: 0.1 to 0.2 s of every start.
    schemaController: { compilersFactory: ZOD_COMPILERS },
  }).withTypeProvider<ZodTypeProvider>();
  const drain = deps.drain ?? createDrain();
  // Hooks with nothing to wait for are written with `done` rather than async: an async hook costs each
  // request a promise and a turn of the microtask queue.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // On the raw response: also on the answers handed to oidc-provider (hijacked) and the error pages.
    if (https) reply.raw.setHeader('strict-transport-security', HSTS);
    // Draining: the connection is closed once answered, so that a load balancer does not reuse it.
    if (drain.stopping) reply.raw.setHeader('connection', 'close');
    done();
  });

  // A page asked for under another name of this server: to PUBLIC_URL, where its forms can be sent.
  installPublicAddress(app, deps.config.PUBLIC_URL);
  installRequestMetrics(app, deps.metrics);
  installErrorHandling(app, PAGE_REFUSALS);
  installSlicedResponses(app);
  const heavy = deps.heavy ?? createHeavyWork({ waitingPerAccount: deps.config.HEAVY_WAITING_PER_ACCOUNT });
  installHeavyWork(app, heavy);

  const { db } = deps.runtime;

  await app.register(probeRoutes, { drain });

  await registerOpenApi(app, { publicUrl: deps.config.PUBLIC_URL });
  const media = deps.media ?? createDirectoryMediaStore(deps.config.MEDIA_DIR);
  await app.register(mediaRoutes, { store: media });
  // One request limiter and one edit gate for /api/v1 and /mcp: an account has one budget.
  const now = deps.now ?? (() => new Date());
  // The limits as configured (their defaults without): the limiters made here count them, and the
  // MCP texts state them.
  const limits = {
    requestsPerMinute: deps.config.RATE_LIMIT_PER_MINUTE ?? REQUESTS_PER_MINUTE,
    editsPerDay: deps.config.EDIT_LIMIT_PER_DAY ?? EDIT_LIMIT_PER_DAY,
  };
  const limit = deps.limit ?? defaultRequestLimit(app, limits.requestsPerMinute);
  const publicUrl = deps.config.PUBLIC_URL;
  // The use cases every face calls, with this app's clock, limits, media store and image fetcher.
  const application = createApplication({
    db,
    ...(deps.reads ? { reads: deps.reads } : {}),
    commands: deps.runtime.commands,
    searchLanguage: deps.runtime.searchLanguage,
    publicUrl,
    now,
    editLimit: deps.editLimit ?? defaultEditLimit(app, limits.editsPerDay),
    media,
    fetchImage: deps.fetchImage ?? defaultImageFetcher(deps.config),
    diff: deps.runtime.diff,
    ...(deps.jobSink ? { jobs: deps.jobSink } : {}),
    allowOutbound: allowNetworks(deps.config.OUTBOUND_ALLOW_NETWORKS ?? []),
    log: app.log,
  });
  // The activity records every face started are stored before the app closes: within half the
  // shutdown's time while the database is away (the rest is the other parts'), then given up and counted.
  const shutdownSeconds = deps.config.SHUTDOWN_TIMEOUT_SECONDS;
  app.addHook('onClose', () =>
    application.activity.drain(shutdownSeconds === undefined ? undefined : (shutdownSeconds * 1000) / 2),
  );
  await app.register(apiV1, { prefix: '/api/v1', db, application, publicUrl, limit });
  // The web pages' kit and sign-in; the authorization server for /mcp (docs/oauth.md), its consent
  // pages in the web pages' layout and session; also `app.oauth`. The Connect Site page and the MCP
  // endpoint take the connections and the token verifier from it.
  const secrets = await loadOAuthSecrets(db);
  const web = await registerWeb(app, {
    db,
    credentials: application.credentials,
    publicUrl,
    secret: secrets.webSecret,
    now: deps.webNow ?? (() => new Date()),
  });
  const oauth = await registerOAuth(app, {
    db,
    accounts: application.accounts,
    publicUrl,
    secrets,
    pages: web.pages,
    fetchTrust: fetchTrustOf(deps.config),
  });
  const verifyToken = deps.verifyToken ?? oauth.verifyMcpToken;
  // The MCP notification streams open on this process, checked again every so often, and at once after a
  // disconnect here (apps/server/mcp/stream-watch.ts).
  const streamChecks = streamWatch({
    verify: verifyToken,
    keepSessions: application.subscriptions.sessions.keep,
    everyMs: deps.streamCheckMs ?? STREAM_CHECK_MS,
    onError: (error) => app.log.warn({ err: error }, 'checking the open MCP streams failed'),
  });
  app.addHook('onClose', async () => streamChecks.stop());
  await app.register(connectSiteRoutes, {
    kit: web.kit,
    keys: application.keys,
    connections: {
      listConnectedClients: (accountId) => oauth.listConnectedClients(accountId),
      async disconnectClient(accountId, clientId) {
        await oauth.disconnectClient(accountId, clientId);
        await streamChecks.check();
      },
    },
    webhooks: application.webhooks,
    activity: application.activity,
  });
  await app.register(accountPasswordRoutes, {
    kit: web.kit,
    credentials: application.credentials,
    activity: application.activity,
  });
  await app.register(webPages, {
    kit: web.kit,
    application,
    diff: deps.runtime.diff,
    heavy,
    pageLimit: deps.pageLimit ?? defaultPageLimit(app, deps.config.PAGE_RATE_LIMIT_PER_MINUTE),
    heavyPageLimit: deps.heavyPageLimit ?? defaultHeavyPageLimit(app, limits.requestsPerMinute),
    apiDocument: () => apiDocument(app),
  });
  await app.register(mcpRoutes, {
    publicUrl: deps.config.PUBLIC_URL,
    now,
    verifyToken,
    resourceMetadataUrl: deps.resourceMetadataUrl ?? oauth.resourceMetadataUrl,
    limit,
    limits,
    application,
    articleChanges: (onArticle) =>
      followLog<ArticleEvent>({
        handle: deps.runtime.handle,
        types: articleEventTypes,
        onEvent: (event) => onArticle(event.data.articleId, positionText(event)),
        onError: (error) =>
          app.log.error({ err: error }, 'following article revisions for MCP subscriptions failed'),
      }),
    articleChangesSince: async (at, articleIds) => {
      const after = positionOfText(at);
      if (after === null) return null;
      const streams = new Map(articleIds.map((id) => [articleStream(id), id]));
      const newest = await newestAfter(deps.runtime.db, [...streams.keys()], after, articleEventTypes);
      return [...newest]
        .sort(([, x], [, y]) => (isAfter(x, y) ? 1 : isAfter(y, x) ? -1 : 0))
        .map(([stream, place]) => ({ articleId: streams.get(stream) as string, at: positionText(place) }));
    },
    streamChecks,
  });

  return app;
}

/** TRUST_PROXY as fastify takes it: a hop count believes that many proxies nearest to the service. */
function trustProxyOf(
  setting: Config['TRUST_PROXY'],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (setting === undefined) return false;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return setting;
}

function defaultEditLimit(app: FastifyInstance, perDay: number): EditLimit {
  const limiter = createEditLimiter({ perDay, logger: app.log });
  app.addHook('onClose', async () => limiter.close());
  return limiter.limit;
}

/** Without a page limit given, this process counts page views alone, in memory. */
function defaultPageLimit(app: FastifyInstance, perMinute = PAGE_VIEWS_PER_MINUTE): Counter {
  const pages = createPageLimiter({ perMinute, logger: app.log });
  app.addHook('onClose', async () => pages.close());
  return pages;
}

/** Without a heavy-page limit given, this process counts heavy pages alone, in memory, at the API's quota. */
function defaultHeavyPageLimit(app: FastifyInstance, perMinute: number): Counter {
  const heavyPages = createHeavyPageLimiter({ perMinute, logger: app.log });
  app.addHook('onClose', async () => heavyPages.close());
  return heavyPages;
}

/** Without a limiter given, this process counts the account's requests a minute alone, in memory. */
function defaultRequestLimit(app: FastifyInstance, perMinute: number): LimitHook {
  const limiter = createRequestLimiter({ perMinute, logger: app.log });
  app.addHook('onClose', async () => limiter.close());
  return limiter.hook;
}

/** What outgoing fetches of user-given URLs trust besides public hosts: MEDIA_FETCH_CA_FILE, OUTBOUND_ALLOW_NETWORKS. */
function fetchTrustOf(config: AppDeps['config']): { ca?: Buffer; allowAddresses?: (ip: string) => boolean } {
  const networks = config.OUTBOUND_ALLOW_NETWORKS ?? [];
  return {
    ...(config.MEDIA_FETCH_CA_FILE ? { ca: readFileSync(config.MEDIA_FETCH_CA_FILE) } : {}),
    ...(networks.length > 0 ? { allowAddresses: allowNetworks(networks) } : {}),
  };
}

function defaultImageFetcher(config: AppDeps['config']): FetchImage {
  return createImageFetcher(fetchTrustOf(config));
}
