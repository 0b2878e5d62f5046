import { WEBHOOK_ENDPOINTS_MAX, WEBHOOK_EVENT_TYPES } from '../../../domain/vocabulary.ts';
import type { Listed } from '../../application/lists.ts';
import type {
  NewWebhookEndpointOut,
  WebhookDeliveryOut,
  WebhookEndpointOut,
} from '../../application/webhooks.ts';
import { WEBHOOK_DESCRIPTION_MAX, WEBHOOK_URL_MAX } from '../../application/webhooks.ts';
import { type Html, html, raw } from '../http/html.ts';

/*
 * The webhook parts of the Connect Site page (connect-site.ts has the routes): the Webhooks section
 * of `/connect` (the endpoints, their state, the form to add one, the secret once) and the page of one
 * endpoint (`/connect/webhooks/{id}`: its deliveries with Redeliver, and Replay). Plain forms, each a
 * POST with the session's CSRF field; no script.
 */

/** What each event type means to a person, for the checkboxes and the lists. */
export const EVENT_LABELS: Record<(typeof WEBHOOK_EVENT_TYPES)[number], string> = {
  'article.created': 'An article is created',
  'article.updated': 'An article changes (title, body, restore, status)',
  'article.featured_image_replaced': "An article's featured image is replaced",
  'article.published': 'An article is published',
  'backlink.acquired': 'A backlink is acquired',
  'report.ready': "A site's monthly report is ready",
};

/** Why an endpoint is disabled, in words (CONTRACT "Webhooks"). */
export function disabledReasonText(reason: string | null): string {
  switch (reason) {
    case 'gone':
      return 'It answered 410 Gone, which asks us to stop sending.';
    case 'failing':
      return 'Every delivery to it failed for 3 days.';
    case 'account':
      return 'It was turned off on this account.';
    default:
      return 'It is turned off.';
  }
}

/** A time as the page shows it: `2026-11-20 12:00 UTC`. Pure. */
export function shownTime(rfc3339: string | null): string {
  return rfc3339 ? `${rfc3339.slice(0, 16).replace('T', ' ')} UTC` : '—';
}

/**
 * A `datetime-local` field's value (`2026-11-05T14:00`, seconds optional), read as UTC, as an RFC 3339
 * time; null for anything else. Pure.
 */
export function formTimeAsRfc3339(value: string): string | null {
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2})?(\.\d{1,3})?$/.exec(value.trim());
  if (!match) return null;
  return `${match[1]}T${match[2]}${match[3] ?? ':00'}Z`;
}

/** The values of the add form, kept when it is refused, and what was refused (field and message). */
export type WebhookFormState = {
  url: string;
  events: readonly string[];
  description: string;
  error?: { field: 'url' | 'events' | 'description' | null; message: string };
};

const EMPTY_FORM: WebhookFormState = { url: '', events: [], description: '' };

/** A form field's id for an event type's checkbox. */
const eventFieldId = (type: string): string =>
  `webhook-event-${type.replaceAll('.', '-').replaceAll('_', '-')}`;
/** The form field name of an event type's checkbox (the form parser keeps one value per name). */
export const eventFieldName = (type: string): string => `event.${type}`;
/** The field a refusal of the add form links to: the URL, the first event's checkbox, the description. */
const FIELD_IDS = {
  url: 'webhook-url',
  events: eventFieldId(WEBHOOK_EVENT_TYPES[0]),
  description: 'webhook-description',
} as const;

/** The state of an endpoint: Enabled, or Disabled since when and why. */
function endpointState(e: WebhookEndpointOut): Html {
  if (e.enabled) return html`<span class="site-status site-status-published">Enabled</span>`;
  return html`<span class="site-status">Disabled</span> <span class="muted">since ${shownTime(e.disabled_at)}</span>
<p class="webhook-reason">${disabledReasonText(e.disabled_reason)} Its deliveries wait until you enable it.</p>`;
}

/** The Enable or Disable button of an endpoint, and where it comes back to. */
function toggleForm(e: WebhookEndpointOut, csrf: Html, back: 'list' | 'endpoint'): Html {
  const action = e.enabled ? 'disable' : 'enable';
  const label = e.enabled ? 'Disable' : 'Enable';
  return html`<form method="post" action="/connect/webhooks/${e.id}/${action}">${csrf}<input type="hidden" name="back" value="${back}"><button type="submit"${e.enabled ? '' : raw(' class="primary"')} aria-label="${label} ${e.url}">${label}</button></form>`;
}

/** Where the Copy buttons' script is served (scripts.ts): the service's own, on the pages that show a secret. */
export const COPY_SCRIPT_PATH = '/web/copy.js';

/**
 * A secret shown once: a read-only field, to select and copy by hand, and a Copy button, hidden until
 * the service's script (COPY_SCRIPT_PATH) shows it and makes it work; it says in words what it did.
 */
export function secretField(id: string, label: string, value: string): Html {
  return html`<label for="${id}">${label}</label>
<div class="copy-field"><input type="text" id="${id}" value="${value}" readonly spellcheck="false" autocomplete="off" autocapitalize="off">
<button type="button" data-copy="${id}" data-copy-status="${id}-status" hidden>Copy</button></div>
<p class="muted copy-status" id="${id}-status" aria-live="polite"></p>`;
}

/** The card with the new endpoint's secret, shown once after it is added. */
export function newEndpointNotice(endpoint: Pick<NewWebhookEndpointOut, 'url' | 'secret'>): Html {
  return html`<div class="card notice" role="status" id="new-webhook">
<h2>Your new webhook endpoint</h2>
<p>Deliveries to <code>${endpoint.url}</code> are signed with this secret. Copy it now: it will not be shown again.</p>
${secretField('new-webhook-secret', 'Signing secret', endpoint.secret)}
<script src="${COPY_SCRIPT_PATH}" defer></script>
</div>`;
}

/** The Webhooks section of `/connect`: the endpoints, their state and actions, and the form to add one. */
export function webhooksSection(
  endpoints: readonly WebhookEndpointOut[],
  csrf: Html,
  form?: WebhookFormState,
): Html {
  const state = form ?? EMPTY_FORM;
  const error = state.error;
  const invalid = (field: string): Html =>
    error?.field === field ? raw(' aria-invalid="true" aria-describedby="webhook-error"') : raw('');
  const disabled = endpoints.filter((e) => !e.enabled);
  const full = endpoints.length >= WEBHOOK_ENDPOINTS_MAX;
  return html`<div class="card" id="webhooks">
<h2>Webhooks</h2>
<p>The service sends your account's events (an article published, a backlink acquired, a monthly report ready, …) to these addresses as signed HTTP POSTs. At most ${WEBHOOK_ENDPOINTS_MAX} endpoints.</p>
${
  disabled.length > 0
    ? html`<p class="error" id="webhooks-disabled" role="status">${disabled.length === 1 ? 'One endpoint is disabled' : `${disabled.length} endpoints are disabled`}: nothing is sent to it until you enable it. See why below.</p>`
    : ''
}
${
  endpoints.length === 0
    ? html`<p class="muted" id="no-webhooks">No webhook endpoints yet.</p>`
    : html`<table id="webhook-endpoints" class="site-table"><thead><tr><th scope="col">Endpoint</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead><tbody>
${endpoints.map(
  (
    e,
  ) => html`<tr id="webhook-${e.id}"><td data-label="Endpoint"><a href="/connect/webhooks/${e.id}"><code>${e.url}</code></a>${e.description ? html`<br><span class="muted">${e.description}</span>` : ''}</td>
<td data-label="Events">${e.events.join(', ')}</td>
<td data-label="State"><div>${endpointState(e)}</div></td>
<td data-label="Actions"><div class="actions">${toggleForm(e, csrf, 'list')}<form method="post" action="/connect/webhooks/${e.id}/delete">${csrf}<button type="submit" aria-label="Delete ${e.url}">Delete</button></form></div></td></tr>`,
)}
</tbody></table>`
}
<h3>Add an endpoint</h3>
${error ? html`<p class="error" role="alert" id="webhook-error">${error.field ? html`<a href="#${FIELD_IDS[error.field]}">${error.message}</a>` : error.message}</p>` : ''}
${
  full
    ? html`<p class="muted" id="webhooks-full">This account has ${WEBHOOK_ENDPOINTS_MAX} endpoints, the most it may have: delete one to add another.</p>`
    : html`<form method="post" action="/connect/webhooks#webhook-error" id="add-webhook">
${csrf}
<label for="webhook-url">URL</label>
<input type="text" inputmode="url" autocomplete="off" spellcheck="false" id="webhook-url" name="url" maxlength="${WEBHOOK_URL_MAX}" required placeholder="https://hooks.example.com/content" value="${state.url}"${invalid('url')}>
<fieldset id="webhook-events"${invalid('events')}>
<legend>Events to send</legend>
${WEBHOOK_EVENT_TYPES.map(
  (type) =>
    html`<label class="checkbox" for="${eventFieldId(type)}"><input type="checkbox" id="${eventFieldId(type)}" name="${eventFieldName(type)}" value="1"${state.events.includes(type) ? raw(' checked') : ''}> ${EVENT_LABELS[type]} <code>${type}</code></label>`,
)}
</fieldset>
<label for="webhook-description">Description (optional)</label>
<input type="text" id="webhook-description" name="description" maxlength="${WEBHOOK_DESCRIPTION_MAX}" placeholder="Publishing notices for the team chat" value="${state.description}"${invalid('description')}>
<div class="actions"><button class="primary" type="submit">Add endpoint</button></div>
</form>`
}
</div>`;
}

/** What a finished action says on the endpoint's page (`?done=`). */
export function doneNotice(done: string | undefined, queued: number | undefined): Html {
  const text =
    done === 'redelivered'
      ? 'The delivery is queued again: it goes out after the endpoint’s pending deliveries.'
      : done === 'replayed'
        ? `${queued ?? 0} ${queued === 1 ? 'event is' : 'events are'} queued again.`
        : done === 'enabled'
          ? 'The endpoint is enabled: its pending deliveries go out in their order.'
          : done === 'disabled'
            ? 'The endpoint is disabled: deliveries wait until you enable it.'
            : null;
  return text ? html`<p class="notice" role="status" id="webhook-done">${text}</p>` : html``;
}

/** A delivery's last answer: the status code, or the error when none came. */
function lastAnswer(d: WebhookDeliveryOut): Html {
  if (d.last_status_code !== null) {
    return html`${d.last_status_code}${d.last_error ? html` <span class="muted">${d.last_error}</span>` : ''}`;
  }
  return d.last_error ? html`<span class="muted">${d.last_error}</span>` : html`—`;
}

const STATUS_TEXT: Record<WebhookDeliveryOut['status'], string> = {
  pending: 'Pending',
  succeeded: 'Delivered',
  failed: 'Failed',
};

/** The page of one endpoint: its facts and state, its deliveries (with Redeliver), and Replay. */
export function endpointPage(opts: {
  endpoint: WebhookEndpointOut;
  deliveries: Listed<WebhookDeliveryOut>;
  csrf: Html;
  notice: Html;
  replay?: { from: string; error?: string };
}): Html {
  const { endpoint: e, deliveries, csrf } = opts;
  const { page, total_pages: pages, total } = deliveries.meta;
  const base = `/connect/webhooks/${e.id}`;
  const replayError = opts.replay?.error;
  return html`<nav class="site-crumbs" aria-label="Breadcrumb"><ol><li><a href="/connect">Connect Site</a></li><li><a href="/connect#webhooks">Webhooks</a></li></ol></nav>
${opts.notice}
<div class="card">
<h1>Webhook endpoint</h1>
<dl>
<dt>URL</dt><dd><code id="endpoint-url">${e.url}</code></dd>
<dt>Description</dt><dd>${e.description ?? html`<span class="muted">none</span>`}</dd>
<dt>Events</dt><dd>${e.events.join(', ')}</dd>
<dt>State</dt><dd id="endpoint-state">${endpointState(e)}</dd>
<dt>Added</dt><dd>${shownTime(e.created_at)}</dd>
</dl>
<div class="actions">${toggleForm(e, csrf, 'endpoint')}</div>
</div>
<div class="card" id="deliveries">
<h2>Deliveries</h2>
${
  deliveries.data.length === 0
    ? html`<p class="muted" id="no-deliveries">${page > 1 ? 'No deliveries on this page.' : 'Nothing has been sent to this endpoint yet.'}</p>`
    : html`<div class="table-scroll"><table id="webhook-deliveries" class="site-table"><caption>${total} ${total === 1 ? 'delivery' : 'deliveries'}, newest first</caption>
<thead><tr><th scope="col">Time (UTC)</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Response</th><th scope="col">Duration</th><th scope="col">Actions</th></tr></thead><tbody>
${deliveries.data.map(
  (
    d,
  ) => html`<tr id="delivery-${d.id}"><td data-label="Time (UTC)"><time datetime="${d.created_at}">${shownTime(d.created_at)}</time></td>
<td data-label="Event"><span><code>${d.event_type}</code>${d.source === 'live' ? '' : html` <span class="muted">(${d.source})</span>`}</span></td>
<td data-label="Status"><span>${STATUS_TEXT[d.status]}${d.status === 'pending' && d.attempts > 0 ? html` <span class="muted">next ${shownTime(d.next_attempt_at)}</span>` : ''}</span></td>
<td data-label="Attempts">${d.attempts}</td>
<td data-label="Response"><span>${lastAnswer(d)}</span></td>
<td data-label="Duration">${d.last_duration_ms === null ? '—' : `${d.last_duration_ms} ms`}</td>
<td data-label="Actions"><form method="post" action="${base}/deliveries/${d.id}/redeliver">${csrf}<button type="submit" aria-label="Redeliver ${d.event_type} of ${shownTime(d.created_at)}">Redeliver</button></form></td></tr>`,
)}
</tbody></table></div>`
}
${
  pages > 1
    ? html`<nav class="pager" aria-label="Pages of deliveries">${page > 1 ? html`<a href="${base}?page=${page - 1}">Newer</a>` : html`<span></span>`}<span>Page ${page} of ${pages}</span>${page < pages ? html`<a href="${base}?page=${page + 1}">Older</a>` : html`<span></span>`}</nav>`
    : ''
}
</div>
<div class="card" id="replay">
<h2>Replay</h2>
<p>Send every event of this endpoint's types again, from a time on, after its pending deliveries. Each keeps its message id (<code>webhook-id</code>): a receiver that deduplicates by it skips those it has already handled.</p>
${replayError ? html`<p class="error" role="alert" id="replay-error">${replayError}</p>` : ''}
<form method="post" action="${base}/replay" class="filters">
${csrf}
<div><label for="replay-from">From (UTC)</label>
<input type="datetime-local" id="replay-from" name="from" step="1" required value="${opts.replay?.from ?? ''}"${replayError ? raw(' aria-invalid="true" aria-describedby="replay-error"') : ''}></div>
<div class="actions"><button class="primary" type="submit">Replay events</button></div>
</form>
</div>`;
}
