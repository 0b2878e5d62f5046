import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { InteractionDetails } from 'oidc-provider';
import { z } from 'zod';
import type { KeyScope } from '../../../domain/account/events.ts';
import type { Db } from '../../../infra/db/schema.ts';
import { isDatabaseUnavailable } from '../../../infra/db/unavailable.ts';
import { type Html, html } from '../http/html.ts';
import { SCOPES } from '../http/oauth-port.ts';
import type { PageKit, PageSession } from '../http/page-kit.ts';
import { FORM_TOKEN_MAX } from '../http/schemas.ts';
import { redirectHostOf } from './client-rules.ts';
import { type LazyProvider, OAUTH_PREFIX } from './provider.ts';

/*
 * The person's side of an authorization: oidc-provider sends the browser to
 * `/oauth/interaction/:uid` whenever it needs someone signed in (prompt `login`) or a decision
 * (prompt `consent`).
 *
 * - No web session: off to /sign-in, and back here afterwards.
 * - `login`: answered at once with the web session's account (the person signed in on our page).
 * - `consent`: the consent page: which assistant (its name, or its client_id), where it sends the
 *   answer (the redirect host), which account, which access (read, or read and write). Allow makes a
 *   Grant bound to that account and access, recorded in `oauth_grants`; Deny ends the authorization
 *   with `access_denied`: the assistant gets no code, hence no token.
 */

const CLIENT_NAME_MAX = 100;
/** Length of an interaction's uid (oidc-provider makes them 21 characters long). */
const INTERACTION_UID_MAX = 128;
const Params = z.object({ uid: z.string().min(1).max(INTERACTION_UID_MAX) });
const Decision = z.object({
  decision: z.enum(['allow', 'deny']).optional(),
  csrf: z.string().max(FORM_TOKEN_MAX).optional(),
});

type InteractionDeps = { provider: LazyProvider; kit: PageKit; db: Db; resource: string };

function requestedScopes(details: InteractionDetails): Set<string> {
  const scope = typeof details.params.scope === 'string' ? details.params.scope : '';
  return new Set(scope.split(' ').filter(Boolean));
}

/** What Allow grants on the MCP resource: what was asked of it, at least read; write implies read. */
export function grantedAccess(requested: ReadonlySet<string>): { scope: string; access: KeyScope } {
  return requested.has(SCOPES.write)
    ? { scope: `${SCOPES.read} ${SCOPES.write}`, access: 'write' }
    : { scope: SCOPES.read, access: 'read' };
}

export function displayName(name: unknown, clientId: string): string {
  const text = typeof name === 'string' ? name.trim() : '';
  const chosen = text === '' ? clientId : text;
  return chosen.length > CLIENT_NAME_MAX ? `${chosen.slice(0, CLIENT_NAME_MAX - 1)}…` : chosen;
}

export const interactionRoutes: FastifyPluginAsync<InteractionDeps> = async (plain, deps) => {
  const app = plain.withTypeProvider<ZodTypeProvider>();
  const { provider: oidc, kit, db, resource } = deps;
  // An assistant may run its sign-in in a popup, which must find its way back to it.
  kit.installPages(app, { keepOpener: true });

  const here = (uid: string): string => `${OAUTH_PREFIX}/interaction/${encodeURIComponent(uid)}`;

  function expired(request: FastifyRequest, reply: FastifyReply, session: PageSession | null): FastifyReply {
    return kit.send(reply, {
      status: 400,
      title: 'Connection expired',
      session,
      request,
      body: html`<div class="card"><h1>This connection request has expired</h1>
<p>Go back to your assistant and start connecting again.</p></div>`,
    });
  }

  async function consentPage(
    request: FastifyRequest,
    res: FastifyReply,
    details: InteractionDetails,
    session: PageSession,
  ): Promise<FastifyReply> {
    const clientId = String(details.params.client_id ?? '');
    const provider = await oidc();
    const client = await provider.Client.find(clientId);
    if (!client) return expired(request, res, session);
    const name = displayName(client.clientName, clientId);
    const redirectUri = typeof details.params.redirect_uri === 'string' ? details.params.redirect_uri : '';
    const redirectHost = redirectHostOf(redirectUri ? [redirectUri] : client.redirectUris);
    const { access } = grantedAccess(requestedScopes(details));
    const can: Html[] = [
      html`<li>See your websites, articles (with their full text), backlinks, statistics and the history of your articles</li>`,
    ];
    if (access === 'write') {
      can.push(
        html`<li>Edit the titles and text of your articles, replace their featured images and restore earlier versions</li>`,
      );
    }
    const body = html`<div class="card">
<h1>Connect ${name} to your account?</h1>
<dl>
<dt>Assistant</dt><dd><strong>${name}</strong>${name !== clientId ? html`<br><span class="muted">${clientId}</span>` : ''}</dd>
<dt>Sends you back to</dt><dd><code>${redirectHost}</code></dd>
<dt>Account</dt><dd>${session.account.name} (${session.account.email})</dd>
<dt>Access</dt><dd>${access === 'write' ? 'Read and write' : 'Read only'}</dd>
</dl>
<p>If you allow it, ${name} will be able to:</p>
<ul class="access">${can}</ul>
<p class="muted">Allow only assistants you trust and recognise. You can disconnect it at any time on the Connect Site page.</p>
<form method="post" action="${here(details.uid)}">
${kit.csrfField(request, res, session)}
<div class="actions">
<button class="primary" type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</div>
</form>
</div>`;
    return kit.send(res, { title: `Connect ${name}`, body, session, request });
  }

  function accountChanged(request: FastifyRequest, res: FastifyReply, session: PageSession): FastifyReply {
    return kit.send(res, {
      status: 409,
      title: 'Start again',
      session,
      request,
      body: html`<div class="card"><h1>You signed in as someone else meanwhile</h1>
<p>This connection request was started for another account. Go back to your assistant and start connecting again.</p></div>`,
    });
  }

  app.get(
    `${OAUTH_PREFIX}/interaction/:uid`,
    { schema: { hide: true, params: Params } },
    async (request, res) => {
      const { uid } = request.params;
      const session = await kit.session(request);
      const details = await loadDetails(request, res, uid);
      if (!details) return expired(request, res, session);
      if (!session) return res.redirect(kit.signInUrl(here(uid)), 303);
      if (details.prompt.name === 'login') {
        const returnTo = await (await oidc()).interactionResult(
          request.raw,
          res.raw,
          { login: { accountId: session.accountId, remember: false } },
          { mergeWithLastSubmission: false },
        );
        return res.redirect(returnTo, 303);
      }
      if (details.prompt.name !== 'consent') return expired(request, res, session);
      if (details.session?.accountId !== session.accountId) return accountChanged(request, res, session);
      return consentPage(request, res, details, session);
    },
  );

  app.post(
    `${OAUTH_PREFIX}/interaction/:uid`,
    {
      schema: { hide: true, params: Params, body: Decision },
      config: { form: { from: 'account', back: (request) => here((request.params as { uid: string }).uid) } },
    },
    async (request, res) => {
      const { uid } = request.params;
      const session = await kit.session(request);
      if (!session) return res.redirect(kit.signInUrl(here(uid)), 303);
      if (!kit.checkForm(request, res, session)) return res;
      const details = await loadDetails(request, res, uid);
      if (!details) return expired(request, res, session);
      if (details.prompt.name !== 'consent') return expired(request, res, session);
      if (details.session?.accountId !== session.accountId) return accountChanged(request, res, session);

      const clientId = String(details.params.client_id ?? '');
      const provider = await oidc();
      if (request.body.decision !== 'allow') {
        request.log.info({ event: 'oauth_denied', client_id: clientId }, 'connection denied');
        const returnTo = await provider.interactionResult(
          request.raw,
          res.raw,
          { error: 'access_denied', error_description: 'The account holder did not allow the connection.' },
          { mergeWithLastSubmission: false },
        );
        return res.redirect(returnTo, 303);
      }

      const client = await provider.Client.find(clientId);
      if (!client) return expired(request, res, session);
      const { scope } = grantedAccess(requestedScopes(details));
      const grant = new provider.Grant({ accountId: session.accountId, clientId });
      const missingOIDC = details.prompt.details.missingOIDCScope;
      if (Array.isArray(missingOIDC) && missingOIDC.length > 0) grant.addOIDCScope(missingOIDC.join(' '));
      grant.addResourceScope(resource, scope);
      const grantId = await grant.save();
      const redirectUri = typeof details.params.redirect_uri === 'string' ? details.params.redirect_uri : '';
      await db
        .insertInto('oauth_grants')
        .values({
          grant_id: grantId,
          account_id: session.accountId,
          client_id: clientId,
          client_name: displayName(client.clientName, clientId),
          redirect_host: redirectHostOf(redirectUri ? [redirectUri] : client.redirectUris),
          scope,
          created_at: kit.now(),
        })
        .execute();
      request.log.info(
        { event: 'oauth_allowed', client_id: clientId, account_id: session.accountId, scope },
        'connection allowed',
      );
      const returnTo = await provider.interactionResult(
        request.raw,
        res.raw,
        { consent: { grantId } },
        { mergeWithLastSubmission: true },
      );
      return res.redirect(returnTo, 303);
    },
  );

  // An interaction address no route above takes (a uid past the router's length): the pages' 404, not
  // oidc-provider's, which serves the rest of /oauth/.
  app.route({
    method: ['GET', 'POST'],
    url: `${OAUTH_PREFIX}/interaction/*`,
    schema: { hide: true },
    config: { form: { from: 'account' } },
    handler: async (_request, reply) => kit.notFound(reply, 'There is no connection request at this address'),
  });

  async function loadDetails(
    request: FastifyRequest,
    res: FastifyReply,
    uid: string,
  ): Promise<InteractionDetails | null> {
    try {
      const details = await (await oidc()).interactionDetails(request.raw, res.raw);
      return details.uid === uid ? details : null;
    } catch (error) {
      // The database being away is not an expired interaction: the 503 page says to try again.
      if (isDatabaseUnavailable(error)) throw error;
      return null;
    }
  }
};
