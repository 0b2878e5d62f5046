import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { cookieName, readCookie, setCookie } from './cookies.ts';

/*
 * The device cookie: a browser that signed in successfully with an email address holds `cs_device`,
 * `<id>.<mac>`, where `id` is 128 random bits naming the browser and `mac` the HMAC (under the persisted
 * web secret) of the id and the lowercased email. Later sign-ins with that email from that browser are
 * throttled under their own key (throttle.ts), so failures made elsewhere for the email never slow or
 * lock them. Nothing is stored: the MAC is the proof. One email per browser: signing in with another
 * email re-binds the cookie to it. HttpOnly, SameSite=Lax, Path=/, Secure and named `__Host-cs_device`
 * when PUBLIC_URL is https; kept a year, renewed at each sign-in. Signing out keeps it (it is no
 * session: it signs nobody in).
 */

const DEVICE_COOKIE = 'cs_device';
const DEVICE_TTL_MS = 365 * 24 * 60 * 60 * 1000;

const VALUE = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

export type Devices = {
  /** The browser's device id when its cookie was issued for `email`; null otherwise. */
  recognise(request: FastifyRequest, email: string): string | null;
  /** After a successful sign-in with `email`: the cookie, bound to it (the same id when there was one). */
  remember(request: FastifyRequest, reply: FastifyReply, email: string): void;
};

export function createDevices(deps: { secret: Buffer; secure: boolean }): Devices {
  const deviceCookie = cookieName(DEVICE_COOKIE, deps.secure);
  const mac = (id: string, email: string): string =>
    createHmac('sha256', deps.secret).update(`device:${id}:${email.toLowerCase()}`).digest('base64url');
  const idOf = (request: FastifyRequest): { id: string; mac: string } | null => {
    const match = VALUE.exec(readCookie(request, deviceCookie) ?? '');
    return match?.[1] && match[2] ? { id: match[1], mac: match[2] } : null;
  };
  return {
    recognise(request, email) {
      const cookie = idOf(request);
      if (!cookie) return null;
      const a = Buffer.from(cookie.mac);
      const b = Buffer.from(mac(cookie.id, email));
      return a.length === b.length && timingSafeEqual(a, b) ? cookie.id : null;
    },
    remember(request, reply, email) {
      const id = idOf(request)?.id ?? randomBytes(16).toString('base64url');
      setCookie(reply, deviceCookie, `${id}.${mac(id, email)}`, {
        secure: deps.secure,
        maxAge: DEVICE_TTL_MS / 1000,
      });
    },
  };
}
