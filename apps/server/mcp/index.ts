import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, isDomainError } from '../../../domain/errors.ts';
import type { Application } from '../../application/index.ts';
import type { LimitHook } from '../api/index.ts';
import { jsonDepth, MAX_JSON_DEPTH } from '../api/json-body.ts';
import { publishDecision } from '../api/limits.ts';
import { type McpTokenVerifier, presentedToken, resolveMcpAuth, wwwAuthenticate } from './auth.ts';
import { createMcpServer, listTools, type RecordedCall } from './server.ts';

export type { McpTokenVerifier } from './auth.ts';

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
};

const MCP_PATH = '/mcp';

/** A JSON-RPC error that no request id can be given for (the transport's own errors look the same). */
function jsonRpcError(code: number, message: string): object {
  return { jsonrpc: '2.0', error: { code, message }, id: null };
}

/** A body the JSON parser could not read: answered as a JSON-RPC parse error, not a problem document. */
const unreadable = new WeakMap<object, string>();

/** Headers set through fastify (request id, RateLimit fields) onto the raw response the transport writes. */
function syncHeaders(reply: FastifyReply): void {
  if (reply.raw.headersSent) return;
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) reply.raw.setHeader(name, value);
  }
}

function isToolCall(body: unknown): boolean {
  return (
    typeof body === 'object' &&
    body !== null &&
    (body as { method?: unknown }).method === 'tools/call' &&
    'id' in body
  );
}

/**
 * `/mcp`: the MCP endpoint, Streamable HTTP in stateless mode (a new server and transport per request,
 * JSON responses, no SSE, no sessions), inside the fastify app. Every request carries an OAuth access
 * token, checked on every call; requests count against the account's rate limit like API calls; each
 * tool call is recorded in the activity log with source `mcp` and the OAuth client as actor.
 */
export const mcpRoutes: FastifyPluginAsync<McpDeps> = async (app, deps) => {
  const { activity } = deps.application;
  const allowedOrigin = new URL(deps.publicUrl).origin;
  const listed = listTools();
  const validator = new AjvJsonSchemaValidator();
  const refusals = new WeakMap<FastifyRequest, DomainError>();
  const pending = new Set<Promise<unknown>>();

  const record = (call: RecordedCall): void => {
    const stored = activity
      .record({
        accountId: call.principal.accountId,
        source: 'mcp',
        actor: call.principal.actor,
        operation: call.operation,
        siteId: call.siteId,
        articleId: call.articleId,
        revision: call.revision,
        status: call.status,
        requestId: call.requestId,
        durationMs: call.durationMs,
      })
      .catch((error: unknown) => app.log.error({ err: error }, 'could not record MCP activity'))
      .finally(() => pending.delete(stored));
    pending.add(stored);
  };
  app.addHook('onClose', async () => {
    await Promise.all([...pending]);
  });

  app.decorateRequest('auth', null as never);

  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (jsonDepth(text) > MAX_JSON_DEPTH) {
      const marker = {};
      unreadable.set(marker, `Parse error: the JSON is nested deeper than ${MAX_JSON_DEPTH} levels`);
      return done(null, marker);
    }
    try {
      done(null, JSON.parse(text));
    } catch {
      const marker = {};
      unreadable.set(marker, 'Parse error: the body is not valid JSON');
      done(null, marker);
    }
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
      // and retry); anything else is refused here.
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
    if (refused && !isToolCall(body)) throw refused;
    const principal = request.auth.principal;
    if (!principal) throw new DomainError('unauthenticated', 'Authentication required');

    reply.hijack();
    syncHeaders(reply);
    const server = createMcpServer(
      {
        application: deps.application,
        validator,
        log: request.log,
        record,
      },
      listed,
      {
        principal,
        requestId: String(request.id),
        refusal: refused,
        publishEdits: (decision) => {
          publishDecision(request, reply, decision);
          syncHeaders(reply);
        },
      },
    );
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    reply.raw.once('close', () => {
      transport.close().catch(() => {});
      server.close().catch(() => {});
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, body);
    } catch (error) {
      request.log.error({ err: error }, 'MCP request failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify(jsonRpcError(-32603, 'Internal error')));
      }
    }
  });

  // Stateless: no server-to-client SSE stream to open (GET) and no session to end (DELETE).
  const notAllowed = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const refused = refusals.get(request);
    if (refused) throw refused;
    return reply
      .status(405)
      .header('allow', 'POST')
      .send(
        jsonRpcError(
          -32000,
          `Method not allowed: ${request.method} is not used here (stateless server, no SSE stream, no sessions); POST JSON-RPC messages to /mcp`,
        ),
      );
  };
  app.get(MCP_PATH, { schema: { hide: true } }, notAllowed);
  app.delete(MCP_PATH, { schema: { hide: true } }, notAllowed);
};
