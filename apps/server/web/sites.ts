import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ArticleStatus } from '../../../domain/article/events.ts';
import { BacklinkCategory } from '../../../domain/backlink/events.ts';
import { isWebUrl } from '../../../domain/input.ts';
import { PAGE_MAX } from '../../../domain/vocabulary.ts';
import { type ArticleListItemOut, ArticleQuery } from '../../application/articles.ts';
import { type Call, unwrap } from '../../application/call.ts';
import { SiteParams } from '../../application/contract.ts';
import type { Application } from '../../application/index.ts';
import type { Listed } from '../../application/lists.ts';
import { type BacklinkOut, BacklinkQuery, type SiteOut } from '../../application/sites.ts';
import { type Html, html, raw } from '../http/html.ts';
import { webCall } from './call.ts';
import { installPageHeaders, type WebKit } from './kit.ts';
import { sendRefusal } from './refusal.ts';
import type { WebSession } from './sessions.ts';

/*
 * The query strings of the site pages, read as a person's input: an empty field is no filter, and a
 * refused value is named with the label of its field so that the form can say what to fix.
 */

const page = z.coerce
  .number({ message: 'must be a whole number from 1' })
  .int('must be a whole number from 1')
  .min(1, 'must be a whole number from 1')
  .max(PAGE_MAX, `must be at most ${PAGE_MAX}`)
  .default(1);

/**
 * `/sites/{id}`: the articles' filters and page, the backlinks' category and page: the filters are the
 * use cases' own fields (a page's numbers are read as a person types them).
 */
export const SiteQuery = z
  .object({
    from: ArticleQuery.shape.from,
    to: ArticleQuery.shape.to,
    status: ArticleQuery.shape.status,
    page,
    category: BacklinkQuery.shape.category,
    backlinks_page: page,
  })
  .superRefine((q, ctx) => {
    if (q.from && q.to && q.from > q.to) {
      ctx.addIssue({ code: 'custom', path: ['from'], message: 'must not be after the end date' });
    }
  });
export type SiteQuery = z.infer<typeof SiteQuery>;

/** What the person sent, as text: the form shows it again. */
export type SiteForm = Record<'from' | 'to' | 'status' | 'page' | 'category' | 'backlinks_page', string>;

const FIELDS = ['from', 'to', 'status', 'page', 'category', 'backlinks_page'] as const;

/** The names people see for each parameter. */
export const FIELD_LABELS: Record<(typeof FIELDS)[number], string> = {
  from: 'Published from',
  to: 'Published to',
  status: 'Status',
  page: 'Page of articles',
  category: 'Category',
  backlinks_page: 'Page of backlinks',
};

/**
 * Reads `/sites/{id}`'s query: the form's text and either the query or the refusals (each naming its
 * field's label). A parameter given twice is refused; unknown parameters are ignored.
 */
export function readSiteQuery(
  query: unknown,
): { form: SiteForm; query: SiteQuery; errors: [] } | { form: SiteForm; query: null; errors: string[] } {
  const given = (query ?? {}) as Record<string, unknown>;
  const form = {} as SiteForm;
  const input: Record<string, string> = {};
  const errors: string[] = [];
  for (const field of FIELDS) {
    const value = given[field];
    if (Array.isArray(value)) {
      errors.push(`${FIELD_LABELS[field]}: must be given once`);
      form[field] = '';
      continue;
    }
    const text = typeof value === 'string' ? value.trim() : '';
    form[field] = text;
    if (text !== '') input[field] = text;
  }
  const parsed = SiteQuery.safeParse(input);
  if (parsed.success && errors.length === 0) return { form, query: parsed.data, errors: [] };
  for (const issue of parsed.error?.issues ?? []) {
    const field = issue.path[0] as (typeof FIELDS)[number];
    const message =
      issue.code === 'invalid_value' && field === 'status'
        ? `must be one of ${ArticleStatus.options.join(', ')}`
        : issue.code === 'invalid_value' && field === 'category'
          ? `must be one of ${BacklinkCategory.options.join(', ')}`
          : issue.message;
    errors.push(`${FIELD_LABELS[field] ?? field}: ${message}`);
  }
  return { form, query: null, errors };
}

/*
 * `/sites`: the account's sites with their counts. `/sites/{id}`: a site's articles (the API's filters
 * as a GET form, paged) and its backlinks (by category, paged). Read-only pages: no POST form.
 */

const SITES_PER_PAGE = 50;
const ARTICLES_PER_PAGE = 20;
const BACKLINKS_PER_PAGE = 20;
/** `/sites/{id}`'s id, read as the API reads it. */
const SITE = { hide: true, params: SiteParams };

/** `2026-11-03` of an RFC 3339 time, or a dash. */
export function day(time: string | null): string {
  return time ? time.slice(0, 10) : '—';
}

/** `/path?a=1&b=2` with the non-empty parameters, in the order given. */
export function hrefOf(path: string, params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== '') search.set(name, String(value));
  }
  const query = search.toString();
  return query ? `${path}?${query}` : path;
}

/**
 * The address when it is an http(s) URL (`isWebUrl`, the rule every entry of one applies), else null:
 * stored addresses come from outside, and one stored before that rule is shown as text, never a link.
 */
export function httpHref(url: string): string | null {
  return isWebUrl(url) ? url : null;
}

/** Previous and next links around `Page x of y`; `link(n)` is the address of page n. */
export function pager(label: string, page: number, totalPages: number, link: (n: number) => string): Html {
  if (totalPages <= 1 && page <= 1) return html``;
  const last = Math.max(1, totalPages);
  return html`<nav class="site-pager" aria-label="${label}">
${page > 1 ? html`<a rel="prev" href="${link(Math.min(page - 1, last))}">← Previous</a>` : html`<span class="muted">← Previous</span>`}
<span>Page ${page} of ${last}</span>
${page < last ? html`<a rel="next" href="${link(page + 1)}">Next →</a>` : html`<span class="muted">Next →</span>`}
</nav>`;
}

/** The breadcrumb at the top of a site's pages. */
export function crumbs(trail: readonly (readonly [string, string | null])[]): Html {
  return html`<nav class="site-crumbs" aria-label="Breadcrumb"><ol>${trail.map(
    ([label, href]) =>
      html`<li>${href ? html`<a href="${href}">${label}</a>` : html`<span aria-current="page">${label}</span>`}</li>`,
  )}</ol></nav>`;
}

/**
 * The breadcrumb at the top of an article's pages (the article, a revision, restore, the editor):
 * Sites › its site › the article, then `more` (a revision, an action); the last one is the page
 * itself. The site's name is read with the person's call (`sites.get`).
 */
export async function articleCrumbs(
  application: Application,
  call: Call,
  article: { id: string; site_id: string; title: string },
  more: readonly (readonly [string, string | null])[] = [],
): Promise<Html> {
  const site = unwrap(await application.sites.get(call, article.site_id));
  return crumbs([
    ['Sites', '/sites'],
    [site.name, `/sites/${encodeURIComponent(site.id)}`],
    [article.title, more.length > 0 ? `/articles/${encodeURIComponent(article.id)}` : null],
    ...more,
  ]);
}

function option(value: string, label: string, selected: string): Html {
  return html`<option value="${value}"${value === selected ? raw(' selected') : ''}>${label}</option>`;
}

/** A link to an outside address (http(s) only), or its text alone. */
export function linkTo(url: string, text: string): Html {
  const href = httpHref(url);
  return href ? html`<a href="${href}" rel="nofollow noreferrer">${text}</a>` : html`${text}`;
}

const capital = (word: string): string => word.charAt(0).toUpperCase() + word.slice(1);

/**
 * `/sites` of an account without a site: sites are not added on these pages (nor through the API or
 * an assistant) but by the service, which brings each site in with its articles and backlinks; what
 * the person can set up meanwhile.
 */
const noSites = html`<div class="card" id="no-sites">
<h2>No sites yet</h2>
<p>Your sites are added by the service, not on these pages: once the team running it brings in a site, it appears here with its articles and backlinks, and you can read and edit them. You do not need to do anything for that; if you expected a site here, ask the service's support.</p>
<p>Meanwhile, on <a href="/connect">Connect Site</a>, you can:</p>
<ul>
<li>create an API key for your own tools,</li>
<li>connect an AI assistant,</li>
<li>add a webhook, to be told when an article is published or a backlink acquired.</li>
</ul>
<p>Each of them will see your sites as soon as they are added.</p>
</div>`;

export const sitePages: FastifyPluginAsync<{ kit: WebKit; application: Application }> = async (
  app,
  { kit, application },
) => {
  installPageHeaders(app);

  async function fail(request: FastifyRequest, reply: FastifyReply, session: WebSession, error: unknown) {
    return sendRefusal(kit, request, reply, session, error);
  }

  app.get('/sites', { schema: { hide: true } }, async (request, reply) => {
    const session = await kit.signedIn(request, reply);
    if (!session) return reply;
    const raw = (request.query as Record<string, unknown>).page;
    const page = typeof raw === 'string' && /^[1-9]\d{0,5}$/.test(raw) ? Number(raw) : 1;
    const sites = unwrap(
      await application.sites.overview(webCall(request, session), {
        page,
        per_page: SITES_PER_PAGE,
      }),
    );
    const month = sites.data[0]?.this_month;
    const body = html`<h1>Sites</h1>
${
  sites.meta.total === 0
    ? noSites
    : html`<div class="card">
<table class="site-table" id="sites">
<caption>Your sites${month ? html`, with this month's counts (${month.from} to ${month.to})` : ''}</caption>
<thead><tr><th scope="col">Site</th><th scope="col">Domain</th><th scope="col" class="num">Articles</th><th scope="col" class="num">Published this month</th><th scope="col" class="num">Backlinks this month</th><th scope="col">Report</th></tr></thead>
<tbody>
${sites.data.map(
  (s) => html`<tr>
<td data-label="Site"><a href="/sites/${s.id}">${s.name}</a></td>
<td data-label="Domain">${s.domain}</td>
<td data-label="Articles" class="num">${s.articles}</td>
<td data-label="Published this month" class="num">${s.this_month.articles_published}</td>
<td data-label="Backlinks this month" class="num">${s.this_month.backlinks}</td>
<td data-label="Report"><a href="/sites/${s.id}/report" aria-label="This month's report of ${s.name}">This month's report</a></td>
</tr>`,
)}
</tbody></table>
${pager('Pages of sites', page, sites.meta.total_pages, (n) => hrefOf('/sites', { page: n }))}
</div>`
}`;
    return kit.send(reply, { title: 'Sites', body, session, request, wide: true });
  });

  app.get<{ Params: { id: string } }>('/sites/:id', { schema: SITE }, async (request, reply) => {
    const session = await kit.signedIn(request, reply);
    if (!session) return reply;
    const siteId = request.params.id;
    const read = readSiteQuery(request.query);
    const call = webCall(request, session);
    let site: SiteOut;
    try {
      site = unwrap(await application.sites.get(call, siteId));
    } catch (error) {
      return fail(request, reply, session, error);
    }
    if (read.query === null) {
      return kit.send(reply, {
        status: 400,
        title: site.name,
        session,
        request,
        wide: true,
        body: sitePage(site, read.form, {
          errors: read.errors,
          articles: null,
          backlinks: null,
        }),
      });
    }
    const q = read.query;
    try {
      const [articles, backlinks] = await Promise.all([
        application.articles
          .list(call, siteId, {
            from: q.from,
            to: q.to,
            status: q.status,
            page: q.page,
            per_page: ARTICLES_PER_PAGE,
          })
          .then(unwrap),
        application.sites
          .backlinks(call, siteId, {
            category: q.category,
            page: q.backlinks_page,
            per_page: BACKLINKS_PER_PAGE,
          })
          .then(unwrap),
      ]);
      return kit.send(reply, {
        title: site.name,
        session,
        request,
        wide: true,
        body: sitePage(site, read.form, { errors: [], articles, backlinks }),
      });
    } catch (error) {
      return fail(request, reply, session, error);
    }
  });
};

type ArticlesPage = Listed<ArticleListItemOut>;

function sitePage(
  site: SiteOut,
  form: SiteForm,
  lists: { errors: string[]; articles: ArticlesPage | null; backlinks: Listed<BacklinkOut> | null },
): Html {
  const path = `/sites/${encodeURIComponent(site.id)}`;
  const state = (changes: Partial<SiteForm>): string => hrefOf(path, { ...form, ...changes });
  const { articles, backlinks } = lists;
  const filtered = form.from !== '' || form.to !== '' || form.status !== '';
  return html`${crumbs([
    ['Sites', '/sites'],
    [site.name, null],
  ])}
<h1>${site.name}</h1>
<p class="muted site-links">${linkTo(site.url, site.domain)} · <a href="${path}/report">This month's report</a></p>
${
  lists.errors.length > 0
    ? html`<div class="error" role="alert" id="filter-errors"><p>The filter could not be used:</p><ul>${lists.errors.map((e) => html`<li>${e}</li>`)}</ul></div>`
    : ''
}
<div class="site-stack">
<section class="card" aria-labelledby="articles-heading">
<h2 id="articles-heading">Articles</h2>
<form method="get" action="${path}" class="site-filters" id="article-filters">
<div><label for="from">Published from</label><input type="date" id="from" name="from" value="${form.from}"></div>
<div><label for="to">Published to</label><input type="date" id="to" name="to" value="${form.to}"></div>
<div><label for="status">Status</label><select id="status" name="status">${option('', 'Any status', form.status)}${ArticleStatus.options.map((s) => option(s, capital(s), form.status))}</select></div>
${form.category ? html`<input type="hidden" name="category" value="${form.category}">` : ''}
<div class="site-filter-actions"><button class="primary" type="submit">Filter</button>${filtered ? html` <a href="${hrefOf(path, { category: form.category })}">Clear</a>` : ''}</div>
</form>
${
  articles === null
    ? html`<p class="muted">Correct the filter to see the articles.</p>`
    : articles.data.length === 0
      ? html`<p id="no-articles">${articles.meta.total === 0 ? (filtered ? 'No article matches this filter.' : 'No articles yet.') : html`No articles on this page. <a href="${state({ page: '' })}">First page</a>`}</p>`
      : html`<p class="muted" id="articles-count">${articles.meta.total} ${articles.meta.total === 1 ? 'article' : 'articles'}${filtered ? ' match the filter' : ''}, newest published first.</p>
<table class="site-table" id="articles">
<thead><tr><th scope="col">Title</th><th scope="col">Status</th><th scope="col">Published</th><th scope="col">Keyword</th><th scope="col" class="num">Words</th></tr></thead>
<tbody>
${articles.data.map(
  (a) => html`<tr>
<td data-label="Title"><a href="/articles/${a.id}">${a.title}</a></td>
<td data-label="Status"><span class="site-status site-status-${a.status}">${capital(a.status)}</span></td>
<td data-label="Published">${day(a.published_at)}</td>
<td data-label="Keyword">${a.target_keyword ?? '—'}</td>
<td data-label="Words" class="num">${a.word_count}</td>
</tr>`,
)}
</tbody></table>`
}
${articles ? pager('Pages of articles', articles.meta.page, articles.meta.total_pages, (n) => state({ page: String(n) })) : ''}
</section>
<section class="card" aria-labelledby="backlinks-heading">
<h2 id="backlinks-heading">Backlinks</h2>
<form method="get" action="${path}#backlinks-heading" class="site-filters" id="backlink-filters">
<div><label for="category">Category</label><select id="category" name="category">${option('', 'Industry and local', form.category)}${BacklinkCategory.options.map((c) => option(c, capital(c), form.category))}</select></div>
${(['from', 'to', 'status', 'page'] as const).map((f) => (form[f] ? html`<input type="hidden" name="${f}" value="${form[f]}">` : ''))}
<div class="site-filter-actions"><button type="submit">Show</button></div>
</form>
${
  backlinks === null
    ? ''
    : backlinks.data.length === 0
      ? html`<p id="no-backlinks">${backlinks.meta.total === 0 ? 'No backlinks yet.' : html`No backlinks on this page. <a href="${state({ backlinks_page: '' })}#backlinks-heading">First page</a>`}</p>`
      : html`<p class="muted" id="backlinks-count">${backlinks.meta.total} ${backlinks.meta.total === 1 ? 'backlink' : 'backlinks'}, newest first.</p>
<table class="site-table" id="backlinks">
<thead><tr><th scope="col">Acquired</th><th scope="col">From</th><th scope="col">Anchor</th><th scope="col">Category</th></tr></thead>
<tbody>
${backlinks.data.map(
  (b) => html`<tr>
<td data-label="Acquired">${b.acquired_on}</td>
<td data-label="From">${linkTo(b.source_url, b.source_domain)}</td>
<td data-label="Anchor">${b.anchor_text || html`<span class="muted">(${b.anchor_type.replace('_', ' ')})</span>`}</td>
<td data-label="Category">${capital(b.category)}</td>
</tr>`,
)}
</tbody></table>`
}
${backlinks ? pager('Pages of backlinks', backlinks.meta.page, backlinks.meta.total_pages, (n) => `${state({ backlinks_page: String(n) })}#backlinks-heading`) : ''}
</section>
</div>`;
}
