import type { FastifyPluginAsync } from 'fastify';
import { ActivitySource } from '../../../domain/activity/events.ts';
import type { Actor } from '../../../domain/event.ts';
import { PER_PAGE_MAX } from '../../../domain/vocabulary.ts';
import { type ActivityListQuery, type ActivityOut, ActivityQuery } from '../../application/activity.ts';
import { unwrap } from '../../application/call.ts';
import type { Application } from '../../application/index.ts';
import type { Listed } from '../../application/lists.ts';
import type { SiteOut } from '../../application/sites.ts';
import { type Html, html, raw } from '../http/html.ts';
import { webCall } from './call.ts';
import { PUT_BACK_OPERATION } from './editor.ts';
import { installPageHeaders, type WebKit } from './kit.ts';
import { sendRefusal } from './refusal.ts';

/*
 * The activity log (`/activity`): the account's calls (API, assistants, these pages) and the content
 * pipeline's changes, newest first, with the API's filters as a GET form (from, to, source, site,
 * article) and pages. A record that created a revision links to it; sites and articles link to their
 * pages. Filters the API would refuse bring the form back with each field's error.
 */

/** The filter fields, as the API names them, with their labels. */
const FIELDS = {
  from: 'From',
  to: 'To',
  source: 'Source',
  site_id: 'Site',
  article_id: 'Article id',
} as const;
type Field = keyof typeof FIELDS;
/** What the page reads from its query string: the filters and the paging. */
const KEYS = [...(Object.keys(FIELDS) as Field[]), 'page', 'per_page'] as const;
type Key = (typeof KEYS)[number];
const LABELS: Record<Key, string> = { ...FIELDS, page: 'Page', per_page: 'Per page' };

/** The query as the person sent it (trimmed, empty fields left out): what the form shows again. */
export type ActivityForm = Partial<Record<Key, string>>;

export type ReadFilters =
  | { ok: true; form: ActivityForm; query: ActivityListQuery }
  | { ok: false; form: ActivityForm; errors: Partial<Record<Key, string>> };

/**
 * Reads the page's query string with the API's rules (ActivityQuery): the list query, or each field's
 * first error. Empty fields are no filter; other parameters are ignored.
 */
export function readFilters(raw: Record<string, unknown>): ReadFilters {
  const form: ActivityForm = {};
  for (const key of KEYS) {
    const value = Array.isArray(raw[key]) ? raw[key][0] : raw[key];
    if (typeof value === 'string' && value.trim() !== '') form[key] = value.trim();
  }
  const parsed = ActivityQuery.safeParse(form);
  if (parsed.success) return { ok: true, form, query: parsed.data };
  const errors: Partial<Record<Key, string>> = {};
  for (const issue of parsed.error.issues) {
    const key = issue.path[0] as Key;
    errors[key] ??= issue.code === 'invalid_value' ? 'must be one of the choices' : issue.message;
  }
  return { ok: false, form, errors };
}

/** The page's address for these filters at page `page` (page 1 and empty fields left out). */
export function activityUrl(form: ActivityForm, page: number): string {
  const params = new URLSearchParams();
  for (const key of KEYS) {
    const value = key === 'page' ? (page > 1 ? String(page) : undefined) : form[key];
    if (value) params.set(key, value);
  }
  const query = params.toString();
  return query ? `/activity?${query}` : '/activity';
}

const SOURCES: Record<ActivitySource, string> = {
  api: 'API',
  mcp: 'Assistant (MCP)',
  editor: 'Web editor',
  web: 'Web pages',
  rewrite: 'Content pipeline',
  system: 'Service',
};

const ACTOR_TYPES: Record<Actor['type'], string> = {
  api_key: 'API key',
  oauth_client: 'assistant',
  user: 'person',
  staff: 'support staff',
  system: 'service',
};

const STATUSES: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'Done',
  400: 'Bad request',
  401: 'Not signed in',
  403: 'Not allowed',
  404: 'Not found',
  409: 'Conflict',
  412: 'Changed since',
  413: 'Too large',
  422: 'Refused',
  429: 'Limit reached',
  499: 'Client left',
  500: 'Failed',
  503: 'Unavailable',
};

/**
 * A record's source as the log names it: `mcp` as "Assistant (MCP)". What support staff did (source
 * `system`, a `staff` actor: their views and searches) is "Support", the service's own work "Service".
 */
export function sourceLabel(source: string, actor?: { type: string }): string {
  if (source === 'system' && actor?.type === 'staff') return 'Support';
  return SOURCES[source as ActivitySource] ?? source;
}

/** Who made a call: the name, then what kind of actor in muted text ("API key", "support staff"). */
export function actorLabel(actor: { type: string; name: string }): Html {
  return html`${actor.name} <span class="muted">${ACTOR_TYPES[actor.type as Actor['type']] ?? actor.type}</span>`;
}

/** A call's status with its meaning: `412 Changed since`. */
export function statusLabel(status: number): string {
  return `${status} ${STATUSES[status] ?? ''}`.trimEnd();
}

/** Operations whose name does not read as what was done. */
const OPERATION_LABELS: Record<string, string> = {
  [PUT_BACK_OPERATION]: 'Put protected links back',
};

/** `update_article` as "Update article", `articles.preview` as "Articles preview". */
export function operationLabel(operation: string): string {
  const label = OPERATION_LABELS[operation];
  if (label) return label;
  const words = operation.replaceAll(/[_.]/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** `2026-11-05T14:00:03.123Z` as `2026-11-05 14:00:03`. */
function shortTime(at: string): string {
  return at.slice(0, 19).replace('T', ' ');
}

type Names = { sites: Map<string, string>; articles: Map<string, string> };

function recordRow(r: ActivityOut, names: Names): Html {
  const siteName = r.site_id ? names.sites.get(r.site_id) : undefined;
  const title = r.article_id ? names.articles.get(r.article_id) : undefined;
  const site = r.site_id
    ? siteName !== undefined
      ? html`<a href="/sites/${encodeURIComponent(r.site_id)}">${siteName}</a>`
      : html`<code>${r.site_id}</code>`
    : html`<span class="muted">—</span>`;
  const article = r.article_id
    ? title !== undefined
      ? html`<a href="/articles/${encodeURIComponent(r.article_id)}">${title}</a>`
      : html`<code>${r.article_id}</code>`
    : html`<span class="muted">—</span>`;
  // A revision links to its page and, from the second on, to its comparison with the one before.
  const articlePath = r.article_id ? `/articles/${encodeURIComponent(r.article_id)}` : null;
  const revision =
    r.revision !== null && articlePath
      ? html`<a href="${articlePath}/revisions/${r.revision}">Revision ${r.revision}</a>${
          r.revision > 1
            ? html` <a class="compare-link" href="${articlePath}/revisions/compare?from=${r.revision - 1}&amp;to=${r.revision}">Changes<span class="visually-hidden"> from revision ${r.revision - 1} to ${r.revision}</span></a>`
            : ''
        }`
      : html`<span class="muted">—</span>`;
  const refused = r.status >= 400;
  return html`<tr>
<td data-label="Time (UTC)"><time datetime="${r.at}">${shortTime(r.at)}</time></td>
<td data-label="Source">${sourceLabel(r.source, r.actor)}</td>
<td data-label="Who"><span>${actorLabel(r.actor)}</span></td>
<td data-label="Operation">${operationLabel(r.operation)}</td>
<td data-label="Site">${site}</td>
<td data-label="Article">${article}</td>
<td data-label="Revision">${revision}</td>
<td data-label="Status"><span class="${refused ? 'refused' : 'ok'}">${statusLabel(r.status)}</span></td>
<td data-label="Request id">${r.request_id ? html`<code>${r.request_id}</code>` : html`<span class="muted">—</span>`}${r.client_request_id ? html` <span class="muted">(yours: <code>${r.client_request_id}</code>)</span>` : ''}</td>
</tr>`;
}

function filterForm(form: ActivityForm, errors: Partial<Record<Key, string>>, sites: SiteOut[]): Html {
  const described = (key: Field): Html =>
    errors[key] ? raw(` aria-invalid="true" aria-describedby="error-${key}"`) : raw('');
  const fieldError = (key: Field): Html | string =>
    errors[key] ? html`<p class="field-error" id="error-${key}">${FIELDS[key]} ${errors[key]}</p>` : '';
  const selected = (on: boolean): Html => (on ? raw(' selected') : raw(''));
  const siteKnown = form.site_id === undefined || sites.some((s) => s.id === form.site_id);
  return html`<form class="filters" method="get" action="/activity" aria-label="Filters">
<div><label for="from">${FIELDS.from}</label>
<input type="date" id="from" name="from" value="${form.from ?? ''}"${described('from')}>${fieldError('from')}</div>
<div><label for="to">${FIELDS.to}</label>
<input type="date" id="to" name="to" value="${form.to ?? ''}"${described('to')}>${fieldError('to')}</div>
<div><label for="source">${FIELDS.source}</label>
<select id="source" name="source"${described('source')}><option value="">Any source</option>
${ActivitySource.options.map((s) => html`<option value="${s}"${selected(form.source === s)}>${SOURCES[s]}</option>`)}
${form.source !== undefined && !(ActivitySource.options as readonly string[]).includes(form.source) ? html`<option value="${form.source}" selected>${form.source}</option>` : ''}
</select>${fieldError('source')}</div>
<div><label for="site_id">${FIELDS.site_id}</label>
<select id="site_id" name="site_id"${described('site_id')}><option value="">Any site</option>
${sites.map((s) => html`<option value="${s.id}"${selected(form.site_id === s.id)}>${s.name}</option>`)}
${siteKnown ? '' : html`<option value="${form.site_id}" selected>${form.site_id}</option>`}
</select>${fieldError('site_id')}</div>
<div><label for="article_id">${FIELDS.article_id}</label>
<input type="text" id="article_id" name="article_id" value="${form.article_id ?? ''}" spellcheck="false" autocomplete="off"${described('article_id')}>${fieldError('article_id')}</div>
${form.per_page ? html`<input type="hidden" name="per_page" value="${form.per_page}">` : ''}
<div class="actions"><button class="primary" type="submit">Show</button> <a href="/activity">Clear filters</a></div>
</form>`;
}

/** The form's filters without its paging. */
function filtersOnly(form: ActivityForm): ActivityForm {
  const { page: _page, per_page: _perPage, ...rest } = form;
  return rest;
}

function pager(form: ActivityForm, meta: Listed<ActivityOut>['meta']): Html {
  const { page, total_pages, total } = meta;
  const newer = page > 1 ? html`<a rel="prev" href="${activityUrl(form, page - 1)}">← Newer</a>` : '';
  const older =
    page < total_pages ? html`<a rel="next" href="${activityUrl(form, page + 1)}">Older →</a>` : '';
  return html`<nav class="pager" aria-label="Pages">${newer}
<span>Page ${page} of ${Math.max(total_pages, 1)} · ${total} ${total === 1 ? 'record' : 'records'}</span>
${older}</nav>`;
}

export const activityPage: FastifyPluginAsync<{ kit: WebKit; application: Application }> = async (
  app,
  { kit, application },
) => {
  installPageHeaders(app);

  app.get('/activity', { schema: { hide: true } }, async (request, reply) => {
    const session = await kit.signedIn(request, reply);
    if (!session) return reply;
    const call = webCall(request, session);
    const filters = readFilters(request.query as Record<string, unknown>);
    let sites: SiteOut[];
    let list: Listed<ActivityOut> | null = null;
    let names: Names = { sites: new Map(), articles: new Map() };
    try {
      sites = unwrap(await application.sites.list(call, { page: 1, per_page: PER_PAGE_MAX })).data;
      if (filters.ok) {
        list = unwrap(await application.activity.list(call, filters.query));
        names = unwrap(await application.activity.subjects(call, list.data));
      }
    } catch (error) {
      return sendRefusal(kit, request, reply, session, error);
    }
    const errors = filters.ok ? {} : filters.errors;
    const pageError = errors.page ?? errors.per_page;
    const results = list
      ? list.data.length === 0
        ? html`<p class="muted" id="no-records">${
            list.meta.total === 0
              ? 'No activity matches these filters.'
              : html`There are no records on this page. <a href="${activityUrl(filters.form, 1)}">Go to the first page</a>.`
          }</p>`
        : html`<div class="log-scroll"><table class="activity-log">
<caption>Records ${(list.meta.page - 1) * list.meta.per_page + 1} to ${(list.meta.page - 1) * list.meta.per_page + list.data.length} of ${list.meta.total}, newest first</caption>
<thead><tr><th scope="col">Time (UTC)</th><th scope="col">Source</th><th scope="col">Who</th><th scope="col">Operation</th><th scope="col">Site</th><th scope="col">Article</th><th scope="col">Revision</th><th scope="col">Status</th><th scope="col">Request id</th></tr></thead>
<tbody>
${list.data.map((r) => recordRow(r, names))}
</tbody></table></div>
${pager(filters.form, list.meta)}`
      : '';
    const body = html`<div class="activity-page"><div class="card">
<h1>Activity</h1>
<p class="muted">Every call to your account through the API, assistants (MCP) and these pages, refused ones included, and the changes of the content pipeline. A record that made a new revision links to it and to its changes from the revision before.</p>
${
  filters.ok
    ? ''
    : html`<p class="error" role="alert">These filters cannot be used: ${KEYS.flatMap((key) =>
        errors[key] ? [`${LABELS[key]} ${errors[key]}`] : [],
      ).join('; ')}.</p>`
}
${pageError ? html`<p><a href="${activityUrl(filtersOnly(filters.form), 1)}">Show the first page with these filters</a></p>` : ''}
<h2>Filters</h2>
${filterForm(filters.form, errors, sites)}
</div>
<section class="card activity-results" aria-labelledby="records-heading">
<h2 id="records-heading">Records</h2>
${list ? results : html`<p class="muted">Correct the filters above to see records.</p>`}
</section></div>`;
    return kit.send(reply, {
      status: filters.ok ? 200 : 400,
      title: 'Activity',
      body,
      session,
      request,
      wide: true,
    });
  });
};
