import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isDomainError } from '../../../domain/errors.ts';
import { ID_PATTERN, ID_RULE, NAME_MAX, URL_MAX } from '../../../domain/input.ts';
import { PAGE_MAX, WEBHOOK_ENDPOINTS_MAX, WEBHOOK_EVENT_TYPES } from '../../../domain/vocabulary.ts';
import type { Activity } from '../../application/activity.ts';
import { unwrap } from '../../application/call.ts';
import { cleanText } from '../../application/contract.ts';
import type { Keys } from '../../application/keys.ts';
import type { Webhooks } from '../../application/webhooks.ts';
import { type Html, html } from '../http/html.ts';
import type { ConnectedClients } from '../http/oauth-port.ts';
import { FORM_SHORT_MAX, FORM_TEXT_MAX, FORM_TOKEN_MAX } from '../http/schemas.ts';
import { recordChanges, webCall } from './call.ts';
import {
  COPY_SCRIPT_PATH,
  doneNotice,
  endpointPage,
  eventFieldName,
  formTimeAsRfc3339,
  newEndpointNotice,
  secretField,
  type WebhookFormState,
  webhooksSection,
} from './connect-webhooks.ts';
import {
  type FormSender,
  installFormParser,
  installPageHeaders,
  SCRIPT_PAGE_CSP,
  type WebKit,
} from './kit.ts';
import { installPageErrors, sendRefusal } from './refusal.ts';
import type { WebSession } from './sessions.ts';
import type { ShownOnce } from './shown-once.ts';

/*
 * The Connect Site page (`/connect`): what a person needs to connect tools to their account.
 * - the address to give an AI assistant (`PUBLIC_URL/mcp`), and the assistants connected, each with a
 *   Disconnect button (its tokens stop working at once);
 * - API keys: create one (shown once, on the page the form's 303 leads to: shown-once.ts), list them
 *   (prefix, scope, created, last used), revoke one.
 * - webhooks: the endpoints with their state, a form to add one (its secret shown once), Enable,
 *   Disable and Delete; a page per endpoint (`/connect/webhooks/{id}`) with its deliveries, Redeliver
 *   and Replay (templates in connect-webhooks.ts).
 * Every change goes through the same command handlers and use cases as the API and the CLI; every form
 * is a POST with the session's CSRF token.
 */

const CreateKeyBody = z.object({
  name: z.string().max(NAME_MAX).optional(),
  scope: z.string().max(FORM_SHORT_MAX).optional(),
  csrf: z.string().max(FORM_TOKEN_MAX).optional(),
});
const FormBody = z.object({ csrf: z.string().max(FORM_TOKEN_MAX).optional() });
const KeyParams = z.object({ keyId: z.string().regex(ID_PATTERN, ID_RULE) });
/** An assistant's client_id (oidc-provider's, or the https address of its metadata document). */
const ClientParams = z.object({ clientId: cleanText(z.string().min(1).max(URL_MAX), { lines: false }) });
/** The add form: url, description, one checkbox per event type (`event.<type>`), the CSRF field. */
const WebhookFormBody = z.record(z.string().max(FORM_SHORT_MAX), z.string().max(FORM_TEXT_MAX));
const WebhookParams = z.object({ id: z.string().regex(ID_PATTERN, ID_RULE) });
const WebhookToggleBody = z.object({
  csrf: z.string().max(FORM_TOKEN_MAX).optional(),
  back: z.string().max(FORM_SHORT_MAX).optional(),
});
const DeliveryParams = z.object({
  id: z.string().regex(ID_PATTERN, ID_RULE),
  deliveryId: z.string().regex(ID_PATTERN, ID_RULE),
});
const ReplayFormBody = z.object({
  csrf: z.string().max(FORM_TOKEN_MAX).optional(),
  from: z.string().max(FORM_SHORT_MAX).optional(),
});
const EndpointQuery = z.object({
  page: z.coerce.number().int().min(1).max(PAGE_MAX).optional().catch(undefined),
  done: z.string().max(FORM_SHORT_MAX).optional(),
  queued: z.coerce.number().int().min(0).optional().catch(undefined),
});
/** Who may send the Connect Site page's forms (kit.ts FormSender); without a session, sign-in comes back to it. */
const CONNECT: { form: FormSender } = { form: { from: 'account', back: () => '/connect' } };
/** The same for the forms of an endpoint's page, coming back to that page. */
const ENDPOINT: { form: FormSender } = {
  form: {
    from: 'account',
    back: (request) => `/connect/webhooks/${encodeURIComponent((request.params as { id: string }).id)}`,
  },
};
const CREATE_KEY = { hide: true, body: CreateKeyBody };
const ADD_WEBHOOK = { hide: true, body: WebhookFormBody };
/** Deliveries per page of an endpoint's page. */
const DELIVERIES_PER_PAGE = 20;

/** The form's values as the person sent them: the URL, the checked event types, the description. */
function webhookFormOf(body: Record<string, string>): WebhookFormState {
  return {
    url: (body.url ?? '').trim(),
    events: WEBHOOK_EVENT_TYPES.filter((type) => body[eventFieldName(type)] !== undefined),
    description: (body.description ?? '').trim(),
  };
}

/** A refusal of the add form as the form shows it: the field named, in the words of its label. */
function formErrorOf(error: unknown): WebhookFormState['error'] | null {
  if (!isDomainError(error)) return null;
  const first = error.errors?.[0];
  const field = first && 'field' in first ? first.field : null;
  if (
    error.code === 'invalid_request' &&
    (field === 'url' || field === 'events' || field === 'description')
  ) {
    const label = { url: 'The URL', events: 'The events', description: 'The description' }[field];
    return { field, message: `${label} ${first && 'message' in first ? first.message : 'is not valid'}.` };
  }
  if (error.code === 'conflict') return { field: null, message: error.message };
  return null;
}

/** The card of a secret made by the page's last form, shown once (shown-once.ts). */
function shownOnceNotice(shown: ShownOnce): Html {
  if (shown.kind === 'webhook_secret') return newEndpointNotice(shown);
  return html`<div class="card notice" role="status" id="new-key">
<h2>Your new key</h2>
<p>Copy it now: it will not be shown again.</p>
${secretField('new-key-value', `The key “${shown.name}”`, shown.key)}
<script src="${COPY_SCRIPT_PATH}" defer></script>
</div>`;
}

function when(date: Date | null | undefined): string {
  return date ? `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC` : 'never';
}

export const connectSiteRoutes: FastifyPluginAsync<{
  kit: WebKit;
  keys: Keys;
  connections: ConnectedClients;
  webhooks: Webhooks;
  activity: Pick<Activity, 'record' | 'refusal'>;
}> = async (plain, { kit, keys: apiKeys, connections, webhooks, activity }) => {
  const app = plain.withTypeProvider<ZodTypeProvider>();
  installFormParser(app, kit);
  installPageHeaders(app);
  recordChanges(app, kit, activity);
  installPageErrors(app, kit);
  const mcpUrl = `${kit.publicUrl}/mcp`;

  async function signedIn(request: FastifyRequest, reply: FastifyReply): Promise<WebSession | null> {
    const session = await kit.sessions.current(request);
    if (!session) await kit.notHolder(request, reply, '/connect');
    return session;
  }

  async function connectPage(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    opts: { status?: number; notice?: Html; error?: string; webhookForm?: WebhookFormState } = {},
  ): Promise<FastifyReply> {
    const [keys, assistants, endpoints] = await Promise.all([
      apiKeys.list(webCall(request, session)).then(unwrap),
      connections.listConnectedClients(session.accountId),
      webhooks.list(webCall(request, session), { page: 1, per_page: WEBHOOK_ENDPOINTS_MAX }).then(unwrap),
    ]);
    const csrf = kit.csrfField(request, reply, session);
    const body = html`${opts.notice ?? ''}
${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<div class="card">
<h1>Connect Site</h1>
<h2>AI assistants</h2>
<p>Give your assistant this address. It will open a page where you sign in and click <strong>Allow</strong>; no key is needed.</p>
<p><code id="mcp-url">${mcpUrl}</code></p>
${
  assistants.length === 0
    ? html`<p class="muted" id="no-assistants">No assistant is connected.</p>`
    : html`<table id="assistants" class="site-table"><thead><tr><th scope="col">Assistant</th><th scope="col">Address</th><th scope="col">Access</th><th scope="col">Connected</th><th scope="col">Last used</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead><tbody>
${assistants.map(
  (
    a,
  ) => html`<tr><td data-label="Assistant">${a.name}</td><td data-label="Address"><code>${a.redirectHost}</code></td><td data-label="Access">${a.access === 'write' ? 'read and write' : 'read'}</td>
<td data-label="Connected">${when(a.connectedAt)}</td><td data-label="Last used">${when(a.lastUsedAt)}</td>
<td><form method="post" action="/connect/assistants/${encodeURIComponent(a.clientId)}/disconnect">${csrf}<button type="submit" aria-label="Disconnect ${a.name} (${a.redirectHost}, connected ${when(a.connectedAt)})">Disconnect</button></form></td></tr>`,
)}
</tbody></table>`
}
</div>
<div class="card">
<h2>API keys</h2>
<p>For scripts and integrations using the HTTP API (<a href="/docs">reference</a>). A key is shown once when it is created.</p>
<form method="post" action="/connect/keys">
${csrf}
<label for="key-name">Name</label>
<input type="text" id="key-name" name="name" maxlength="200" required placeholder="Monthly report">
<label for="key-scope">Access</label>
<select id="key-scope" name="scope"><option value="read">Read</option><option value="write">Read and write</option></select>
<div class="actions"><button class="primary" type="submit">Create key</button></div>
</form>
${
  keys.length === 0
    ? html`<p class="muted" id="no-keys">No keys yet.</p>`
    : html`<table id="keys" class="site-table"><thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Access</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead><tbody>
${keys.map(
  (
    k,
  ) => html`<tr><td data-label="Name">${k.name}</td><td data-label="Key"><code class="key-prefix">${k.prefix}…</code></td><td data-label="Access">${k.scope === 'write' ? 'read and write' : 'read'}</td>
<td data-label="Created">${when(k.created_at)}</td><td data-label="Last used">${when(k.last_used_at)}</td>
<td>${
    k.revoked_at
      ? html`<span class="muted">revoked ${when(k.revoked_at)}</span>`
      : html`<form method="post" action="/connect/keys/${k.id}/revoke">${csrf}<button type="submit" aria-label="Revoke ${k.name} (${k.prefix}…)">Revoke</button></form>`
  }</td></tr>`,
)}
</tbody></table>`
}
</div>
${webhooksSection(endpoints.data, csrf, opts.webhookForm)}`;
    return kit.send(reply, {
      status: opts.status ?? 200,
      title: 'Connect Site',
      body,
      session,
      request,
      wide: true,
    });
  }

  app.get('/connect', { schema: { hide: true } }, async (request, reply) => {
    const session = await signedIn(request, reply);
    if (!session) return reply;
    // A key or a signing secret the last form made: shown this once, with the Copy buttons' script.
    const shown = await kit.shownOnce.take(session);
    if (!shown) return connectPage(request, reply, session);
    reply.header('content-security-policy', SCRIPT_PAGE_CSP);
    return connectPage(request, reply, session, { notice: shownOnceNotice(shown) });
  });

  app.post(
    '/connect/keys',
    { schema: CREATE_KEY, config: { ...CONNECT, operation: 'create_api_key' } },
    async (request, reply) => {
      const session = await signedIn(request, reply);
      if (!session || !kit.checkForm(request, reply, session)) return reply;
      const name = (request.body.name ?? '').trim();
      const scope = request.body.scope === 'write' ? 'write' : request.body.scope === 'read' ? 'read' : null;
      if (name === '' || scope === null) {
        return connectPage(request, reply, session, {
          status: 400,
          error: 'Give the key a name and choose its access.',
        });
      }
      const made = await apiKeys.create(webCall(request, session), { name, scope });
      if (!made.ok) {
        const { error } = made;
        if (!isDomainError(error) || error.code !== 'invalid_request') throw error;
        const refused = error.errors?.[0];
        return connectPage(request, reply, session, {
          status: 400,
          error: `The key's name ${refused && 'message' in refused ? refused.message : 'is not valid'}; use letters, digits, spaces and punctuation.`,
        });
      }
      // To the page (303), where the key waits, server-side, to be shown once: a reload makes no other.
      await kit.shownOnce.keep(session, { kind: 'api_key', name, key: made.value.key });
      return reply.redirect('/connect#new-key', 303);
    },
  );

  app.post(
    '/connect/keys/:keyId/revoke',
    {
      schema: { hide: true, params: KeyParams, body: FormBody },
      config: { ...CONNECT, operation: 'revoke_api_key' },
    },
    async (request, reply) => {
      const session = await signedIn(request, reply);
      if (!session || !kit.checkForm(request, reply, session)) return reply;
      const revoked = await apiKeys.revoke(webCall(request, session), request.params.keyId);
      if (!revoked.ok) {
        if (isDomainError(revoked.error) && revoked.error.code === 'not_found') {
          return connectPage(request, reply, session, { status: 404, error: 'No such key on this account.' });
        }
        throw revoked.error;
      }
      return reply.redirect('/connect', 303);
    },
  );

  app.post(
    '/connect/assistants/:clientId/disconnect',
    {
      schema: { hide: true, params: ClientParams, body: FormBody },
      config: { ...CONNECT, operation: 'disconnect_assistant' },
    },
    async (request, reply) => {
      const session = await signedIn(request, reply);
      if (!session || !kit.checkForm(request, reply, session)) return reply;
      await connections.disconnectClient(session.accountId, request.params.clientId);
      return reply.redirect('/connect', 303);
    },
  );

  app.post(
    '/connect/webhooks',
    { schema: ADD_WEBHOOK, config: { ...CONNECT, operation: 'create_webhook' } },
    async (request, reply) => {
      const session = await signedIn(request, reply);
      if (!session || !kit.checkForm(request, reply, session)) return reply;
      const form = webhookFormOf(request.body);
      try {
        const { value: endpoint } = unwrap(
          await webhooks.create(webCall(request, session), {
            url: form.url,
            events: form.events,
            description: form.description === '' ? null : form.description,
          }),
        );
        // As a new key: to the page, where the signing secret is shown once.
        await kit.shownOnce.keep(session, {
          kind: 'webhook_secret',
          url: endpoint.url,
          secret: endpoint.secret,
        });
        return reply.redirect('/connect#new-webhook', 303);
      } catch (error) {
        const refused = formErrorOf(error);
        if (!refused) throw error;
        const status = isDomainError(error) && error.code === 'conflict' ? 409 : 400;
        return connectPage(request, reply, session, { status, webhookForm: { ...form, error: refused } });
      }
    },
  );

  /** Enable or Disable, back to the list or to the endpoint's page (`back`). */
  for (const action of ['enable', 'disable'] as const) {
    app.post(
      `/connect/webhooks/:id/${action}`,
      {
        schema: { hide: true, params: WebhookParams, body: WebhookToggleBody },
        config: { ...CONNECT, operation: 'update_webhook' },
      },
      async (request, reply) => {
        const session = await signedIn(request, reply);
        if (!session || !kit.checkForm(request, reply, session)) return reply;
        const { id } = request.params;
        try {
          unwrap(await webhooks.update(webCall(request, session), id, { enabled: action === 'enable' }));
        } catch (error) {
          return sendRefusal(kit, request, reply, session, error);
        }
        const done = action === 'enable' ? 'enabled' : 'disabled';
        return reply.redirect(
          request.body.back === 'endpoint'
            ? `/connect/webhooks/${id}?done=${done}`
            : `/connect#webhook-${id}`,
          303,
        );
      },
    );
  }

  app.post(
    '/connect/webhooks/:id/delete',
    {
      schema: { hide: true, params: WebhookParams, body: FormBody },
      config: { ...CONNECT, operation: 'delete_webhook' },
    },
    async (request, reply) => {
      const session = await signedIn(request, reply);
      if (!session || !kit.checkForm(request, reply, session)) return reply;
      try {
        unwrap(await webhooks.remove(webCall(request, session), request.params.id));
      } catch (error) {
        return sendRefusal(kit, request, reply, session, error);
      }
      return reply.redirect('/connect#webhooks', 303);
    },
  );

  /** The page of one endpoint: its state, its deliveries (newest first, 20 a page), Replay. */
  async function endpointView(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    id: string,
    opts: { page?: number; notice?: Html; status?: number; replay?: { from: string; error?: string } } = {},
  ): Promise<FastifyReply> {
    const call = webCall(request, session);
    let body: Html;
    try {
      const [endpoint, deliveries] = await Promise.all([
        webhooks.get(call, id).then(unwrap),
        webhooks.deliveries(call, id, { page: opts.page ?? 1, per_page: DELIVERIES_PER_PAGE }).then(unwrap),
      ]);
      const csrf = kit.csrfField(request, reply, session);
      body = endpointPage({
        endpoint,
        deliveries,
        csrf,
        notice: opts.notice ?? html``,
        ...(opts.replay ? { replay: opts.replay } : {}),
      });
    } catch (error) {
      return sendRefusal(kit, request, reply, session, error);
    }
    return kit.send(reply, {
      status: opts.status ?? 200,
      title: 'Webhook endpoint',
      body,
      session,
      request,
      wide: true,
    });
  }

  app.get(
    '/connect/webhooks/:id',
    { schema: { hide: true, params: WebhookParams, querystring: EndpointQuery } },
    async (request, reply) => {
      const session = await kit.signedIn(request, reply);
      if (!session) return reply;
      const { page, done, queued } = request.query;
      return endpointView(request, reply, session, request.params.id, {
        ...(page ? { page } : {}),
        notice: doneNotice(done, queued),
      });
    },
  );

  app.post(
    '/connect/webhooks/:id/deliveries/:deliveryId/redeliver',
    {
      schema: { hide: true, params: DeliveryParams, body: FormBody },
      config: { ...ENDPOINT, operation: 'redeliver_webhook' },
    },
    async (request, reply) => {
      const session = await kit.signedIn(request, reply, `/connect/webhooks/${request.params.id}`);
      if (!session || !kit.checkForm(request, reply, session)) return reply;
      const { id, deliveryId } = request.params;
      try {
        unwrap(await webhooks.redeliver(webCall(request, session), id, deliveryId));
      } catch (error) {
        return sendRefusal(kit, request, reply, session, error);
      }
      return reply.redirect(`/connect/webhooks/${id}?done=redelivered`, 303);
    },
  );

  app.post(
    '/connect/webhooks/:id/replay',
    {
      schema: { hide: true, params: WebhookParams, body: ReplayFormBody },
      config: { ...ENDPOINT, operation: 'replay_webhook' },
    },
    async (request, reply) => {
      const { id } = request.params;
      const session = await kit.signedIn(request, reply, `/connect/webhooks/${id}`);
      if (!session || !kit.checkForm(request, reply, session)) return reply;
      const given = request.body.from ?? '';
      const from = formTimeAsRfc3339(given);
      if (from === null) {
        return endpointView(request, reply, session, id, {
          status: 400,
          replay: { from: given, error: 'Give the time to replay from, as a date and a time (UTC).' },
        });
      }
      let queued: number;
      try {
        ({ queued } = unwrap(await webhooks.replay(webCall(request, session), id, { from })));
      } catch (error) {
        if (isDomainError(error) && error.code === 'invalid_request') {
          const first = error.errors?.[0];
          const problem = first && 'message' in first ? first.message : 'is not valid';
          return endpointView(request, reply, session, id, {
            status: 400,
            replay: { from: given, error: `The time to replay from ${problem}.` },
          });
        }
        return sendRefusal(kit, request, reply, session, error);
      }
      return reply.redirect(`/connect/webhooks/${id}?done=replayed&queued=${queued}`, 303);
    },
  );
};
