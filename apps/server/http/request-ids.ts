import type { FastifyRequest } from 'fastify';
import { CLIENT_REQUEST_ID_MAX } from '../../../domain/activity/events.ts';
import { newId } from '../../../infra/ids.ts';
import type { RequestIds } from '../../application/call.ts';

/** What a client's own `X-Request-Id` may be to be kept: 1 to 128 of `A-Z a-z 0-9 . _ : -`. */
const CLIENT_REQUEST_ID = new RegExp(`^[A-Za-z0-9._:-]{1,${CLIENT_REQUEST_ID_MAX}}$`);

/**
 * Every request's id, on every face: made by the service (`req_...`), never taken from the request.
 * Fastify's `genReqId`; `X-Request-Id` answers it.
 */
export function newRequestId(): string {
  return newId('req');
}

/**
 * The client's own `X-Request-Id`, when it is a valid one, else null: kept beside the service's
 * request id on the call's activity record (`client_request_id`), never used as the request's id.
 */
export function clientRequestIdOf(request: FastifyRequest): string | null {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : null;
}

/** The request's ids, for a use case that records the call itself. */
export function requestIdsOf(request: FastifyRequest): RequestIds {
  return { requestId: String(request.id), clientRequestId: clientRequestIdOf(request) };
}
