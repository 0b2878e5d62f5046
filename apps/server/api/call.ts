import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ArticleWrite } from '../../application/article-write.ts';
import type { Call } from '../../application/call.ts';
import { publishDecision } from '../http/limits.ts';
import { liveKeyOf, principalOf } from './auth.ts';

/**
 * The application call of an API request: its key's principal with origin `api`, and the request's
 * activity record as what the call touched (the use case fills it in, the activity log stores it).
 */
export function apiCall(request: FastifyRequest): Call {
  const { accountId, actor, scope } = principalOf(request);
  return {
    principal: {
      accountId,
      actor,
      scope,
      origin: 'api',
      requestId: String(request.id),
      liveKey: liveKeyOf(request),
    },
    touched: request.activity,
  };
}

/** The ETag of an article at a revision. */
export function weakEtag(revision: number): string {
  return `W/"${revision}"`;
}

/**
 * Runs an article write and answers it: 200 with the change, its revision as the ETag, and
 * `Idempotent-Replayed` on a replay; the edit-limit decision in the RateLimit fields, refused or not.
 */
export async function sendWrite(
  request: FastifyRequest,
  reply: FastifyReply,
  call: Call,
  write: () => Promise<ArticleWrite>,
): Promise<FastifyReply> {
  let result: ArticleWrite;
  try {
    result = await write();
  } finally {
    if (call.edits) publishDecision(request, reply, call.edits);
  }
  if (result.replayed) reply.header('idempotent-replayed', 'true');
  return reply.status(200).header('etag', weakEtag(result.change.revision)).send(result.change);
}

/** The idempotency of a write request: its Idempotency-Key, and the request it names (method, URL, If-Match, body). */
export function idempotencyOf(
  request: FastifyRequest,
  payload?: unknown,
): { key: string; request: unknown[] } | undefined {
  const key = request.headers['idempotency-key'];
  if (typeof key !== 'string') return undefined;
  const parts: unknown[] = [request.method, request.url, request.headers['if-match'] ?? null];
  if (payload !== undefined) parts.push(payload);
  return { key, request: parts };
}
