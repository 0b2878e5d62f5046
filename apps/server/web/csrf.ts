import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { readCookie, setCookie } from './cookies.ts';
import type { WebSession } from './sessions.ts';

/*
 * CSRF protection of every form POST, two layers:
 *
 * 1. A token in a hidden field (`csrf`), checked on every POST. It is an HMAC (key: the persisted web
 *    secret) of the signed-in session's cookie value, so it is per session and needs no storage. Before
 *    sign-in (the sign-in form itself: login CSRF), it is the HMAC of `cs_csrf`, a random HttpOnly cookie
 *    set when the form is shown.
 * 2. Where the browser says where the request comes from, it must be this site: `Sec-Fetch-Site` must be
 *    `same-origin` (or `none`, typed by the person), and `Origin`, when sent, must be PUBLIC_URL's origin.
 */

const CSRF_COOKIE = 'cs_csrf';
export const CSRF_FIELD = 'csrf';

const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/;

export type Csrf = {
  /** The token for a form shown to this request: the session's, or the pre-sign-in one (setting its cookie). */
  token(request: FastifyRequest, reply: FastifyReply, session: Pick<WebSession, 'secret'> | null): string;
  /**
   * False when the browser says the request comes from another site (`Sec-Fetch-Site`, `Origin`): a
   * header check, made before a form's body is read.
   */
  fromThisSite(request: FastifyRequest): boolean;
  /** True when the POST carries the right token for `session` (or the pre-sign-in token when null) and comes from this site. */
  check(request: FastifyRequest, session: Pick<WebSession, 'secret'> | null, token: unknown): boolean;
};

export function createCsrf(deps: { secret: Buffer; publicUrl: string; secure: boolean }): Csrf {
  const origin = new URL(deps.publicUrl).origin;
  const mac = (purpose: string, value: string): string =>
    createHmac('sha256', deps.secret).update(`${purpose}:${value}`).digest('base64url');
  // A value minted for a request: the same request may render more than one form.
  const minted = new WeakMap<FastifyRequest, string>();
  const anonymousCookie = (request: FastifyRequest): string | undefined => {
    const value = readCookie(request, CSRF_COOKIE);
    return value && COOKIE_VALUE.test(value) ? value : undefined;
  };

  function fromThisSite(request: FastifyRequest): boolean {
    const site = request.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
    const from = request.headers.origin;
    if (from !== undefined && from !== origin) return false;
    return true;
  }

  return {
    fromThisSite,
    token(request, reply, session) {
      if (session) return mac('session', session.secret);
      let value = anonymousCookie(request) ?? minted.get(request);
      if (!value) {
        value = randomBytes(32).toString('base64url');
        minted.set(request, value);
        setCookie(reply, CSRF_COOKIE, value, { secure: deps.secure });
      }
      return mac('anonymous', value);
    },
    check(request, session, token) {
      if (!fromThisSite(request)) return false;
      if (typeof token !== 'string' || token.length === 0) return false;
      let expected: string;
      if (session) {
        expected = mac('session', session.secret);
      } else {
        const value = anonymousCookie(request);
        if (!value) return false;
        expected = mac('anonymous', value);
      }
      const a = Buffer.from(token);
      const b = Buffer.from(expected);
      return a.length === b.length && timingSafeEqual(a, b);
    },
  };
}
