import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { type ErrorCode, type ErrorDetail, type ErrorLinks, isDomainError } from '../../../domain/errors.ts';
import { isDatabaseUnavailable } from '../../../infra/db/unavailable.ts';
import { STATUS_CODES } from '../../../infra/http-status.ts';
import { markRefusal } from './metrics.ts';
import { newRequestId } from './request-ids.ts';

/** Retry-After of a 503: a database restart or failover is typically over within seconds. */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

/** What every face tells its caller when the database is away for now: no driver's words, when to retry. */
export const UNAVAILABLE_DETAIL = `The service is briefly unavailable; retry in ${UNAVAILABLE_RETRY_AFTER_S} s.`;

/** The one mapping from a semantic error code to an HTTP status. */
export const statusOf: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthenticated: 401,
  insufficient_scope: 403,
  not_found: 404,
  conflict: 409,
  revision_mismatch: 412,
  image_too_large: 413,
  unsupported_image: 415,
  protected_links_modified: 422,
  image_fetch_failed: 422,
  diff_too_large: 422,
  rate_limited: 429,
  edit_limit_reached: 429,
  unavailable: 503,
  internal: 500,
};

const titles: Record<ErrorCode, string> = {
  invalid_request: 'Invalid request',
  unauthenticated: 'Authentication required',
  insufficient_scope: 'Insufficient scope',
  not_found: 'Not found',
  conflict: 'Conflict',
  revision_mismatch: 'Revision mismatch',
  image_too_large: 'Image too large',
  unsupported_image: 'Unsupported image',
  protected_links_modified: 'Protected links modified',
  image_fetch_failed: 'Image fetch failed',
  diff_too_large: 'Diff too large',
  rate_limited: 'Too many requests',
  edit_limit_reached: 'Daily edit limit reached',
  unavailable: 'Service unavailable',
  internal: 'Internal error',
};

export type Problem = {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: ErrorCode;
  request_id: string;
  errors?: readonly Record<string, unknown>[];
  links?: ErrorLinks;
};

function problem(
  request: FastifyRequest,
  code: ErrorCode,
  detail: string,
  errors?: readonly Record<string, unknown>[],
  links?: ErrorLinks,
): Problem {
  markRefusal(request, code);
  return {
    type: `https://content-service.dev/problems/${code.replaceAll('_', '-')}`,
    title: titles[code],
    status: statusOf[code],
    detail,
    instance: request.url.split('?')[0] ?? request.url,
    code,
    request_id: String(request.id),
    ...(errors && errors.length > 0 ? { errors } : {}),
    ...(links ? { links } : {}),
  };
}

/**
 * Error details as every face answers them: a refused field of the input is named as a body parameter
 * (`{ in: 'body', name, message }`); protected-block changes and parameters refused by a face are as
 * they are.
 */
export function wireErrors(errors: readonly ErrorDetail[]): Record<string, unknown>[] {
  return errors.map((e) => ('field' in e ? { in: 'body', name: e.field, message: e.message } : e));
}

function sendProblem(reply: FastifyReply, p: Problem): FastifyReply {
  return reply.status(p.status).type('application/problem+json').send(p);
}

/**
 * Refusals made before any route ran (no such route, a path the router cannot decode) for the
 * requests a face owns (by their address, and what they accept), answered its own way: the web pages
 * answer them with a page.
 */
export type EarlyRefusals = {
  owns(request: FastifyRequest): boolean;
  send(reply: FastifyReply, refusal: { status: number; detail: string }): FastifyReply;
};

/**
 * How a face answers the errors of its routes in its own way (the web pages: a page): its answer sent,
 * or null for the error to leave as problem+json like every other. Given to a scope of routes with
 * `answerErrorsWith`.
 */
export type FaceErrors = (
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
) => Promise<FastifyReply | null>;

const FACE_ERRORS = Symbol('face errors');
type Answering = FastifyInstance & { [FACE_ERRORS]?: FaceErrors };

/**
 * The routes of `app`'s scope, and of the scopes registered inside it, answer their errors with
 * `answer` first. A scope inside another's tries its own answer, then the outer one's (the editor's
 * too-large body, then every page's refusals). Fastify makes a plugin's instance from its parent's
 * (Object.create), so a scope sees the answer of its own scope or else of the nearest one around it,
 * as it sees its decorators.
 */
export function answerErrorsWith(app: FastifyInstance, answer: FaceErrors): void {
  const scope = app as Answering;
  const outer = scope[FACE_ERRORS];
  scope[FACE_ERRORS] = outer
    ? async (error, request, reply) => (await answer(error, request, reply)) ?? outer(error, request, reply)
    : answer;
}

/**
 * The app's one error handler. The scope of the route that failed (`request.server`) may answer first
 * in its face's way (`answerErrorsWith`); an error it leaves, or one its answer fails with, leaves as
 * RFC 9457 problem+json with a stable code. Domain errors carry their code; schema validation becomes
 * `invalid_request` naming each parameter; a database that cannot be reached for now is a 503
 * `unavailable` with `Retry-After`; anything unknown is logged and answered with a generic 500 that
 * leaks nothing but the request id. A request no route took is answered 404, on `early`'s addresses
 * its own way.
 */
export function installErrorHandling(app: FastifyInstance, early?: EarlyRefusals): void {
  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const face = (request.server as Answering)[FACE_ERRORS];
    if (face === undefined) return sendProblemOf(error, request, reply);
    let left: FastifyError;
    try {
      const sent = await face(error, request, reply);
      if (sent !== null) return sent;
      left = error;
    } catch (failure) {
      left = failure as FastifyError;
    }
    return sendProblemOf(left, request, reply);
  });
  app.setNotFoundHandler((request, reply) => {
    if (early?.owns(request))
      return early.send(reply, { status: 404, detail: 'There is no page at this address' });
    return sendProblem(reply, noRouteProblem(request));
  });
}

/**
 * The 404 of a request no route takes, as problem+json: the app's not-found handler's, and that of a
 * path under /oauth that none of the authorization server's endpoints takes (oauth/mount.ts).
 */
export function noRouteProblem(request: FastifyRequest): Problem {
  return problem(request, 'not_found', `No route ${request.method} ${request.url.split('?')[0]}`);
}

/** An error as problem+json (installErrorHandling). */
function sendProblemOf(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (isDomainError(error)) {
    // A refusal whose reason is kept from the caller (an image URL's host and address): logged here only.
    if (error.cause !== undefined) {
      request.log.info({ code: error.code, cause: String(error.cause) }, 'request refused');
    }
    const errors = error.errors && wireErrors(error.errors);
    return sendProblem(reply, problem(request, error.code, error.message, errors, error.links));
  }
  if (hasZodFastifySchemaValidationErrors(error)) {
    const where = error.validationContext ?? 'body';
    const place = where === 'querystring' ? 'query' : where;
    const errors = error.validation.flatMap((v) => {
      const name = v.instancePath.replace(/^\//, '').replaceAll('/', '.');
      if (v.keyword === 'unrecognized_keys') {
        const keys = (v.params as { keys?: string[] }).keys ?? [];
        return keys.map((key) => ({
          in: place,
          name: name ? `${name}.${key}` : key,
          message: 'is not a known parameter',
        }));
      }
      return [{ in: place, name: name || place, message: v.message ?? 'invalid' }];
    });
    return sendProblem(
      reply,
      problem(request, 'invalid_request', 'The request has invalid parameters', errors),
    );
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    // Fastify's own client errors (malformed JSON, body too large, unsupported content type) keep
    // their status; the code says the request itself was at fault.
    return sendProblem(reply, { ...problem(request, 'invalid_request', error.message), status });
  }
  if (isDatabaseUnavailable(error)) {
    // Not the request's fault nor a bug: the database is away for a moment (a restart, a failover).
    // The driver's words (hosts, SQL states) stay in the log; the client is told when to retry.
    request.log.warn({ err: error }, 'the database is unavailable; answered 503');
    reply.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_S));
    return sendProblem(reply, problem(request, 'unavailable', UNAVAILABLE_DETAIL));
  }
  request.log.error({ err: error }, 'unhandled error');
  return sendProblem(
    reply,
    problem(
      request,
      'internal',
      'Something went wrong on our side. Quote the request id if you contact support.',
    ),
  );
}

/**
 * Fastify's `frameworkErrors`: what its router refuses before any route or hook runs (a path that is
 * not valid percent-encoding, a path segment over `maxParamLength`) is answered like every other
 * error, problem+json with `X-Request-Id`; on `early`'s addresses, its own way.
 */
export function frameworkErrorsOf(
  early?: EarlyRefusals,
): (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void {
  return (error, request, reply) => {
    const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH';
    const status = tooLong ? 414 : 400;
    const detail = tooLong
      ? 'A segment of the URL path is too long'
      : 'The URL path is not valid percent-encoding';
    reply.header('x-request-id', request.id);
    if (early?.owns(request)) {
      early.send(reply, { status, detail });
      return;
    }
    sendProblem(reply, { ...problem(request, 'invalid_request', detail), instance: '/', status });
  };
}

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses (headers or URL over the size limit,
 * malformed requests, a request that has not arrived in full within REQUEST_BODY_TIMEOUT_SECONDS: 408,
 * request-timeout.ts) gets problem+json with an `X-Request-Id` too, written straight to the socket
 * since there is no request to answer through, and the connection is closed.
 */
export function clientErrorHandler(
  this: Pick<FastifyInstance, 'log'> | undefined,
  error: Error & { code?: string },
  socket: Socket,
): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const status =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const requestId = newRequestId();
  // No access-log line is written for a request that never arrived: this one says it was refused.
  if (status === 408) {
    this?.log.info(
      { reqId: requestId, client: socket.remoteAddress, status },
      'the request did not arrive in full in time; answered 408 and closed the connection',
    );
  }
  const detail =
    status === 431
      ? 'The request line or headers are too large (the URL may be too long)'
      : status === 408
        ? 'The request took too long to arrive'
        : 'The request is not valid HTTP';
  const body = JSON.stringify({
    type: 'https://content-service.dev/problems/invalid-request',
    title: STATUS_CODES[status] ?? 'Bad Request',
    status,
    detail,
    instance: '/',
    code: 'invalid_request',
    request_id: requestId,
  } satisfies Problem);
  // As Node's own handler: nothing is written into an answer already under way (a request still
  // arriving after its answer began); the connection is closed all the same.
  const answering = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && !answering?.headersSent) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/problem+json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
