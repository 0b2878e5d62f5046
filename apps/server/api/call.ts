import type { FastifyReply, FastifyRequest } from 'fastify';
import type { JsonTexts } from '../../../infra/json-texts.ts';
import type { ArticleWrite } from '../../application/article-write.ts';
import { changeJson } from '../../application/articles.ts';
import type { Call, Outcome } from '../../application/call.ts';
import { type JsonOf, revisionOfEtag } from '../../application/contract.ts';
import type { Answer } from '../../application/idempotency.ts';
import { settled } from '../http/outcome.ts';
import { liveKeyOf, principalOf } from './auth.ts';

/** The application call of an API request: its key's principal with origin `api`. */
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
  };
}

/** The ETag of an article at a revision. */
export function weakEtag(revision: number): string {
  return `W/"${revision}"`;
}

/** The revision whose ETag `value` is exactly (`W/"3"` → 3), if any: what an If-None-Match names. */
export function heldRevision(value: string | undefined): number | undefined {
  return (value === undefined ? null : revisionOfEtag(value, { weak: 'only' })) ?? undefined;
}

/** Answers with JSON text already written (a wire object as `JSON.stringify` writes it), as it is. */
export function sendJson(reply: FastifyReply, json: JsonOf<unknown>): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json);
}

/** 304 Not Modified: no body, so neither a Content-Type nor a Content-Length (RFC 9110 15.4.5, 8.6). */
export function sendNotModified(reply: FastifyReply): FastifyReply {
  return reply.status(304).send();
}

/**
 * Answers an article write: 200 with the change, its revision as the ETag, and `Idempotent-Replayed`
 * on a replay (see `settled` for the rest).
 */
export function sendWrite(
  request: FastifyRequest,
  reply: FastifyReply,
  outcome: Outcome<ArticleWrite>,
  jsonTexts: JsonTexts,
): FastifyReply {
  const result = settled(request, reply, outcome);
  noteReplay(reply, result.replayed);
  reply.status(200).header('etag', weakEtag(result.change.revision));
  return sendJson(reply, changeJson(result.change, jsonTexts.of));
}

/** `Idempotent-Replayed: true` on the answer of a write that replays its first answer (an Idempotency-Key retry). */
export function noteReplay(reply: FastifyReply, replayed: boolean): void {
  if (replayed) reply.header('idempotent-replayed', 'true');
}

/** A write's outcome settled (see `settled`), its value answered with `Idempotent-Replayed` on a replay. */
export function settledAnswer<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  outcome: Outcome<Answer<T>>,
): T {
  const { value, replayed } = settled(request, reply, outcome);
  noteReplay(reply, replayed);
  return value;
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
