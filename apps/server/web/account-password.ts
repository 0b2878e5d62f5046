import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PASSWORD_MIN_LENGTH, passwordProblem } from '../../../domain/account/password.ts';
import { isDomainError } from '../../../domain/errors.ts';
import type { Activity } from '../../application/activity.ts';
import type { Credentials } from '../../application/credentials.ts';
import { html } from '../http/html.ts';
import { FORM_SHORT_MAX, FORM_TEXT_MAX, FORM_TOKEN_MAX } from '../http/schemas.ts';
import { recordChanges, webCall } from './call.ts';
import { installFormParser, installPageHeaders, type WebKit } from './kit.ts';
import { installPageErrors } from './refusal.ts';
import type { WebSession } from './sessions.ts';
import { CLIENT_POLICY } from './throttle.ts';

/*
 * GET/POST /account/password: a signed-in account holder changes their password (the current one, the
 * new one twice, as the policy of domain/account/password.ts wants it). The change is a `PasswordChanged`
 * event with no secret and a new hash in `credentials` (the credentials use case,
 * apps/application/credentials.ts, checks the current one and makes the change); it ends
 * every web session of the account, and this browser is signed in again under a new session id (its old
 * cookie value is worth nothing). Wrong current passwords are throttled per account like a sign-in from
 * one client (throttle.ts CLIENT_POLICY: slowed, then paused 15 minutes). Support staff have no
 * password page: theirs change with the CLI (`staff set-password`).
 */

const PasswordBody = z.object({
  current: z.string().max(FORM_TEXT_MAX).optional(),
  password: z.string().max(FORM_TEXT_MAX).optional(),
  repeat: z.string().max(FORM_TEXT_MAX).optional(),
  csrf: z.string().max(FORM_TOKEN_MAX).optional(),
});
const PasswordQuery = z.object({ changed: z.string().max(FORM_SHORT_MAX).optional() });
/** The form and who may send it (kit.ts FormSender). */
const PASSWORD_FORM = {
  schema: { hide: true, body: PasswordBody },
  config: { form: { from: 'account' }, operation: 'change_password' },
} as const;

export const accountPasswordRoutes: FastifyPluginAsync<{
  kit: WebKit;
  credentials: Credentials;
  activity: Pick<Activity, 'record' | 'refusal'>;
}> = async (plain, { kit, credentials, activity }) => {
  const app = plain.withTypeProvider<ZodTypeProvider>();
  installFormParser(app, kit);
  installPageHeaders(app);
  recordChanges(app, kit, activity);
  installPageErrors(app, kit);

  function passwordPage(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    opts: { status?: number; error?: string; changed?: boolean } = {},
  ): FastifyReply {
    const body = html`<div class="card">
<h1>Change password</h1>
${
  opts.changed
    ? html`<p class="notice" role="status" id="password-changed">Your password was changed. Every other browser signed in to this account was signed out.</p>`
    : ''
}
${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<form method="post" action="/account/password">
${kit.csrfField(request, reply, session)}
<input type="hidden" name="username" autocomplete="username" value="${session.account.email}">
<label for="current">Current password</label>
<input id="current" name="current" type="password" autocomplete="current-password" required>
<label for="password">New password (at least ${String(PASSWORD_MIN_LENGTH)} characters)</label>
<input id="password" name="password" type="password" autocomplete="new-password" minlength="${String(PASSWORD_MIN_LENGTH)}" required>
<label for="repeat">New password again</label>
<input id="repeat" name="repeat" type="password" autocomplete="new-password" minlength="${String(PASSWORD_MIN_LENGTH)}" required>
<div class="actions"><button class="primary" type="submit">Change password</button></div>
</form>
<p class="muted">Changing it signs out every other browser signed in to this account.</p>
</div>`;
    return kit.send(reply, { status: opts.status ?? 200, title: 'Change password', body, session, request });
  }

  app.get(
    '/account/password',
    { schema: { hide: true, querystring: PasswordQuery } },
    async (request, reply) => {
      const session = await kit.sessions.current(request);
      if (!session) return kit.notHolder(request, reply, '/account/password');
      return passwordPage(request, reply, session, { changed: request.query.changed === '1' });
    },
  );

  app.post('/account/password', PASSWORD_FORM, async (request, reply) => {
    const session = await kit.sessions.current(request);
    if (!session) return kit.notHolder(request, reply, '/account/password');
    if (!kit.checkForm(request, reply, session)) return reply;
    const { current = '', password = '', repeat = '' } = request.body;
    const refuse = (status: number, error: string): FastifyReply =>
      passwordPage(request, reply, session, { status, error });
    if (current === '' || password === '') return refuse(400, 'Enter your current password and a new one.');
    const problem = passwordProblem(password);
    if (problem !== null) return refuse(400, `The new password must be ${problem}.`);
    if (password !== repeat) return refuse(400, 'The two new passwords are not the same.');
    const keys = [{ key: `password-change:${session.accountId}`, policy: CLIENT_POLICY }];
    const verdict = await kit.throttle.reserve(keys);
    if (!verdict.allowed) {
      reply.header('retry-after', String(Math.max(1, Math.ceil(verdict.retryAfterMs / 1000))));
      return refuse(429, 'Too many wrong current passwords. Wait a while, then try again.');
    }
    // Every session of the account ends with the change, this browser's too; it is signed in again
    // under a new session id, so a copy of the old cookie value signs nobody in.
    const changed = await credentials.changePassword(webCall(request, session), { current, password });
    if (!changed.ok) {
      if (!isDomainError(changed.error) || changed.error.code !== 'unauthenticated') throw changed.error;
      request.log.info(
        { event: 'password_change_failed', account_id: session.accountId },
        'wrong current password',
      );
      return refuse(401, 'That is not your current password.');
    }
    await kit.throttle.succeeded(verdict, [keys[0]?.key ?? '']);
    await kit.sessions.create(reply, session.accountId);
    request.log.info({ event: 'password_changed', account_id: session.accountId }, 'password changed');
    return reply.redirect('/account/password?changed=1', 303);
  });
};
