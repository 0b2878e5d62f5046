import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../../../domain/errors.ts';
import type { Face, Metrics } from '../../../infra/metrics.ts';

/*
 * The HTTP side of the metrics (infra/metrics.ts): one onResponse hook observes every answered
 * request's duration under its face, route template, method and status, and counts its refusal, if
 * it was one. Each face marks its refusals where it maps an error to an answer (`markRefusal`: the
 * problem documents of apps/server/http/errors.ts, the refusal pages, the MCP tool errors); the hook
 * counts them, once per request, under the face it was served by.
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** The code of the error this request is answered with, if any (for the refusals counter). */
    refusal: ErrorCode | null;
  }
}

/** The methods counted by name; anything else is `other` (a method is the client's to invent). */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Which face serves a path (a route template, or the URL's path when no route matched). */
export function faceOf(path: string): Face {
  if (path.startsWith('/api/') || path === '/docs' || path.startsWith('/docs/')) return 'api';
  if (path === '/mcp' || path.startsWith('/oauth/') || path.startsWith('/.well-known/')) return 'mcp';
  if (path === '/healthz' || path === '/readyz') return 'probes';
  return 'pages';
}

/** Marks the request as answered with an error of `code`: counted once it is answered. */
export function markRefusal(request: FastifyRequest, code: ErrorCode): void {
  request.refusal = code;
}

/**
 * Declares `request.refusal` (always: the faces mark refusals whether metrics are on or not) and,
 * given metrics, the hook that observes every answer.
 */
export function installRequestMetrics(
  app: FastifyInstance,
  metrics: Pick<Metrics, 'requestDuration' | 'refusals'> | undefined,
): void {
  app.decorateRequest('refusal', null);
  if (!metrics) return;
  const { requestDuration, refusals } = metrics;
  // A callback hook: no promise per request.
  app.addHook('onResponse', (request, reply, done) => {
    const template = request.routeOptions.url;
    // No route matched: the face by the path, and one route label for all of them.
    const face = faceOf(template ?? request.url);
    const method = METHODS.has(request.method) ? request.method : 'other';
    requestDuration.observe(
      { face, route: template ?? 'unmatched', method, status: reply.statusCode },
      reply.elapsedTime / 1000,
    );
    if (request.refusal !== null) refusals.inc({ face, code: request.refusal });
    done();
  });
}
