import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { type DomainError, type ErrorCode, isDomainError } from '../../../domain/errors.ts';
import { isDatabaseUnavailable } from '../../../infra/db/unavailable.ts';
import { answerErrorsWith, type EarlyRefusals, statusOf, UNAVAILABLE_RETRY_AFTER_S } from '../http/errors.ts';
import { type Html, html } from '../http/html.ts';
import { markRefusal } from '../http/metrics.ts';
import { FORM_BODY_MAX, isFormRefused } from './form-body.ts';
import { page } from './html.ts';
import { PAGE_HEADERS, safeReturnTo, type WebKit } from './kit.ts';
import type { StaffSession, WebSession } from './sessions.ts';

const TITLES: Partial<Record<ErrorCode, string>> = {
  not_found: 'Not found',
  invalid_request: 'That did not work',
  conflict: 'Changed at the same time',
  revision_mismatch: 'Changed since you opened it',
  protected_links_modified: 'Protected links must stay',
  diff_too_large: 'Too different to compare',
  edit_limit_reached: "Today's edits are used up",
  rate_limited: 'Too many requests',
  insufficient_scope: 'Not allowed',
};

/** Where a refusal page leads back to: the person's sites, or for support staff the support area. */
function wayBack(staff: boolean): Html {
  return staff
    ? html`<p><a href="/staff">Back to support</a></p>`
    : html`<p><a href="/sites">Back to your sites</a></p>`;
}

/**
 * A refusal of the application as a page: the status the API would answer, a heading and the
 * application's own message, in the account holder's layout or, given `staff`, the support staff's.
 * Anything that is not a `DomainError` is rethrown (the 500 handler).
 */
export function sendRefusal(
  kit: WebKit,
  request: FastifyRequest,
  reply: FastifyReply,
  session: WebSession | null,
  error: unknown,
  staff?: StaffSession,
): FastifyReply {
  if (!isDomainError(error)) throw error;
  const refusal: DomainError = error;
  markRefusal(request, refusal.code);
  const title = TITLES[refusal.code] ?? 'That did not work';
  return kit.send(reply, {
    status: statusOf[refusal.code],
    title,
    session,
    ...(staff ? { staff } : {}),
    request,
    body: html`<div class="card"><h1>${title}</h1><p role="alert">${refusal.message}</p>
${wayBack(staff !== undefined)}</div>`,
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
  markRefusal(request, 'unavailable');
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

/** The first segments of the pages' addresses (and `/oauth/interaction/`, the consent page's). */
const PAGE_SECTIONS = new Set([
  'sites',
  'articles',
  'activity',
  'connect',
  'account',
  'staff',
  'sign-in',
  'sign-out',
]);

/**
 * Addresses of the faces for programs (the API, MCP, the authorization server's endpoints and
 * metadata): what no route takes there is problem+json, whoever asks.
 */
function forPrograms(path: string): boolean {
  return (
    /^\/(api|mcp)(\/|$)/.test(path) ||
    path.startsWith('/.well-known/') ||
    (path.startsWith('/oauth/') && !path.startsWith('/oauth/interaction/'))
  );
}

/** The quality (`q`) the Accept header gives the first of `types` it names, or 0. */
function quality(accept: string, types: readonly string[]): number {
  let best = 0;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    if (!types.includes(type)) continue;
    const q = params.find((p) => p.startsWith('q='));
    const value = q === undefined ? 1 : Number(q.slice(2));
    if (Number.isFinite(value)) best = Math.max(best, value);
  }
  return best;
}

/**
 * Whether the request is a browser's, asking for a page: its Accept names HTML, and prefers it to JSON
 * (a browser's `text/html,application/xhtml+xml,…`; not a client's `application/json`, nor curl's and
 * fetch's "anything").
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (!accept) return false;
  const htmlQ = quality(accept, ['text/html', 'application/xhtml+xml']);
  return htmlQ > 0 && htmlQ >= quality(accept, ['application/json', 'application/problem+json']);
}

/** Addresses people type to sign out (`/logout`, `/sign-out`, …): a link cannot sign anyone out. */
const SIGN_OUT_WORDS = /^\/(log-?out|sign-?out)\/?$/i;

/**
 * The pages' answers to refusals made before any route ran (errors.ts EarlyRefusals): a path under a
 * page's section that is no page (404), that is not valid percent-encoding (400) or has a segment too
 * long (414) is a page in the layout, without navigation (no route ran, so no session was looked at).
 * So is any other address a browser asks for as a page (`/dashboard`, a typo), but those of the faces
 * for programs (`/api/v1`, `/mcp`, OAuth): it gets the 404 page with a way on, where a program gets
 * problem+json.
 */
export const PAGE_REFUSALS: EarlyRefusals = {
  owns(request) {
    const path = request.url.split('?')[0] ?? request.url;
    if (PAGE_SECTIONS.has(path.split('/')[1] ?? '') || path.startsWith('/oauth/interaction/')) return true;
    return !forPrograms(path) && prefersHtml(request.headers.accept);
  },
  send(reply, { status, detail }) {
    const title = status === 404 ? 'Not found' : 'That address does not work';
    const path = reply.request.url.split('?')[0] ?? '';
    // No session was looked at: the support area's addresses lead back to it, the others to the sites.
    const staff = path.startsWith('/staff');
    markRefusal(reply.request, status === 404 ? 'not_found' : 'invalid_request');
    const said =
      status === 404 && SIGN_OUT_WORDS.test(path)
        ? html`<p role="alert">There is no page at this address. To sign out, use <strong>Sign out</strong> at the top of any page of the service.</p>`
        : html`<p role="alert">${detail}. Check the link, or start again from ${staff ? 'the support search' : 'your sites'}.</p>`;
    return reply
      .status(status)
      .headers(PAGE_HEADERS)
      .header('cache-control', 'no-store')
      .type('text/html; charset=utf-8')
      .send(
        page({
          title,
          body: html`<div class="card" id="not-a-page"><h1>${title}</h1>${said}
${wayBack(staff)}${staff ? '' : html`<p class="muted">Not signed in? <a href="/sign-in">Sign in</a>.</p>`}</div>`,
        }),
      );
  },
};

/** What a page says of a request refused before its handler ran, or null for any other error. */
function requestRefusal(error: unknown): { status: number; title: string; message: string } | null {
  if (isFormRefused(error))
    return { status: 400, title: 'The form could not be read', message: error.message };
  if (hasZodFastifySchemaValidationErrors(error)) {
    return error.validationContext === 'body'
      ? {
          status: 400,
          title: 'The form could not be used',
          message:
            'A field of the form holds a value this page does not take (too long, or not what the field asks for). Go back and check it.',
        }
      : {
          status: 400,
          title: 'The address could not be used',
          message:
            'The address holds a value this page does not take (an id, a number or a filter that is not valid). Check the link.',
        };
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return {
      status: 413,
      title: 'The form is too large',
      message: `The form sent more than ${FORM_BODY_MAX / 1024} KiB. Nothing was saved.`,
    };
  }
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || code === 'FST_ERR_CTP_EMPTY_TYPE') {
    return {
      status: 415,
      title: 'The form could not be read',
      message: 'Forms of this site are sent by a browser, as application/x-www-form-urlencoded.',
    };
  }
  return null;
}

/**
 * A request refused before its handler ran (requestRefusal) as a page in the layout: the person's
 * navigation when signed in (an account holder's or a staff member's), the reason in words.
 */
async function sendRequestRefusal(
  kit: WebKit,
  request: FastifyRequest,
  reply: FastifyReply,
  refusal: { status: number; title: string; message: string },
): Promise<FastifyReply> {
  markRefusal(request, 'invalid_request');
  // Without the database the page has no navigation, as the 503 page.
  const session = await kit.sessions.current(request).catch(() => null);
  const staff = session ? null : await kit.sessions.currentStaff(request).catch(() => null);
  // The pages' headers here too: the refusal may come before the plugin's own hooks ran.
  reply.headers(PAGE_HEADERS).header('cache-control', 'no-store');
  return kit.send(reply, {
    status: refusal.status,
    title: refusal.title,
    session,
    ...(staff ? { staff } : {}),
    request,
    body: html`<div class="card"><h1>${refusal.title}</h1><p role="alert">${refusal.message}</p>
${wayBack(staff !== null)}</div>`,
  });
}

/**
 * How the routes of a plugin of pages answer errors (http/errors.ts answerErrorsWith): the database
 * being away for now is the 503 page (`sendUnavailable`); a form or an address refused before the
 * handler ran (too many fields, too large, a parameter the route's schema refuses) is a 400, 404, 413
 * or 415 page; anything else leaves as the app's problem+json. Plugins registered inside this one
 * answer so too (an answer of their own is tried first).
 */
export function installPageErrors(app: FastifyInstance, kit: WebKit): void {
  answerErrorsWith(app, async (error, request, reply) => {
    if (isDatabaseUnavailable(error)) return sendUnavailable(kit, request, reply, error);
    const refusal = requestRefusal(error);
    return refusal ? sendRequestRefusal(kit, request, reply, refusal) : null;
  });
}
