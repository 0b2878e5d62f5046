import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type DomainError, type ErrorCode, isDomainError } from '../../../domain/errors.ts';
import { isDatabaseUnavailable } from '../../../infra/db/unavailable.ts';
import { statusOf, UNAVAILABLE_RETRY_AFTER_S } from '../errors.ts';
import { html } from './html.ts';
import { PAGE_HEADERS, safeReturnTo, type WebKit } from './kit.ts';
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

/**
 * The page of a request that found the database away for now (a restart, a failover): 503 with
 * `Retry-After`, as the API answers it, in words and without the driver's (they go to the log). No
 * navigation: showing the person's name needs the database. A GET gets a link to load the page again;
 * a form was applied in full or not at all (each change is one command, one transaction: cut off in
 * its commit, it may have been made), which only the page it came from, reloaded, tells.
 */
export function sendUnavailable(
  kit: WebKit,
  request: FastifyRequest,
  reply: FastifyReply,
  error: unknown,
): FastifyReply {
  request.log.warn({ err: error }, 'the database is unavailable; answered the 503 page');
  const again = request.method === 'GET' ? safeReturnTo(request.url) : null;
  // The pages' headers here too: not every plugin of pages installs them (`/` only redirects).
  reply
    .headers(PAGE_HEADERS)
    .header('cache-control', 'no-store')
    .header('retry-after', String(UNAVAILABLE_RETRY_AFTER_S));
  return kit.send(reply, {
    status: statusOf.unavailable,
    title: 'Briefly unavailable',
    session: null,
    request,
    body: html`<div class="card" id="unavailable"><h1>The service is briefly unavailable</h1>
<p role="alert">Nothing is wrong with what you did. Try again in a few seconds.</p>
${
  again
    ? html`<p><a href="${again}">Load the page again</a></p>`
    : html`<p>If you were sending a form, the change was either made in full or not at all: in a few seconds, go back and reload the page to see which before you send it again.</p>`
}</div>`,
  });
}

/**
 * The error handler of a plugin of pages: the database being away for now is the 503 page
 * (`sendUnavailable`); anything else goes on to the app's handler. Plugins registered inside this one
 * inherit it (an own handler of theirs passes what it does not handle on to it).
 */
export function installPageErrors(app: FastifyInstance, kit: WebKit): void {
  app.setErrorHandler(async (error, request, reply) => {
    if (!isDatabaseUnavailable(error)) throw error;
    return sendUnavailable(kit, request, reply, error);
  });
}
