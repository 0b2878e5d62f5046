import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { STAFF_QUERY_MAX } from '../../../domain/activity/events.ts';
import { isDomainError } from '../../../domain/errors.ts';
import { ID_PATTERN, ID_RULE } from '../../../domain/input.ts';
import { PAGE_MAX, PER_PAGE_DEFAULT } from '../../../domain/vocabulary.ts';
import { type Outcome, type RequestIds, unwrap } from '../../application/call.ts';
import { cleanText, revisionNumber } from '../../application/contract.ts';
import type {
  AccountName,
  StaffAuditEntry,
  StaffMember,
  StaffTimeline,
  TimelineEntry,
  TimelineQuery,
} from '../../application/staff.ts';
import { type Html, html } from '../http/html.ts';
import { requestIdsOf } from '../http/request-ids.ts';
import { actorLabel, operationLabel, sourceLabel, statusLabel } from './activity.ts';
import { changes, originLabel, storedBody } from './articles.ts';
import { asOfForm, asOfRefusal, asOfView, inFuture, notYet, readAsOf } from './as-of.ts';
import { csvText } from './csv.ts';
import { installPageHeaders } from './kit.ts';
import type { PagesDeps } from './pages.ts';
import { sendRefusal } from './refusal.ts';
import type { StaffSession } from './sessions.ts';

/*
 * The support staff's area (CONTRACT "Web app": /staff, /staff/accounts/{id}, /staff/articles/{id}):
 * find an account, read its timeline (revisions and activity interleaved) or an article's, export either
 * as CSV or JSON; /staff/audit lists what staff searched for and viewed. Read-only: no page here has a
 * form that changes anything, and a staff session is not an account holder's session, so every account
 * page and form refuses it. Every view of an account, and every search that lists it, is recorded in
 * that account's activity log by the application.
 */

const EXPORT_MAX = 10_000;
const date = z.iso
  .date()
  .optional()
  .or(z.literal('').transform(() => undefined));
const TimelineFilters = z.object({
  from: date,
  to: date,
  kind: z
    .enum(['revision', 'activity'])
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /** "1": the staff's own looks listed too (they are left out by default). */
  staff_looks: z
    .literal('1')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  page: z.coerce.number().int().min(1).max(PAGE_MAX).default(1),
  format: z.enum(['html', 'csv', 'json']).default('html'),
});
const IdParams = z.object({ id: z.string().regex(ID_PATTERN, ID_RULE) });
const RevisionParams = IdParams.extend({ n: revisionNumber });
/** What staff search by: text as the API takes it (no NUL, no control character, no lone surrogate). */
const SearchQuery = z.object({ q: cleanText(z.string().max(STAFF_QUERY_MAX), { lines: false }).optional() });
const AuditQuery = TimelineFilters.pick({ page: true, format: true });

const staffArticlePath = (id: string): string => `/staff/articles/${encodeURIComponent(id)}`;

/**
 * An account as the staff pages name it: its name (linking to its staff page), then its email and id
 * in muted text; an account gone since (no name) by its id alone.
 */
function accountRef(account: AccountName): Html {
  const href = `/staff/accounts/${encodeURIComponent(account.id)}`;
  return account.name === ''
    ? html`<a href="${href}"><code>${account.id}</code></a>`
    : html`<a href="${href}">${account.name}</a> <span class="muted">(${account.email}, <code>${account.id}</code>)</span>`;
}

export const staffPages: FastifyPluginAsync<PagesDeps> = async (plain, { kit, application, diff, heavy }) => {
  const app = plain.withTypeProvider<ZodTypeProvider>();
  installPageHeaders(app);
  const { support } = application;

  /** The staff member of the request, or null after answering (sign-in, or 403 for an account holder). */
  async function staffOf(request: FastifyRequest, reply: FastifyReply): Promise<StaffSession | null> {
    const staff = await kit.sessions.currentStaff(request);
    if (staff) return staff;
    const holder = await kit.sessions.current(request);
    if (holder) {
      kit.send(reply, {
        status: 403,
        title: 'Support staff only',
        session: holder,
        request,
        body: html`<div class="card"><h1>Support staff only</h1><p>These pages are for the service's support staff.</p></div>`,
      });
      return null;
    }
    reply.redirect(kit.signInUrl(request.url), 303);
    return null;
  }
  const member = (s: StaffSession): StaffMember => s.staff;

  app.get('/staff', { schema: { hide: true, querystring: SearchQuery } }, async (request, reply) => {
    const staff = await staffOf(request, reply);
    if (!staff) return reply;
    const q = (request.query.q ?? '').trim();
    const found = q ? unwrap(await support.search(member(staff), q, requestIdsOf(request))) : [];
    const results = q
      ? found.length === 0
        ? html`<p>No account matches <strong>${q}</strong>.</p>`
        : html`<table class="staff-results"><caption>Accounts matching ${q}</caption><thead><tr><th scope="col">Account</th><th scope="col">Email</th><th scope="col">Matched by</th></tr></thead><tbody>
${found.map((a) => html`<tr><td><a href="/staff/accounts/${a.id}">${a.name}</a></td><td>${a.email}</td><td>${a.matched}</td></tr>`)}
</tbody></table>`
      : '';
    return kit.send(reply, {
      title: 'Support',
      session: null,
      staff,
      request,
      wide: true,
      body: html`<div class="card"><h1>Find an account</h1>
<form method="get" action="/staff" role="search">
<label for="q">Email, site domain, article id or request id</label>
<input type="text" id="q" name="q" value="${q}" autocomplete="off">
<div class="actions"><button class="primary" type="submit">Search</button></div>
</form>
<p class="muted">Each search is kept in the <a href="/staff/audit">staff audit</a>, and every account it lists has it in its activity log.</p>
${results}</div>`,
    });
  });

  app.get('/staff/audit', { schema: { hide: true, querystring: AuditQuery } }, async (request, reply) => {
    const staff = await staffOf(request, reply);
    if (!staff) return reply;
    const { page, format } = request.query;
    const audit = unwrap(await support.audit(member(staff), paging(page, format !== 'html')));
    const { data, meta } = audit;
    if (format !== 'html') {
      return sendExport(reply, 'staff-audit', format, {
        columns: AUDIT_COLUMNS,
        rows: data.map(auditFlat),
        total: meta.total,
      });
    }
    const at = (p: number, fmt?: string): string =>
      `/staff/audit?${new URLSearchParams({ ...(p > 1 ? { page: String(p) } : {}), ...(fmt ? { format: fmt } : {}) })}`;
    return kit.send(reply, {
      title: 'Staff audit',
      session: null,
      staff,
      request,
      wide: true,
      body: html`<div class="card"><h1>Staff audit</h1>
<p>Support staff's searches for accounts and their views of accounts, newest first. Each is also in the activity log of every account it listed or opened.</p>
<p>Export: <a href="${at(1, 'csv')}">CSV</a> · <a href="${at(1, 'json')}">JSON</a> (${meta.total} entries)</p>
${
  data.length === 0
    ? html`<p>Nothing yet.</p>`
    : html`<table class="timeline"><thead><tr><th scope="col">Time (UTC)</th><th scope="col">Who</th><th scope="col">What</th><th scope="col">Request id</th></tr></thead><tbody>
${data.map((e) => auditRow(e, audit.accounts, audit.articles))}
</tbody></table>`
}
${meta.total_pages > 1 ? html`<nav aria-label="Pages" class="timeline-pages">${meta.page > 1 ? html`<a href="${at(meta.page - 1)}" rel="prev">Newer</a>` : ''} <span>Page ${meta.page} of ${meta.total_pages}</span> ${meta.page < meta.total_pages ? html`<a href="${at(meta.page + 1)}" rel="next">Older</a>` : ''}</nav>` : ''}</div>`,
    });
  });

  /**
   * A timeline page (an account's or an article's): the staff member, the filters, the view loaded
   * (and recorded) by the application, then the page or its export.
   */
  function timelineRoute<V extends StaffTimeline>(
    path: string,
    load: (staff: StaffMember, id: string, query: TimelineQuery, request: RequestIds) => Promise<Outcome<V>>,
    page: (view: V) => { name: string; title: string; head: Html },
  ): void {
    app.get(
      `${path}/:id`,
      { schema: { hide: true, params: IdParams, querystring: TimelineFilters } },
      async (request, reply) => {
        const staff = await staffOf(request, reply);
        if (!staff) return reply;
        const f = request.query;
        const exporting = f.format !== 'html';
        const query = {
          from: f.from,
          to: f.to,
          kind: f.kind,
          staffLooks: f.staff_looks === '1',
          ...paging(f.page, exporting),
        };
        try {
          const view = unwrap(await load(member(staff), request.params.id, query, requestIdsOf(request)));
          const { name, title, head } = page(view);
          if (f.format !== 'html') {
            const { data, meta } = view.timeline;
            return sendExport(reply, `${name}-${request.params.id}-timeline`, f.format, {
              columns: CSV_COLUMNS,
              rows: data.map(flat),
              total: meta.total,
            });
          }
          return kit.send(reply, {
            title,
            session: null,
            staff,
            request,
            wide: true,
            body: html`<div class="card">${head}
${timelineSection(`${path}/${request.params.id}`, f, view)}</div>`,
          });
        } catch (error) {
          return sendRefusal(kit, request, reply, null, error, staff);
        }
      },
    );
  }

  timelineRoute('/staff/accounts', support.account, ({ account, sites }) => ({
    name: 'account',
    title: `Account ${account.name}`,
    head: html`<h1>${account.name}</h1>
<dl><dt>Email</dt><dd>${account.email}</dd><dt>Account id</dt><dd><code>${account.id}</code></dd>
<dt>Opened</dt><dd>${when(account.created_at)}</dd>
<dt>Sites</dt><dd>${sites.length === 0 ? 'none' : sites.map((s, i) => html`${i > 0 ? ', ' : ''}${s.name} (${s.domain})`)}</dd></dl>
<p class="muted">Your view of this account is recorded in its activity log.</p>`,
  }));

  timelineRoute('/staff/articles', support.article, ({ article, account }) => ({
    name: 'article',
    title: `Article ${article.title}`,
    head: html`<h1>${article.title}</h1>
<dl><dt>Article id</dt><dd><code>${article.id}</code></dd>
<dt>Account</dt><dd id="article-account">${accountRef(account)}</dd></dl>
<p class="muted">Your view of this article is recorded in its account's activity log.</p>
<h2 id="as-of">View as of…</h2>
${asOfForm(`${staffArticlePath(article.id)}/as-of`, readAsOf({}))}`,
  }));

  /**
   * An article as it stood at an instant (`?date=&time=`, UTC), through `support.articleAsOf` (the
   * account holder's `getAsOf`, read-only, the view recorded): the same form and view as the account
   * holder's page, the featured image named rather than loaded, the revision linking to its staff page.
   */
  app.get(
    '/staff/articles/:id/as-of',
    { schema: { hide: true, params: IdParams } },
    async (request, reply) => {
      const staff = await staffOf(request, reply);
      if (!staff) return reply;
      const { id } = request.params;
      const path = staffArticlePath(id);
      const asked = readAsOf(request.query);
      try {
        let status = 200;
        let refusal: Html = html``;
        let invalid: 'date' | null = null;
        let view: Html | null = null;
        let facts: Html = html``;
        if (asked.kind === 'refused') {
          status = 400;
          refusal = asOfRefusal(asked.message);
        } else if (asked.kind === 'instant') {
          const outcome = await support.articleAsOf(member(staff), id, asked.instant, requestIdsOf(request));
          if (outcome.ok) {
            const { at, created, current, account } = outcome.value;
            facts = html`<dl><dt>Article</dt><dd><a href="${path}">${current.title}</a> <span class="muted">(now; its timeline)</span></dd>
<dt>Account</dt><dd>${accountRef(account)}</dd></dl>`;
            if (at) {
              view = asOfView(at, {
                revisionHref: (n) => `${path}/revisions/${n}`,
                currentHref: `${path}/revisions/${current.revision}`,
                compareHref: null,
                current: current.revision,
                images: false,
                body: storedBody,
              });
            } else {
              status = 404;
              refusal = notYet(asked.instant, created);
            }
          } else if (isDomainError(outcome.error) && outcome.error.code === 'invalid_request') {
            status = 400;
            invalid = 'date';
            refusal = inFuture(asked.instant, kit.now());
          } else {
            throw outcome.error;
          }
        }
        return kit.send(reply, {
          status,
          title: `View as of · article ${id}`,
          session: null,
          staff,
          request,
          wide: true,
          body: html`<div class="article-view">
<div class="card"><h1>View as of…</h1>
${facts}
${refusal}
${asOfForm(`${path}/as-of`, asked, { invalid })}
<p class="muted">Your view of this article is recorded in its account's activity log. Support staff cannot restore or change it.</p>
<div class="actions"><a class="button" href="${path}">Back to its timeline</a></div></div>
${view ? html`<section class="card as-of-view" aria-labelledby="as-of-title">${view}</section>` : ''}
</div>`,
        });
      } catch (error) {
        return sendRefusal(kit, request, reply, null, error, staff);
      }
    },
  );

  app.get(
    '/staff/articles/:id/revisions/:n',
    { schema: { hide: true, params: RevisionParams }, config: { heavyPage: true } },
    async (request, reply) => {
      const staff = await staffOf(request, reply);
      if (!staff) return reply;
      const { id, n } = request.params;
      try {
        await heavy.admit(request, reply);
        const { at, before, current, account } = unwrap(
          await support.revision(member(staff), id, n, requestIdsOf(request)),
        );
        const revisionHref = (r: number): string =>
          `/staff/articles/${encodeURIComponent(id)}/revisions/${r}`;
        const [fromBefore, toCurrent] = await Promise.all([
          before
            ? changes(diff, before, at, 'changes-before', {
                before: { label: `revision ${n - 1}`, href: revisionHref(n - 1) },
                after: { label: `revision ${n}`, href: `${revisionHref(n)}#text` },
              })
            : null,
          current.revision === n
            ? null
            : changes(diff, at, current, 'changes-current', {
                before: { label: `revision ${n}`, href: `${revisionHref(n)}#text` },
                after: { label: `revision ${current.revision}`, href: revisionHref(current.revision) },
              }),
        ]);
        return kit.send(reply, {
          title: `Revision ${n} of ${at.title}`,
          session: null,
          staff,
          request,
          wide: true,
          body: html`<div class="article-view">
<div class="card"><h1>Revision ${n} of “${at.title}”</h1>
<dl><dt>Made</dt><dd>${at.created_at} by ${at.actor.name} (${at.actor.type}), ${at.origin}</dd>
${at.reason ? html`<dt>Reason</dt><dd>${at.reason}</dd>` : ''}
${at.restored_from ? html`<dt>Restores</dt><dd>revision ${at.restored_from}</dd>` : ''}
<dt>Article</dt><dd><a href="/staff/articles/${id}">its timeline</a> · now at revision ${current.revision}</dd>
<dt>Account</dt><dd>${accountRef(account)}</dd></dl>
<p class="muted">Your view of this revision is recorded in its account's activity log. Support staff cannot restore or change it.</p></div>
<div class="card"><h2>Changes from revision ${n - 1}</h2>${fromBefore ?? html`<p class="muted">Revision 1 is the article as it was created.</p>`}</div>
<div class="card"><h2>From this revision to the current one (${current.revision})</h2>${toCurrent ?? html`<p class="muted">This is the current revision.</p>`}</div>
<div class="card"><h2 id="text">The text at revision ${n}</h2>${storedBody(at.body)}</div>
</div>`,
        });
      } catch (error) {
        return sendRefusal(kit, request, reply, null, error, staff);
      }
    },
  );
};

function paging(page: number, exporting: boolean): { page: number; perPage: number } {
  return exporting ? { page: 1, perPage: EXPORT_MAX } : { page, perPage: PER_PAGE_DEFAULT * 2 };
}

function when(at: Date): string {
  return `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

type Filters = z.infer<typeof TimelineFilters>;

/**
 * The filter form, the timeline as a table, paging, and the export links. The staff's own looks are
 * left out unless asked for, and the page says how many there are.
 */
function timelineSection(path: string, f: Filters, view: StaffTimeline): Html {
  const { timeline, names, staffLooks } = view;
  const keep = (over: Record<string, string | number | undefined>): string => {
    const params = new URLSearchParams();
    const filters = { from: f.from, to: f.to, kind: f.kind, staff_looks: f.staff_looks };
    for (const [k, v] of Object.entries({ ...filters, ...over })) {
      if (v !== undefined && v !== '') params.set(k, String(v));
    }
    const s = params.toString();
    return s ? `${path}?${s}` : path;
  };
  const { page, total_pages: pages, total } = timeline.meta;
  const looks = `${staffLooks} ${staffLooks === 1 ? 'view or search' : 'views and searches'} by support staff`;
  return html`<h2>Timeline</h2>
<form method="get" action="${path}" class="timeline-filters">
<label for="from">From</label><input type="date" id="from" name="from" value="${f.from ?? ''}">
<label for="to">To</label><input type="date" id="to" name="to" value="${f.to ?? ''}">
<label for="kind">Show</label><select id="kind" name="kind">
<option value=""${f.kind === undefined ? html` selected` : ''}>Revisions and activity</option>
<option value="revision"${f.kind === 'revision' ? html` selected` : ''}>Revisions only</option>
<option value="activity"${f.kind === 'activity' ? html` selected` : ''}>Activity only</option>
</select>
<span class="check"><input type="checkbox" id="staff_looks" name="staff_looks" value="1"${f.staff_looks ? html` checked` : ''}><label for="staff_looks">Include support staff's views and searches</label></span>
<div class="actions"><button type="submit">Filter</button></div>
</form>
${
  staffLooks > 0
    ? html`<p class="muted" id="staff-looks">${
        f.staff_looks
          ? html`Listed: ${looks}. <a href="${keep({ staff_looks: undefined })}">Leave them out</a>`
          : html`Left out: ${looks}. <a href="${keep({ staff_looks: '1' })}">Include them</a>`
      }</p>`
    : ''
}
<p>Export: <a href="${keep({ format: 'csv' })}">CSV</a> · <a href="${keep({ format: 'json' })}">JSON</a> (${total} entries)</p>
${
  timeline.data.length === 0
    ? html`<p>Nothing in this timeline${f.from || f.to || f.kind ? ' for these filters' : ''}.</p>`
    : html`<table class="timeline"><thead><tr><th scope="col">Time (UTC)</th><th scope="col">What</th><th scope="col">Who</th><th scope="col">Details</th></tr></thead><tbody>
${timeline.data.map((e) => row(e, names))}
</tbody></table>`
}
${pages > 1 ? html`<nav aria-label="Pages" class="timeline-pages">${page > 1 ? html`<a href="${keep({ page: page - 1 })}" rel="prev">Newer</a>` : ''} <span>Page ${page} of ${pages}</span> ${page < pages ? html`<a href="${keep({ page: page + 1 })}" rel="next">Older</a>` : ''}</nav>` : ''}`;
}

/**
 * One entry, labelled as the account holder's pages label it (the activity log's source, actor and
 * status; the history's origin), its article and site by title and name.
 */
function row(e: TimelineEntry, names: StaffTimeline['names']): Html {
  const who = actorLabel(e.actor);
  const article = (id: string): Html =>
    html`<a href="/staff/articles/${id}">${names.articles.get(id) ?? id}</a>`;
  const site = e.siteId ? names.sites.get(e.siteId) : undefined;
  if (e.kind === 'revision') {
    return html`<tr><td>${when(e.at)}</td><td><a href="/staff/articles/${e.articleId}/revisions/${e.revision}">Revision ${e.revision}</a> of <a href="/staff/articles/${e.articleId}">${e.title}</a></td><td>${who}</td>
<td>${originLabel(e.origin)}${site ? html` · ${site}` : ''}${e.reason ? html` · “${e.reason}”` : ''}${e.restoredFrom ? html` · restores revision ${e.restoredFrom}` : ''}</td></tr>`;
  }
  return html`<tr><td>${when(e.at)}</td><td>${operationLabel(e.operation)} <span class="muted">(${sourceLabel(e.source, e.actor)})</span></td><td>${who}</td>
<td>${statusLabel(e.status)}${e.articleId ? html` · ${article(e.articleId)}` : ''}${site ? html` · ${site}` : ''}${e.requestId ? html` · <code>${e.requestId}</code>` : ''}${e.clientRequestId ? html` · client's id <code>${e.clientRequestId}</code>` : ''}</td></tr>`;
}

const CSV_COLUMNS = [
  'at',
  'kind',
  'article_id',
  'revision',
  'origin',
  'operation',
  'source',
  'status',
  'actor_type',
  'actor_id',
  'actor_name',
  'reason',
  'title',
  'request_id',
  'client_request_id',
] as const;

function flat(e: TimelineEntry): Record<(typeof CSV_COLUMNS)[number], unknown> {
  const base = {
    at: e.at.toISOString(),
    kind: e.kind,
    actor_type: e.actor.type,
    actor_id: e.actor.id,
    actor_name: e.actor.name,
  };
  return e.kind === 'revision'
    ? {
        ...base,
        article_id: e.articleId,
        revision: e.revision,
        origin: e.origin,
        operation: null,
        source: null,
        status: null,
        reason: e.reason,
        title: e.title,
        request_id: null,
        client_request_id: null,
      }
    : {
        ...base,
        article_id: e.articleId,
        revision: null,
        origin: null,
        operation: e.operation,
        source: e.source,
        status: e.status,
        reason: null,
        title: null,
        request_id: e.requestId,
        client_request_id: e.clientRequestId,
      };
}

/** A list as a download: JSON `{total, entries}`, or CSV with `columns` (an array field as its items joined by spaces). */
function sendExport<C extends string>(
  reply: FastifyReply,
  name: string,
  format: 'csv' | 'json',
  list: { columns: readonly C[]; rows: Record<C, unknown>[]; total: number },
): FastifyReply {
  const { columns, rows, total } = list;
  if (format === 'json') {
    return reply
      .type('application/json; charset=utf-8')
      .header('content-disposition', `attachment; filename="${name}.json"`)
      .send(JSON.stringify({ total, entries: rows }));
  }
  // A list (an audit entry's account ids) is one field, its items separated by spaces.
  const field = (value: unknown): unknown => (Array.isArray(value) ? value.join(' ') : value);
  return reply
    .type('text/csv; charset=utf-8')
    .header('content-disposition', `attachment; filename="${name}.csv"`)
    .send(
      csvText(
        columns,
        rows.map((r) => columns.map((c) => field(r[c]))),
      ),
    );
}

const AUDIT_COLUMNS = [
  'at',
  'kind',
  'staff_id',
  'staff_name',
  'query',
  'result_count',
  'account_ids',
  'account_id',
  'article_id',
  'request_id',
] as const;

function auditFlat(e: StaffAuditEntry): Record<(typeof AUDIT_COLUMNS)[number], unknown> {
  const base = { at: e.at.toISOString(), kind: e.kind, staff_id: e.staff.id, staff_name: e.staff.name };
  return e.kind === 'search'
    ? {
        ...base,
        query: e.query,
        result_count: e.accountIds.length,
        account_ids: e.accountIds,
        account_id: null,
        article_id: null,
        request_id: e.requestId,
      }
    : {
        ...base,
        query: null,
        result_count: null,
        account_ids: null,
        account_id: e.accountId,
        article_id: e.articleId,
        request_id: e.requestId,
      };
}

/**
 * An audit entry's row; `accounts`: the names and emails of the accounts the page names, by id;
 * `articles`: the titles of its articles, by id.
 */
function auditRow(
  e: StaffAuditEntry,
  accounts: ReadonlyMap<string, AccountName>,
  articles: ReadonlyMap<string, { title: string }>,
): Html {
  const account = (id: string): Html => accountRef(accounts.get(id) ?? { id, name: '', email: '' });
  const article = (id: string): Html => {
    const title = articles.get(id)?.title;
    return title === undefined
      ? html`<a href="${staffArticlePath(id)}"><code>${id}</code></a>`
      : html`<a href="${staffArticlePath(id)}">${title}</a> <span class="muted">(<code>${id}</code>)</span>`;
  };
  const what =
    e.kind === 'search'
      ? html`Searched for <strong>${e.query}</strong>: ${
          e.accountIds.length === 0
            ? 'no account'
            : e.accountIds.map((id, i) => html`${i > 0 ? '; ' : ''}${account(id)}`)
        }`
      : html`Viewed account ${account(e.accountId)}${
          e.articleId ? html`, article ${article(e.articleId)}` : ''
        }`;
  return html`<tr><td>${when(e.at)}</td><td>${e.staff.name} <span class="muted">(${e.staff.id})</span></td><td>${what}</td><td>${e.requestId ? html`<code>${e.requestId}</code>` : ''}</td></tr>`;
}
