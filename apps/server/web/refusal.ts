import type { FastifyReply, FastifyRequest } from 'fastify';
import { type DomainError, type ErrorCode, isDomainError } from '../../../domain/errors.ts';
import { statusOf } from '../errors.ts';
import { html } from './html.ts';
import type { WebKit } from './kit.ts';
import type { WebSession } from './sessions.ts';

const TITLES: Partial<Record<ErrorCode, string>> = {
  not_found: 'Not found',
  invalid_request: 'That did not work',
  conflict: 'Changed at the same time',
  revision_mismatch: 'Changed since you opened it',
  protected_links_modified: 'Protected links must stay',
  edit_limit_reached: "Today's edits are used up",
  rate_limited: 'Too many requests',
  insufficient_scope: 'Not allowed',
};

/**
 * A refusal of the application as a page: the status the API would answer, a heading and the
 * application's own message. Anything that is not a `DomainError` is rethrown (the 500 handler).
 */
export function sendRefusal(
  kit: WebKit,
  request: FastifyRequest,
  reply: FastifyReply,
  session: WebSession | null,
  error: unknown,
): FastifyReply {
  if (!isDomainError(error)) throw error;
  const refusal: DomainError = error;
  const title = TITLES[refusal.code] ?? 'That did not work';
  return kit.send(reply, {
    status: statusOf[refusal.code],
    title,
    session,
    request,
    body: html`<div class="card"><h1>${title}</h1><p role="alert">${refusal.message}</p>
<p><a href="/sites">Back to your sites</a></p></div>`,
  });
}
