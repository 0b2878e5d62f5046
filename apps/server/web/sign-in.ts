import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isDomainError } from '../../../domain/errors.ts';
import { type Html, html, raw } from '../http/html.ts';
import { addressKey } from '../http/limits.ts';
import { markRefusal } from '../http/metrics.ts';
import { FORM_TEXT_MAX, FORM_TOKEN_MAX } from '../http/schemas.ts';
import { STYLESHEET, STYLESHEET_PATH } from './html.ts';
import { installFormParser, installPageHeaders, safeReturnTo, type WebKit } from './kit.ts';
import { installPageErrors } from './refusal.ts';
import {
  ADDRESS_POLICY,
  CLIENT_POLICY,
  EMAIL_POLICY,
  type ThrottleKey,
  type ThrottleRefusal,
} from './throttle.ts';

/*
 * GET/POST /sign-in, POST /sign-out, and the stylesheet.
 *
 * Sign-in answers a wrong password and an unknown email with the same page, status and wording, after
 * the same work (the credentials use case, apps/application/credentials.ts, checks the password).
 * Failures are counted (throttle.ts) per email (slowed only), per email from this client (slowed, then
 * locked) and per client address; a browser holding a device cookie for the email (device.ts) is
 * counted under its own key alone.
 */

const WRONG = 'That email and password do not match an account. Check them and try again.';

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

function refusal(verdict: ThrottleRefusal): string {
  if (verdict.reason === 'locked') {
    const minutes = Math.max(1, Math.ceil(verdict.retryAfterMs / 60_000));
    return `Too many failed attempts. Signing in from here is paused for ${minutes} minute${minutes === 1 ? '' : 's'}.`;
  }
  const s = seconds(verdict.retryAfterMs);
  return `Too many failed attempts. Wait ${s} second${s === 1 ? '' : 's'}, then try again.`;
}

const SignInQuery = z.object({ return_to: z.string().max(FORM_TEXT_MAX).optional() });
const SignInBody = z.object({
  email: z.string().max(FORM_TEXT_MAX).optional(),
  password: z.string().max(FORM_TEXT_MAX).optional(),
  return_to: z.string().max(FORM_TEXT_MAX).optional(),
  csrf: z.string().max(FORM_TOKEN_MAX).optional(),
});
const SignOutBody = z.object({ csrf: z.string().max(FORM_TOKEN_MAX).optional() });
/** The forms and who may send them (kit.ts FormSender): sign-in anyone, sign-out anyone signed in. */
const SIGN_IN = { schema: { hide: true, body: SignInBody }, config: { form: { from: 'anyone' } } } as const;
const SIGN_OUT = {
  schema: { hide: true, body: SignOutBody },
  config: { form: { from: 'session' } },
} as const;

/** Other names of `/sign-in` that people type. */
const SIGN_IN_ALIASES = ['/login', '/log-in', '/signin'] as const;

export const webRoutes: FastifyPluginAsync<{ kit: WebKit }> = async (plain, { kit }) => {
  const app = plain.withTypeProvider<ZodTypeProvider>();
  installFormParser(app, kit);
  // An assistant's OAuth sign-in passes here, perhaps in a popup that must find its way back to it.
  installPageHeaders(app, { keepOpener: true });
  installPageErrors(app, kit);

  app.get(STYLESHEET_PATH, { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(STYLESHEET),
  );

  function signInPage(
    request: FastifyRequest,
    reply: FastifyReply,
    opts: { status?: number; error?: string; email?: string; returnTo: string | null; note?: Html | '' },
  ): FastifyReply {
    const body = html`<div class="card">
<h1>Sign in</h1>
${opts.note ?? ''}
${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<form method="post" action="/sign-in">
${kit.csrfField(request, reply, null)}
${opts.returnTo ? html`<input type="hidden" name="return_to" value="${opts.returnTo}">` : ''}
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required${opts.error ? '' : raw(' autofocus')} value="${opts.email ?? ''}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<div class="actions"><button class="primary" type="submit">Sign in</button></div>
</form>
</div>`;
    return kit.send(reply, { status: opts.status ?? 200, title: 'Sign in', body, session: null, request });
  }

  /**
   * Someone already signed in has nothing to do here: an account holder goes on to `return_to` or
   * their sites; a staff member to `return_to` under /staff or the support area. A staff member sent
   * here on the way elsewhere (an assistant's sign-in, which needs an account holder) gets the form,
   * saying who is signed in.
   */
  app.get('/sign-in', { schema: { hide: true, querystring: SignInQuery } }, async (request, reply) => {
    const returnTo = safeReturnTo(request.query.return_to);
    const session = await kit.sessions.current(request);
    if (session) return reply.redirect(returnTo ?? '/sites', 303);
    const staff = await kit.sessions.currentStaff(request);
    if (staff && (!returnTo || returnTo.startsWith('/staff')))
      return reply.redirect(returnTo ?? '/staff', 303);
    const note = staff
      ? html`<p class="muted" id="signed-in-staff">You are signed in as ${staff.staff.name}, support staff: this page needs an account holder's sign-in. <a href="/staff">Back to support</a></p>`
      : '';
    return signInPage(request, reply, { returnTo, note });
  });

  // Where people look for the sign-in page out of habit: sent on to it (303), with the query (a
  // `return_to`) as it came. (`/logout` and the like are the 404 page, which says where Sign out is.)
  for (const alias of SIGN_IN_ALIASES) {
    app.get(alias, { schema: { hide: true } }, async (request, reply) => {
      const query = request.url.indexOf('?');
      return reply.redirect(`/sign-in${query < 0 ? '' : request.url.slice(query)}`, 303);
    });
  }

  app.post('/sign-in', SIGN_IN, async (request, reply) => {
    const returnTo = safeReturnTo(request.body.return_to);
    if (!kit.checkForm(request, reply, null)) return reply;
    const email = (request.body.email ?? '').trim();
    const password = request.body.password ?? '';
    if (email === '' || password === '') {
      return signInPage(request, reply, {
        status: 400,
        error: 'Enter your email address and your password.',
        email,
        returnTo,
      });
    }
    // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
    if (/[\u0000-\u001f\u007f]/.test(email) || !email.isWellFormed()) {
      return signInPage(request, reply, {
        status: 400,
        error: 'That is not an email address. Check it and try again.',
        returnTo,
      });
    }
    const lower = email.toLowerCase();
    const device = kit.devices.recognise(request, email);
    // A known browser is counted on its own; anyone else on the email (slowed only), on the email from
    // this address (locked after a while) and on the address.
    const keys: ThrottleKey[] = device
      ? [{ key: `client:${lower}|device:${device}`, policy: CLIENT_POLICY }]
      : [
          { key: `email:${lower}`, policy: EMAIL_POLICY },
          { key: `client:${lower}|ip:${addressKey(request.ip)}`, policy: CLIENT_POLICY },
          { key: `ip:${addressKey(request.ip)}`, policy: ADDRESS_POLICY },
        ];
    const verdict = await kit.throttle.reserve(keys);
    if (!verdict.allowed) {
      reply.header('retry-after', String(seconds(verdict.retryAfterMs)));
      markRefusal(request, 'rate_limited');
      return signInPage(request, reply, { status: 429, error: refusal(verdict), email, returnTo });
    }
    // An account holder, else a support staff member with that email: one password check either way.
    const signedIn = await kit.credentials.signIn({ email, password });
    if (!signedIn.ok) {
      if (!isDomainError(signedIn.error) || signedIn.error.code !== 'unauthenticated') throw signedIn.error;
      request.log.info({ event: 'sign_in_failed' }, 'sign-in failed');
      markRefusal(request, 'unauthenticated');
      return signInPage(request, reply, { status: 401, error: WRONG, email, returnTo });
    }
    const who = signedIn.value;
    await kit.throttle.succeeded(
      verdict,
      keys.filter((k) => !k.key.startsWith('ip:')).map((k) => k.key),
    );
    kit.devices.remember(request, reply, email);
    if (who.holder === 'staff') {
      await kit.sessions.createStaff(reply, who.id);
      request.log.info({ event: 'staff_signed_in', staff_id: who.id }, 'staff signed in');
      return reply.redirect(returnTo?.startsWith('/staff') ? returnTo : '/staff', 303);
    }
    await kit.sessions.create(reply, who.id);
    request.log.info({ event: 'signed_in', account_id: who.id }, 'signed in');
    return reply.redirect(returnTo ?? '/sites', 303);
  });

  app.post('/sign-out', SIGN_OUT, async (request, reply) => {
    const session = (await kit.sessions.current(request)) ?? (await kit.sessions.currentStaff(request));
    if (session && !kit.checkForm(request, reply, session)) return reply;
    await kit.sessions.end(request, reply);
    return reply.redirect('/sign-in', 303);
  });
};
