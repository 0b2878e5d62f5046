import multipart from '@fastify/multipart';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { MAX_IMAGE_BYTES } from '../../../domain/article/events.ts';
import { isDomainError } from '../../../domain/errors.ts';
import type { Db } from '../../../infra/db/schema.ts';
import { parameterError } from '../../application/contract.ts';
import type { Application } from '../../application/index.ts';
import { type Acting, createActivityLog } from '../http/activity-log.ts';
import type { AuthState } from '../http/auth.ts';
import { installJsonBodyParser, MAX_JSON_DEPTH, type UnreadableJson } from '../http/json-body.ts';
import type { LimitHook } from '../http/limits.ts';
import {
  confirmKey,
  createAuthResolver,
  createUsageRecorder,
  requireAuth,
  WWW_AUTHENTICATE,
} from './auth.ts';
import { readRoutes } from './read-routes.ts';
import { webhookRoutes } from './webhook-routes.ts';
import { writeRoutes } from './write-routes.ts';

type ApiDeps = {
  /** Where the last use of each API key is written (api_key_usage). */
  db: Db;
  application: Application;
  publicUrl: string;
  limit?: LimitHook;
};

/** A repeated query parameter is ambiguous: refuse it by name rather than pick one (a throw is the refusal). */
function refuseRepeatedParameters(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const query = request.query as Record<string, unknown>;
  const repeated = Object.entries(query).filter(([, value]) => Array.isArray(value));
  if (repeated.length > 0) {
    throw parameterError(
      'A query parameter is given more than once',
      repeated.map(([name]) => ({ in: 'query', name, message: 'must be given once' })),
    );
  }
  done();
}

/** A JSON body that cannot be read is a 400 `invalid_request` that says why. */
function unreadableBody(why: UnreadableJson): { error: Error } {
  if (why === 'nested') {
    return {
      error: parameterError(`The JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`, [
        { in: 'body', name: 'body', message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` },
      ]),
    };
  }
  return {
    error: parameterError(`The body is not valid JSON: ${why.message}`, [
      { in: 'body', name: 'body', message: 'must be valid JSON' },
    ]),
  };
}

/** `/api/v1`: API-key authentication, limits, the activity log, and the routes. */
export const apiV1: FastifyPluginAsyncZod<ApiDeps> = async (app, deps) => {
  const { db } = deps;
  const usage = createUsageRecorder(db);
  const resolveAuth = createAuthResolver(deps.application.keys, usage);
  // The key is resolved by the time most requests end (request.auth); one that ends before (a client
  // gone during authentication) waits for it.
  const acting = ({ accountId, actor, principal }: AuthState): Acting | null =>
    accountId && actor ? { accountId, actor, refused: !principal } : null;
  const activity = createActivityLog(deps.application.activity, 'api', (request) =>
    request.auth ? acting(request.auth) : resolveAuth(request).then(acting),
  );
  // Declared up front for a stable object shape; the onRequest hooks below set both on every request.
  app.decorateRequest('auth', null as never);
  app.decorateRequest('activity', null as never);
  // One onRequest hook, the steps in this order (each refusal ends the request): the activity
  // record's start, the key, the request limit (between authentication and refusal, so floods of
  // bad keys count too), the refusal of a missing or insufficient key, the key confirmed unrevoked.
  // Only the steps that may wait are awaited (each await is a promise and a microtask turn per request).
  const confirm = confirmKey(deps.application.keys);
  const limit = deps.limit;
  app.addHook('onRequest', async (request, reply) => {
    // Answers carry an account's data (errors name its ids): never to be kept by a shared cache.
    reply.header('cache-control', 'private, no-store');
    activity.onRequest(request, reply);
    request.auth = await resolveAuth(request);
    if (limit) await limit(request, reply);
    requireAuth(request, reply);
    const confirming = confirm(request);
    if (confirming) await confirming;
  });
  // A key this process knew, found revoked by a route's own statement: forget it (the next request
  // looks it up and is refused before it runs), and say how to authenticate, as requireAuth does.
  app.addHook('onError', async (request, reply, error) => {
    if (!isDomainError(error) || error.code !== 'unauthenticated' || !request.auth?.principal) return;
    resolveAuth.forget(request);
    if (!reply.hasHeader('www-authenticate')) {
      reply.header('www-authenticate', `${WWW_AUTHENTICATE}, error="invalid_token"`);
    }
  });
  app.addHook('preValidation', refuseRepeatedParameters);
  installJsonBodyParser(app, unreadableBody);
  app.addHook('onClose', async () => {
    await usage.stop();
  });
  const { application, publicUrl } = deps;
  await app.register(readRoutes, { application, publicUrl });
  await app.register(multipart, { limits: { fileSize: MAX_IMAGE_BYTES, files: 1, fields: 4, parts: 5 } });
  await app.register(writeRoutes, { application, publicUrl });
  await app.register(webhookRoutes, { application, publicUrl });
};
