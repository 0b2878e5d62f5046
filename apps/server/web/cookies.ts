import type { FastifyReply, FastifyRequest } from 'fastify';

/*
 * Reading and writing cookies without a plugin: the pages need three (`cs_session`, `cs_csrf`,
 * `cs_device`). Under an https PUBLIC_URL each is named with the `__Host-` prefix: browsers then keep
 * it only when it is Secure, Path=/ and without Domain, so neither a subdomain nor a plain-http page
 * of the same host can set or replace it.
 */

/** The cookie's name: `__Host-<name>` when the cookies are Secure (PUBLIC_URL is https), else `name`. */
export function cookieName(name: string, secure: boolean): string {
  return secure ? `__Host-${name}` : name;
}

/** The value of cookie `name` in the request, or undefined (the first one when repeated). */
export function readCookie(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    try {
      return decodeURIComponent(value);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

type CookieOptions = {
  secure: boolean;
  /** Seconds; 0 deletes the cookie. Unset: a browser-session cookie. */
  maxAge?: number;
  path?: string;
  httpOnly?: boolean;
  sameSite?: 'Lax' | 'Strict';
};

function serializeCookie(name: string, value: string, opts: CookieOptions): string {
  const parts = [`${name}=${encodeURIComponent(value)}`, `Path=${opts.path ?? '/'}`];
  if (opts.maxAge !== undefined) {
    parts.push(`Max-Age=${Math.max(0, Math.floor(opts.maxAge))}`);
    if (opts.maxAge <= 0) parts.push('Expires=Thu, 01 Jan 1970 00:00:00 GMT');
  }
  if (opts.httpOnly ?? true) parts.push('HttpOnly');
  parts.push(`SameSite=${opts.sameSite ?? 'Lax'}`);
  if (opts.secure) parts.push('Secure');
  return parts.join('; ');
}

/** Adds a Set-Cookie header (fastify keeps the ones already set on this reply). */
export function setCookie(reply: FastifyReply, name: string, value: string, opts: CookieOptions): void {
  reply.header('set-cookie', serializeCookie(name, value, opts));
}

export function clearCookie(reply: FastifyReply, name: string, opts: Omit<CookieOptions, 'maxAge'>): void {
  setCookie(reply, name, '', { ...opts, maxAge: 0 });
}
