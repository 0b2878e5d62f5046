import { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, isDomainError } from '../../../domain/errors.ts';
import type { Application } from '../../application/index.ts';
import { installJsonBodyParser, MAX_JSON_DEPTH } from '../http/json-body.ts';
import { type LimitHook, publishDecision } from '../http/limits.ts';
import { markRefusal } from '../http/metrics.ts';
import type { McpTokenVerifier } from '../http/oauth-port.ts';
import { clientRequestIdOf } from '../http/request-ids.ts';
import { mcpCall, presentedToken, resolveMcpAuth, wwwAuthenticate } from './auth.ts';
import {
  type ArticleChanges,
  type ArticleChangesSince,
  listenedResources,
  sessionStreams,
} from './notifications.ts';
import type { McpLimits, McpRequest } from './server.ts';
import type { StreamWatch } from './stream-watch.ts';

type McpDeps = {
  publicUrl: string;
  now: () => Date;
  /** Resolves the OAuth access token of each call (the authorization server's verifier). */
  verifyToken: McpTokenVerifier;
  /** Named in every 401's `WWW-Authenticate` (RFC 9728): where clients discover how to sign in. */
  resourceMetadataUrl: string;
  /** The request limiter of /api/v1: the same instance, so an account's API and MCP calls share one budget. */
  limit: LimitHook;
  /** The use cases, with the daily edit limit of /api/v1 (an account has one budget). */
  application: Application;
  /** The limits as configured, which the instructions and the write tools' descriptions state. */
  limits: McpLimits;
  /** Every new revision of an article, from now on: what resource subscriptions are told of. */
  articleChanges: ArticleChanges;
  /** What a session stream resumed with `Last-Event-ID` missed: the log read for its subscriptions. */
  articleChangesSince: ArticleChangesSince;
  /** Checks the open notification streams again (token, session) and ends those that fail. */
  streamChecks: StreamWatch;
};

const MCP_PATH = '/mcp';

/** A JSON-RPC error that no request id can be given for (the transport's own errors look the same). */
function jsonRpcError(code: number, message: string): object {
  return { jsonrpc: '2.0', error: { code, message }, id: null };
}

/** A body the JSON parser could not read: answered as a JSON-RPC parse error, not a problem document. */
const unreadable = new WeakMap<object, string>();

/**
 * The fetch-shaped request the SDK's handlers take, built from the fastify request: its URL, method and
 * headers, and the body as the JSON parser read it (the handlers also get it parsed).
 */
function webRequestOf(request: FastifyRequest, publicUrl: string, abort: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === 'string') headers.set(name, value);
    else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
  }
  headers.delete('content-length');
  return new Request(new URL(request.url, publicUrl), {
    method: request.method,
    headers,
    body: JSON.stringify(request.body),
    signal: abort,
  });
}

/**
 * Writes the SDK's fetch-shaped answer through fastify (whose headers, request id and RateLimit fields, it
 * keeps); an SSE stream (a `subscriptions/listen`) as it comes, until it ends or the client goes.
 */
async function sendResponse(reply: FastifyReply, response: Response): Promise<FastifyReply> {
  reply.status(response.status);
  response.headers.forEach((value, name) => {
    if (name !== 'content-length') reply.header(name, value);
  });
  if (response.body && response.headers.get('content-type')?.startsWith('text/event-stream')) {
    return reply.send(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream));
  }
  const text = await response.text();
  return reply.send(text === '' ? undefined : text);
}

/** The requests whose refusal over the limit is their own answer, recorded in the activity log. */
const ANSWERS_ITS_REFUSAL = new Set([
  'tools/call',
  'resources/list',
  'resources/read',
  'prompts/get',
  'completion/complete',
  'resources/subscribe',
  'resources/unsubscribe',
]);

function answersItsRefusal(body: unknown): boolean {
  return (
    typeof body === 'object' &&
    body !== null &&
    ANSWERS_ITS_REFUSAL.has((body as { method?: unknown }).method as string) &&
    'id' in body
  );
}

/** The 2025-era session a request names (`Mcp-Session-Id`), if any. */
function sessionHeader(request: FastifyRequest): string | null {
  const value = request.headers['mcp-session-id'];
  return typeof value === 'string' && value !== '' ? value : null;
}

function isInitialize(body: unknown): boolean {
  return typeof body === 'object' && body !== null && (body as { method?: unknown }).method === 'initialize';
}

const SESSION_NOT_FOUND =
  'Session not found: it ended, expired or is not yours; initialize again to start a new session';

/**
 * `/mcp`: the MCP endpoint, inside the fastify app, for both protocol eras of the specification. A
 * 2026-07-28 request (its `_meta` envelope names the revision; no handshake, `server/discover`) goes to
 * the SDK's `createMcpHandler`, which negotiates the version and answers an unsupported one with -32022;
 * a 2025-era request (the `initialize` handshake and what follows it) to a stateless Streamable HTTP
 * transport. Either way a new server per request and JSON responses. A 2025-era `initialize` also starts a
 * session (`Mcp-Session-Id`, kept in the database, so any process answers it) for resource subscriptions:
 * a GET with it opens the SSE stream their notifications come on, a DELETE ends it; requests without one
 * are answered statelessly as before. Every request carries an OAuth access
 * token, checked on every call; requests count against the account's rate limit like API calls; each
 * tool call is recorded in the activity log with source `mcp` and the OAuth client as actor.
 */
export const mcpRoutes: FastifyPluginAsync<McpDeps> = async (app, deps) => {
  const allowedOrigin = new URL(deps.publicUrl).origin;
  /**
   * Watches a request's notification stream until it closes: ended (`end`) once its token or session no
   * longer holds, saying why in the log.
   */
  const watch = (
    request: FastifyRequest,
    reply: FastifyReply,
    session: string | null,
    end: () => void,
  ): void => {
    const presented = presentedToken(request);
    const principal = request.auth.principal;
    if (!('token' in presented) || !principal) return;
    const release = deps.streamChecks.hold({
      token: presented.token,
      session,
      end: (why) => {
        request.log.info(
          {
            mcp_session: session ?? undefined,
            client_id: principal.actor.id,
            account_id: principal.accountId,
          },
          `MCP stream ended: ${why}`,
        );
        end();
      },
    });
    reply.raw.once('close', release);
  };
  const refusals = new WeakMap<FastifyRequest, DomainError>();
  /** What each request's server shares: the use cases and its request's log. */
  const services = (request: FastifyRequest) => ({
    application: deps.application,
    log: request.log,
  });
  /** The request a modern-era server answers, found from the fetch-shaped request the SDK hands its factory. */
  const perRequest = new WeakMap<
    Request,
    { mcpRequest: McpRequest; services: ReturnType<typeof services> }
  >();
  /**
   * The SDK's side of the endpoint (the SDK, the tools' listing, the modern-era handler), made by the
   * first request that reaches it rather than at start: most starts serve no MCP call.
   */
  const loadSdkSide = async () => {
    const [sdk, servers, subscriptions] = await Promise.all([
      import('@modelcontextprotocol/server'),
      import('./server.ts'),
      import('./subscriptions.ts'),
    ]);
    const catalogue = servers.catalogue(deps.limits);
    const modern = sdk.createMcpHandler(
      ({ requestInfo }) => {
        const found = requestInfo ? perRequest.get(requestInfo) : undefined;
        if (!found) throw new Error('MCP server factory called for a request /mcp did not pass');
        return servers.createMcpServer(found.services, catalogue, found.mcpRequest, 'modern');
      },
      {
        // 2025-era requests never reach it: the route sends them to a stateless transport of their own.
        legacy: 'reject',
        onerror: (error) => app.log.debug({ err: error }, 'MCP request refused'),
      },
    );
    const notifier = subscriptions.articleNotifier(deps.articleChanges, (uri, at) => {
      modern.notify.resourceUpdated(uri);
      void streams.publish(uri, at);
    });
    return {
      sdk,
      servers,
      catalogue,
      modern,
      notifier,
      refuseListen: subscriptions.refuseListen,
      missedSince: subscriptions.missedSince,
    };
  };
  let sdkSide: ReturnType<typeof loadSdkSide> | undefined;
  /** The GET streams of 2025-era sessions on this process. */
  const streams = sessionStreams(
    (sessionIds, uri) => deps.application.subscriptions.sessions.subscribedTo(sessionIds, uri),
    (error) => app.log.error({ err: error }, 'notifying MCP sessions of a revision failed'),
  );
  // Before the server stops listening: the open subscriptions/listen streams end (gracefully, with their
  // result), or closing would wait for them.
  app.addHook('preClose', async () => {
    streams.endAll();
    if (sdkSide) await (await sdkSide).modern.close();
  });
  app.addHook('onClose', async () => {
    if (sdkSide) await (await sdkSide).notifier.stop();
  });

  app.decorateRequest('auth', null as never);

  installJsonBodyParser(app, (why) => {
    const marker = {};
    unreadable.set(
      marker,
      why === 'nested'
        ? `Parse error: the JSON is nested deeper than ${MAX_JSON_DEPTH} levels`
        : 'Parse error: the body is not valid JSON',
    );
    return { body: marker };
  });

  app.addHook('onRequest', async (request, reply) => {
    // Answers carry an account's data: never to be kept by a shared cache.
    reply.header('cache-control', 'private, no-store');
    // Streamable HTTP: an Origin the service does not serve is refused (DNS rebinding). Clients outside
    // browsers send none; a browser page of another origin could not read the answers anyway (no CORS).
    const origin = request.headers.origin;
    if (origin !== undefined && origin !== allowedOrigin) {
      return reply
        .status(403)
        .send(jsonRpcError(-32000, 'Forbidden: requests from this Origin are not accepted'));
    }
    request.auth = await resolveMcpAuth(request, deps.verifyToken);
    try {
      // Before refusing an unknown token, so that floods of bad tokens spend their address's budget.
      await deps.limit(request, reply);
    } catch (error) {
      // A tool call of a known account over the limit is answered as a tool error (the model can wait
      // and retry), a resource read, prompt or completion as a JSON-RPC error, each recorded in the
      // activity log; anything else is refused here (HTTP 429).
      if (!(request.auth.principal && isDomainError(error) && error.code === 'rate_limited')) throw error;
      refusals.set(request, error);
    }
    if (!request.auth.principal) {
      reply.header(
        'www-authenticate',
        wwwAuthenticate(deps.resourceMetadataUrl, !('none' in presentedToken(request))),
      );
      throw request.auth.failure ?? new DomainError('unauthenticated', 'Authentication required');
    }
  });

  app.post(MCP_PATH, { schema: { hide: true } }, async (request, reply) => {
    const body = request.body;
    const problem = typeof body === 'object' && body !== null ? unreadable.get(body) : undefined;
    if (problem) return reply.status(400).send(jsonRpcError(-32700, problem));
    if (Array.isArray(body)) {
      return reply
        .status(400)
        .send(
          jsonRpcError(
            -32600,
            'Invalid Request: JSON-RPC batches are not supported; send one message per request',
          ),
        );
    }
    const refused = refusals.get(request) ?? null;
    if (refused && !answersItsRefusal(body)) throw refused;
    const principal = request.auth.principal;
    if (!principal) throw new DomainError('unauthenticated', 'Authentication required');

    const mcpRequest: McpRequest = {
      principal,
      requestId: String(request.id),
      clientRequestId: clientRequestIdOf(request),
      refusal: refused,
      publishEdits: (decision) => publishDecision(request, reply, decision),
      onRefusal: (code) => markRefusal(request, code),
    };
    sdkSide ??= loadSdkSide();
    const { sdk, servers, catalogue, modern, notifier, refuseListen } = await sdkSide;
    const abort = new AbortController();
    reply.raw.once('close', () => abort.abort());
    const web = webRequestOf(request, deps.publicUrl, abort.signal);
    try {
      if (await sdk.isLegacyRequest(web, body)) {
        const named = isInitialize(body) ? null : sessionHeader(request);
        if (named !== null) {
          const found = await deps.application.subscriptions.sessions
            .touch(mcpCall(principal, mcpRequest.requestId), named)
            .catch((error: unknown) => {
              // The database away: answered without the session (what needs it fails as unavailable).
              request.log.warn({ err: error }, 'the MCP session could not be looked up');
              return true;
            });
          if (!found) return reply.status(404).send(jsonRpcError(-32001, SESSION_NOT_FOUND));
          mcpRequest.session = named;
        }
        const server = servers.createMcpServer(services(request), catalogue, mcpRequest, 'legacy');
        const transport = new sdk.WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        try {
          await server.connect(transport);
          const response = await transport.handleRequest(web, { parsedBody: body });
          if (isInitialize(body) && response.status === 200) {
            // A new session; when it cannot be stored, the client goes on without one (stateless).
            const session = await deps.application.subscriptions.sessions
              .open(mcpCall(principal, mcpRequest.requestId))
              .catch((error: unknown) => {
                request.log.warn({ err: error }, 'the MCP session could not be stored');
                return null;
              });
            if (session) reply.header('mcp-session-id', session);
          }
          return await sendResponse(reply, response);
        } finally {
          await server.close().catch(() => {});
        }
      }
      const listen = listenedResources(body);
      if (listen) {
        const refusal = await refuseListen(
          { services: services(request), request: mcpRequest },
          listen.id,
          listen.uris,
        );
        if (refusal) return reply.send(refusal);
        // Following the log from before the stream opens: no revision after the acknowledgement is missed.
        await notifier.ready();
        // The SDK serves the stream; aborting its request ends it.
        watch(request, reply, null, () => abort.abort());
      }
      perRequest.set(web, { mcpRequest, services: services(request) });
      return await sendResponse(reply, await modern.fetch(web, { parsedBody: body }));
    } catch (error) {
      request.log.error({ err: error }, 'MCP request failed');
      return reply.status(500).send(jsonRpcError(-32603, 'Internal error'));
    }
  });

  // Without a session: no server-to-client SSE stream to open (GET) and no session to end (DELETE).
  const notAllowed = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    return reply
      .status(405)
      .header('allow', 'POST')
      .send(
        jsonRpcError(
          -32000,
          `Method not allowed: ${request.method} is used only with the Mcp-Session-Id of a session (started by initialize); POST JSON-RPC messages to /mcp`,
        ),
      );
  };

  // A session's SSE stream: the notifications of its resource subscriptions, on this process.
  app.get(MCP_PATH, { schema: { hide: true } }, async (request, reply) => {
    const refused = refusals.get(request);
    if (refused) throw refused;
    const named = sessionHeader(request);
    const principal = request.auth.principal;
    if (named === null || !principal) return notAllowed(request, reply);
    if (!String(request.headers.accept ?? '').includes('text/event-stream')) {
      return reply
        .status(406)
        .send(jsonRpcError(-32000, 'Not Acceptable: a session stream is text/event-stream'));
    }
    const call = mcpCall(principal, String(request.id));
    if (!(await deps.application.subscriptions.sessions.touch(call, named))) {
      return reply.status(404).send(jsonRpcError(-32001, SESSION_NOT_FOUND));
    }
    sdkSide ??= loadSdkSide();
    const side = await sdkSide;
    // Following the log before the stream opens: no revision after it opens is missed.
    await side.notifier.ready();
    const stream = streams.open(named);
    if (!stream) {
      return reply
        .status(409)
        .send(jsonRpcError(-32000, 'Conflict: this session has a stream open already; one at a time'));
    }
    // The client may have gone while the session was looked up: its stream is let go at once.
    if (request.raw.socket.destroyed) stream.destroy();
    else {
      reply.raw.once('close', () => stream.destroy());
      watch(request, reply, named, () => streams.end(named));
    }
    // A stream resumed (`Last-Event-ID`: the last event its client had, on this process or another):
    // what it missed meanwhile, once for each subscribed article with a revision since, before what
    // comes live (a revision sent both ways is sent twice, never not at all).
    const resumedFrom = request.headers['last-event-id'];
    if (typeof resumedFrom === 'string' && resumedFrom !== '') {
      let missed: Awaited<ReturnType<typeof side.missedSince>>;
      try {
        const uris = await deps.application.subscriptions.sessions.subscriptionsOf(call, named);
        missed = await side.missedSince(uris, resumedFrom, deps.articleChangesSince);
      } catch (error) {
        // Answered as an error (the database away: 503): the stream is let go, the session may open another.
        stream.destroy();
        throw error;
      }
      for (const m of missed ?? []) streams.send(named, m.uri, m.at);
      request.log.debug(
        { mcp_session: named, resumed_from: resumedFrom, replayed: missed?.length ?? null },
        'MCP session stream resumed',
      );
    }
    // At info: a stream's access-log line comes only when it closes, hours later.
    request.log.info({ mcp_session: named, client_id: principal.actor.id }, 'MCP session stream opened');
    return reply
      .status(200)
      .header('content-type', 'text/event-stream')
      .header('x-accel-buffering', 'no')
      .header('mcp-session-id', named)
      .send(stream);
  });

  // Ends a session: its subscriptions, and its stream on this process.
  app.delete(MCP_PATH, { schema: { hide: true } }, async (request, reply) => {
    const refused = refusals.get(request);
    if (refused) throw refused;
    const named = sessionHeader(request);
    const principal = request.auth.principal;
    if (named === null || !principal) return notAllowed(request, reply);
    const ended = await deps.application.subscriptions.sessions.end(
      mcpCall(principal, String(request.id)),
      named,
    );
    if (!ended) return reply.status(404).send(jsonRpcError(-32001, SESSION_NOT_FOUND));
    streams.end(named);
    return reply.status(204).send();
  });
};
