import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../../../infra/db/schema.ts';
import type { Credentials } from '../../application/credentials.ts';
import type { Acting } from '../http/activity-log.ts';
import { type Html, html, raw } from '../http/html.ts';
import type { PageOptions } from '../http/page-kit.ts';
import { CSRF_FIELD, type Csrf, createCsrf } from './csrf.ts';
import { createDevices, type Devices } from './device.ts';
import { countingFields, FORM_BODY_MAX, parseForm } from './form-body.ts';
import { page } from './html.ts';
import { createWebSessions, type StaffSession, type WebSession, type WebSessions } from './sessions.ts';
import { createShownOnce, type ShownOnceStore } from './shown-once.ts';
import { createSignInThrottle, type SignInThrottle } from './throttle.ts';

/*
 * What every server-rendered page shares (the web face's pages, and through PageKit the authorization
 * server's consent pages): the session store, CSRF tokens, the layout, the form parser and the security
 * headers.
 */

/**
 * Who may send a form: checked from the request's headers and session before its body is read
 * (installFormParser). Every POST route of a scope with the form parser names it (`config.form`).
 */
export type FormSender =
  /**
   * A signed-in account holder. Without a session, to sign-in, coming back to `back` (the page the form
   * is on; by default the form's own address).
   */
  | { from: 'account'; back?: (request: FastifyRequest) => string }
  /** Anyone signed in, account holder or support staff (sign-out). Without a session, to sign-in. */
  | { from: 'session' }
  /** Anyone (the sign-in form): the browser's word on where it comes from only. */
  | { from: 'anyone' };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may send this form (web/kit.ts). */
    form?: FormSender;
  }
}

export type WebDeps = {
  db: Db;
  credentials: Credentials;
  publicUrl: string;
  /** The persisted web secret (kept with the authorization server's keys): CSRF tokens are HMACs under it. */
  secret: Buffer;
  now?: () => Date;
};

export type WebKit = {
  db: Db;
  /** Who an email and a password sign in. */
  credentials: Credentials;
  publicUrl: string;
  /** Cookies get `Secure` when PUBLIC_URL is https. */
  secure: boolean;
  sessions: WebSessions;
  csrf: Csrf;
  throttle: SignInThrottle;
  /** The device cookie of browsers that signed in before (device.ts). */
  devices: Devices;
  /** A secret waiting with the session for the page after its form's 303 (shown-once.ts). */
  shownOnce: ShownOnceStore;
  now: () => Date;
  /** `/sign-in?return_to=...` for a local path. */
  signInUrl(returnTo: string): string;
  /** The hidden CSRF field for a form on this page. */
  csrfField(request: FastifyRequest, reply: FastifyReply, session: Pick<WebSession, 'secret'> | null): Html;
  /**
   * Sends a page: the layout and, when signed in, the navigation (sites, activity, Connect Site), the
   * person's name, the password page and a sign-out button. `wide` for pages of tables and articles.
   */
  send(
    reply: FastifyReply,
    opts: PageOptions & {
      wide?: boolean;
      /** A support staff member's page: the staff header instead of the account's navigation. */
      staff?: StaffSession;
    },
  ): FastifyReply;
  /**
   * The request's live session, or null after redirecting to sign-in, which comes back to `returnTo`
   * (default: this page; a form's POST names the page the form is on).
   */
  signedIn(request: FastifyRequest, reply: FastifyReply, returnTo?: string): Promise<WebSession | null>;
  /**
   * The answer to a request without an account holder's session: a signed-in support staff member gets
   * the 403 page that says whose page it is; anyone else is sent to sign-in, coming back to `returnTo`.
   */
  notHolder(request: FastifyRequest, reply: FastifyReply, returnTo: string): Promise<FastifyReply>;
  /** Whom a request acts for, once `signedIn` has found its account holder's session (the activity log's question). */
  actingOf(request: FastifyRequest): Acting | null;
  /**
   * True when the POST passes the CSRF checks; otherwise sends a 403 page and returns false. The token
   * is the parsed form's `csrf` field unless given (a multipart form's, read by its route).
   */
  checkForm(
    request: FastifyRequest,
    reply: FastifyReply,
    session: Pick<WebSession, 'secret'> | null,
    token?: unknown,
  ): boolean;
  /**
   * Whether `sender` may send this form, from its headers and session alone: true, or false after
   * answering (to sign-in without a session, 403 from another site).
   */
  admitForm(request: FastifyRequest, reply: FastifyReply, sender: FormSender): Promise<boolean>;
};

/**
 * A local path to come back to after signing in, or null for anything else (no open redirects).
 * Characters outside printable ASCII (a `return_to` of `/connect?x=日本`) are percent-encoded as UTF-8:
 * the result is safe in a `Location` header. Control characters, backslashes and lone surrogates are
 * refused.
 */
export function safeReturnTo(value: unknown): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > 2048) return null;
  if (!value.startsWith('/') || value.startsWith('//') || value.startsWith('/\\')) return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f-\u009f\\]/.test(value) || !value.isWellFormed()) return null;
  const encoded = value.replace(/[^\u0021-\u007e]/gu, (c) => encodeURIComponent(c));
  return encoded.length > 2048 ? null : encoded;
}

/**
 * The support staff's page for an account holder's address, or null: an article (`/articles/{id}`, its
 * editor, history or a revision) has its staff timeline and revision pages; the rest has none.
 */
export function staffViewOf(url: string): string | null {
  const path = url.split('?')[0] ?? url;
  const match = /^\/articles\/([^/]+)(?:\/revisions\/(\d+)(?:\/restore)?|\/edit)?\/?$/.exec(path);
  if (!match) return null;
  const [, id, revision] = match;
  return revision ? `/staff/articles/${id}/revisions/${revision}` : `/staff/articles/${id}`;
}

/** The sections every signed-in page links to; the one the path is in is marked as current. */
const SECTIONS = [
  { href: '/sites', label: 'Sites' },
  { href: '/activity', label: 'Activity' },
  { href: '/connect', label: 'Connect Site' },
] as const;

function navigation(url: string, account: Html): Html {
  const path = url.split('?')[0] ?? url;
  const links = SECTIONS.map(({ href, label }) => {
    const current =
      path === href || path.startsWith(`${href}/`) || (href === '/sites' && path.startsWith('/articles/'));
    return html`<a href="${href}"${current ? raw(' aria-current="page"') : ''}>${label}</a>`;
  });
  return html`<nav class="site" aria-label="Main">${links}</nav>${searchBox(url)}${account}`;
}

/**
 * The search box of every signed-in account page: a GET form to `/search` (web/search.ts), its
 * words kept on the search page itself.
 */
function searchBox(url: string): Html {
  const [path, query] = url.split('?');
  const words = path === '/search' ? (new URLSearchParams(query ?? '').get('q') ?? '') : '';
  return html`<form class="search-box" role="search" method="get" action="/search" aria-label="Articles">
<label for="header-search">Search articles</label>
<input type="search" id="header-search" name="q" value="${words}" enterkeyhint="search" autocomplete="off" placeholder="Words in a title or text">
<button type="submit">Search</button></form>`;
}

export function createWebKit(deps: WebDeps): WebKit {
  const secure = new URL(deps.publicUrl).protocol === 'https:';
  const now = deps.now ?? (() => new Date());
  const sessions = createWebSessions({ db: deps.db, secure, now });
  const acting = new WeakMap<FastifyRequest, Acting>();
  const csrf = createCsrf({ secret: deps.secret, publicUrl: deps.publicUrl, secure });
  const kit: WebKit = {
    db: deps.db,
    credentials: deps.credentials,
    publicUrl: deps.publicUrl,
    secure,
    sessions,
    csrf,
    throttle: createSignInThrottle(deps.db, now),
    devices: createDevices({ secret: deps.secret, secure }),
    shownOnce: createShownOnce({ db: deps.db, secret: deps.secret, now }),
    now,
    signInUrl(returnTo) {
      const local = safeReturnTo(returnTo);
      return local ? `/sign-in?return_to=${encodeURIComponent(local)}` : '/sign-in';
    },
    csrfField(request, reply, session) {
      return html`<input type="hidden" name="${CSRF_FIELD}" value="${csrf.token(request, reply, session)}">`;
    },
    send(reply, opts) {
      const { session, request, staff } = opts;
      const header = staff
        ? html`<nav class="site" aria-label="Main"><a href="/staff">Support</a></nav><form method="post" action="/sign-out"><span class="muted">${staff.staff.name} (support)</span>
${kit.csrfField(request, reply, staff)} <button class="link" type="submit">Sign out</button></form>`
        : session
          ? navigation(
              request.url,
              html`<form method="post" action="/sign-out"><span class="muted">${session.account.name} (${session.account.email})</span>
<a href="/account/password">Change password</a>
${kit.csrfField(request, reply, session)} <button class="link" type="submit">Sign out</button></form>`,
            )
          : undefined;
      return reply
        .status(opts.status ?? 200)
        .type('text/html; charset=utf-8')
        .send(
          page({
            title: opts.title,
            body: opts.body,
            wide: opts.wide ?? false,
            ...(header ? { header } : {}),
          }),
        );
    },
    async signedIn(request, reply, returnTo = request.url) {
      const session = await sessions.current(request);
      if (!session) {
        await kit.notHolder(request, reply, returnTo);
      } else {
        const actor = { type: 'user' as const, id: session.account.id, name: session.account.name };
        acting.set(request, { accountId: session.accountId, actor, refused: false });
      }
      return session;
    },
    async notHolder(request, reply, returnTo) {
      const staff = await sessions.currentStaff(request);
      if (staff) holderPageForStaff(request, reply, staff);
      else reply.redirect(kit.signInUrl(returnTo), 303);
      return reply;
    },
    actingOf(request) {
      return acting.get(request) ?? null;
    },
    checkForm(request, reply, session, token) {
      const body = request.body as Record<string, unknown> | undefined;
      if (csrf.check(request, session, token ?? body?.[CSRF_FIELD])) return true;
      formExpired(request, reply, session);
      return false;
    },
    async admitForm(request, reply, sender) {
      let session: Pick<WebSession, 'secret'> | null = null;
      if (sender.from === 'account') {
        session = await kit.signedIn(request, reply, sender.back?.(request));
        if (!session) return false;
      } else if (sender.from === 'session') {
        session = (await sessions.current(request)) ?? (await sessions.currentStaff(request));
        if (!session) {
          reply.redirect('/sign-in', 303);
          return false;
        }
      }
      if (csrf.fromThisSite(request)) return true;
      formExpired(request, reply, session);
      return false;
    },
  };
  /**
   * A support staff member on an account holder's page (a link a customer sent): a 403 page in the
   * staff's layout that says whose page it is and offers the staff view of it, when there is one.
   */
  function holderPageForStaff(request: FastifyRequest, reply: FastifyReply, staff: StaffSession): void {
    const view = staffViewOf(request.url);
    kit.send(reply, {
      status: 403,
      title: "An account holder's page",
      session: null,
      staff,
      request,
      body: html`<div class="card" id="holder-page"><h1>This is an account holder's page</h1>
<p role="alert">You are signed in as support staff: this page shows an account to its holder only.</p>
${view ? html`<p><a href="${view}">Open the staff view of it</a></p>` : ''}
<p><a href="/staff">Back to support</a></p></div>`,
    });
  }
  /** The 403 page of a form that failed the CSRF checks. */
  function formExpired(
    request: FastifyRequest,
    reply: FastifyReply,
    session: Pick<WebSession, 'secret'> | null,
  ): void {
    kit.send(reply, {
      status: 403,
      title: 'Form expired',
      // The account's navigation when it is an account holder's form (a staff form's page has none).
      session: session && 'accountId' in session ? (session as WebSession) : null,
      request,
      body: html`<div class="card"><h1>This form has expired</h1>
<p>The form was not sent from this site's current page, or it is too old. Go back, reload the page and try again.</p></div>`,
    });
  }
  return kit;
}

/**
 * The forms of this plugin's scope, in this order:
 * 1. before the body is read (`onRequest`): the sender the route names (`config.form`, FormSender), so
 *    a request without a session, or from another site, is answered without reading its body;
 * 2. the body: `application/x-www-form-urlencoded` only (any other type is a 415), at most `bodyLimit`
 *    bytes (FORM_BODY_MAX by default; 413), its fields counted as it arrives (`preParsing`,
 *    countingFields: past FORM_FIELDS_MAX the rest is dropped, not gathered), parsed by parseForm
 *    (linear, at most FORM_FIELDS_MAX fields, none twice; 400). The pages of these refusals are
 *    refusal.ts's installPageErrors;
 * 3. the handler: the CSRF token (`kit.checkForm`), then the form's own work.
 * A route of the scope with a method other than GET that names no sender is refused at startup.
 */
export function installFormParser(
  app: FastifyInstance,
  kit: WebKit,
  opts: { bodyLimit?: number } = {},
): void {
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (methods.some((m) => m !== 'GET' && m !== 'HEAD') && !route.config?.form) {
      throw new Error(`${methods.join(',')} ${route.url}: a form route names who may send it (config.form)`);
    }
  });
  app.addHook('onRequest', async (request, reply) => {
    const sender = request.routeOptions.config.form;
    if (!sender || request.method === 'GET' || request.method === 'HEAD') return;
    if (await kit.admitForm(request, reply, sender)) return;
    return reply;
  });
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (!/^application\/x-www-form-urlencoded\b/i.test(request.headers['content-type'] ?? '')) return payload;
    return payload.pipe(countingFields());
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: opts.bodyLimit ?? FORM_BODY_MAX },
    (_request, body, done) => {
      try {
        done(null, parseForm(String(body)));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );
}

/**
 * Headers of every page: never cached, never framed, no scripts. The referrer goes to this site only:
 * interaction URLs never reach an assistant's redirect target, and form POSTs keep their `Origin`
 * (a `no-referrer` policy would make browsers send `Origin: null`, which the CSRF check refuses).
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

/**
 * The policy of the pages that show an article's featured image and body (articles.ts,
 * featured-image.ts): PAGE_HEADERS' policy with images from any https address too, where the
 * articles' images live. Never `http:` (a page over https would mix in what anyone on the way can
 * change) nor `data:`; nothing else is widened. The pages' `Referrer-Policy: same-origin` sends no
 * address to those hosts.
 */
export const ARTICLE_PAGE_CSP =
  "default-src 'none'; style-src 'self'; img-src 'self' https:; frame-ancestors 'none'; base-uri 'none'";

/**
 * The policy of a page that runs the service's own scripts (the rich editor): PAGE_HEADERS' policy
 * with scripts from this origin only (no inline script, no eval). Images stay `'self'`: the rich
 * editor has no image node, so a body with images is edited in the HTML textarea, which shows none.
 */
export const SCRIPT_PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/**
 * The web app's pages also cut the tie to a page they open on another origin: that page gets no
 * `window.opener`, whatever the link asked for (an article body stored before the sanitiser gave
 * links with a `target` `rel="noopener noreferrer"` may hold `target="_blank" rel="opener"`). Not on
 * the pages of an assistant's OAuth sign-in (the sign-in page and the consent pages), which it may
 * open in a popup that must find its way back to it.
 */
export const OPENER_POLICY: Readonly<Record<string, string>> = {
  'cross-origin-opener-policy': 'same-origin',
};

/**
 * PAGE_HEADERS (and OPENER_POLICY unless `keepOpener`), and `no-store` unless the route set its own
 * caching, on every response of this scope; `policy` is the scope's Content-Security-Policy instead
 * of PAGE_HEADERS' (ARTICLE_PAGE_CSP). A route that set its own Content-Security-Policy
 * (SCRIPT_PAGE_CSP) keeps it.
 */
export function installPageHeaders(
  app: FastifyInstance,
  opts: { keepOpener?: boolean; policy?: string } = {},
): void {
  const headers = {
    ...PAGE_HEADERS,
    ...(opts.keepOpener ? {} : OPENER_POLICY),
    ...(opts.policy ? { 'content-security-policy': opts.policy } : {}),
  };
  app.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    const policy = reply.getHeader('content-security-policy');
    reply.headers(headers);
    if (policy !== undefined) reply.header('content-security-policy', policy);
    return payload;
  });
}
