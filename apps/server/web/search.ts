import type { FastifyPluginAsync } from 'fastify';
import { ArticleStatus } from '../../../domain/article/events.ts';
import { SEARCH_RANKED_MAX } from '../../../domain/article/search.ts';
import { isDomainError } from '../../../domain/errors.ts';
import { PER_PAGE_MAX } from '../../../domain/vocabulary.ts';
import {
  type ArticleSearchHitOut,
  type ArticleSearchQuery,
  SearchQuery,
} from '../../application/articles.ts';
import { unwrap } from '../../application/call.ts';
import type { Application } from '../../application/index.ts';
import type { Listed } from '../../application/lists.ts';
import type { SiteOut } from '../../application/sites.ts';
import { type Html, html, raw } from '../http/html.ts';
import { webCall } from './call.ts';
import { installPageHeaders, type WebKit } from './kit.ts';
import { sendRefusal } from './refusal.ts';

/*
 * Search (`/search?q=&site_id=&status=`): the account's articles that match the words of the search
 * box every signed-in page has in its header, most relevant first, each with its title (to the
 * article's page), site, status and a snippet of its body with the matched words marked; filters by
 * site and status, and pages. A GET form: it works without JavaScript and its address can be kept.
 * A search the API would refuse (an empty one, only common words, a bad filter) is the same page with
 * the error, answered 400.
 */

/** What the page reads from its query string, as the API names it. */
const KEYS = ['q', 'site_id', 'status', 'page', 'per_page'] as const;
type Key = (typeof KEYS)[number];
const LABELS: Record<Key, string> = {
  q: 'Search',
  site_id: 'Site',
  status: 'Status',
  page: 'Page',
  per_page: 'Per page',
};

/** The query as the person sent it (trimmed, empty fields left out): what the form shows again. */
type SearchForm = Partial<Record<Key, string>>;

function readForm(raw: Record<string, unknown>): SearchForm {
  const form: SearchForm = {};
  for (const key of KEYS) {
    const value = Array.isArray(raw[key]) ? raw[key][0] : raw[key];
    if (typeof value === 'string' && value.trim() !== '') form[key] = value.trim();
  }
  return form;
}

/** The page's address for this search at page `page` (page 1 and empty fields left out). */
export function searchUrl(form: SearchForm, page: number): string {
  const params = new URLSearchParams();
  for (const key of KEYS) {
    const value = key === 'page' ? (page > 1 ? String(page) : undefined) : form[key];
    if (value) params.set(key, value);
  }
  return `/search?${params.toString()}`;
}

/** The snippet with its highlighted ranges in `<mark>`. */
function markedSnippet(snippet: string, highlights: readonly (readonly number[])[]): Html {
  const parts: (Html | string)[] = [];
  let at = 0;
  for (const [start = 0, end = start] of highlights) {
    if (start < at) continue;
    parts.push(snippet.slice(at, start), html`<mark>${snippet.slice(start, end)}</mark>`);
    at = end;
  }
  parts.push(snippet.slice(at));
  return html`${parts}`;
}

function hitItem(hit: ArticleSearchHitOut, sites: Map<string, string>): Html {
  const site = sites.get(hit.site_id) ?? hit.site_id;
  const when = hit.published_at
    ? html` · <time datetime="${hit.published_at}">${hit.published_at.slice(0, 10)}</time>`
    : '';
  return html`<li>
<h3><a href="/articles/${encodeURIComponent(hit.id)}">${hit.title}</a></h3>
<p class="muted">${site} · <span class="site-status site-status-${hit.status}">${hit.status}</span>${when}</p>
${hit.match.snippet ? html`<p class="snippet">${markedSnippet(hit.match.snippet, hit.match.highlights)}</p>` : ''}
</li>`;
}

function searchForm(form: SearchForm, errors: Partial<Record<Key, string>>, sites: SiteOut[]): Html {
  const described = (key: Key): Html =>
    errors[key] ? raw(` aria-invalid="true" aria-describedby="error-${key}"`) : raw('');
  const fieldError = (key: Key): Html | string =>
    errors[key] ? html`<p class="field-error" id="error-${key}">${LABELS[key]} ${errors[key]}</p>` : '';
  const selected = (on: boolean): Html => (on ? raw(' selected') : raw(''));
  const siteKnown = form.site_id === undefined || sites.some((s) => s.id === form.site_id);
  return html`<form class="filters search-filters" method="get" action="/search" role="search" aria-label="Search articles">
<div class="search-words"><label for="search-q">Words to find</label>
<input type="search" id="search-q" name="q" value="${form.q ?? ''}" enterkeyhint="search" autocomplete="off"${described('q')}>${fieldError('q')}</div>
<div><label for="search-site">${LABELS.site_id}</label>
<select id="search-site" name="site_id"${described('site_id')}><option value="">Every site</option>
${sites.map((s) => html`<option value="${s.id}"${selected(form.site_id === s.id)}>${s.name}</option>`)}
${siteKnown ? '' : html`<option value="${form.site_id}" selected>${form.site_id}</option>`}
</select>${fieldError('site_id')}</div>
<div><label for="search-status">${LABELS.status}</label>
<select id="search-status" name="status"${described('status')}><option value="">Any status</option>
${ArticleStatus.options.map((s) => html`<option value="${s}"${selected(form.status === s)}>${s}</option>`)}
</select>${fieldError('status')}</div>
${form.per_page ? html`<input type="hidden" name="per_page" value="${form.per_page}">` : ''}
<div class="actions"><button class="primary" type="submit">Search</button></div>
</form>
<p class="muted">All the words must appear, in the title and target keyword or in the body (in any form: “boilers” finds “boiler”); “a quoted phrase” in that order; -word leaves out articles with it; or between words takes either.</p>`;
}

function pager(form: SearchForm, meta: Listed<ArticleSearchHitOut>['meta']): Html {
  const { page, total_pages, total } = meta;
  const prev = page > 1 ? html`<a rel="prev" href="${searchUrl(form, page - 1)}">← Previous</a>` : '';
  const next = page < total_pages ? html`<a rel="next" href="${searchUrl(form, page + 1)}">Next →</a>` : '';
  return html`<nav class="pager" aria-label="Pages">${prev}
<span>Page ${page} of ${Math.max(total_pages, 1)} · ${total} ${total === 1 ? 'article' : 'articles'}</span>
${next}</nav>`;
}

export const searchPage: FastifyPluginAsync<{ kit: WebKit; application: Application }> = async (
  app,
  { kit, application },
) => {
  installPageHeaders(app);

  app.get('/search', { schema: { hide: true } }, async (request, reply) => {
    const session = await kit.signedIn(request, reply);
    if (!session) return reply;
    const call = webCall(request, session);
    const form = readForm(request.query as Record<string, unknown>);
    const errors: Partial<Record<Key, string>> = {};
    let sites: SiteOut[];
    let list: Listed<ArticleSearchHitOut> | null = null;
    try {
      sites = unwrap(await application.sites.list(call, { page: 1, per_page: PER_PAGE_MAX })).data;
      if (Object.keys(form).length > 0) {
        const parsed = SearchQuery.safeParse(form);
        if (parsed.success) {
          const outcome = await application.articles.search(call, parsed.data satisfies ArticleSearchQuery);
          if (outcome.ok) list = outcome.value;
          else if (isDomainError(outcome.error) && outcome.error.code === 'invalid_request')
            for (const e of outcome.error.errors ?? [])
              if ('name' in e && 'message' in e) errors[e.name as Key] ??= e.message;
              else throw outcome.error;
        } else {
          for (const issue of parsed.error.issues) {
            const key = issue.path[0] as Key;
            errors[key] ??= issue.code === 'invalid_value' ? 'must be one of the choices' : issue.message;
          }
        }
      }
    } catch (error) {
      return sendRefusal(kit, request, reply, session, error);
    }
    const refused = Object.keys(errors).length > 0;
    const siteNames = new Map(sites.map((s) => [s.id, s.name]));
    const results = list
      ? list.data.length === 0
        ? html`<p class="muted" id="no-results">${
            list.meta.total === 0
              ? 'No article matches this search.'
              : html`There are no results on this page. <a href="${searchUrl(form, 1)}">Go to the first page</a>.`
          }</p>`
        : html`<p class="muted" id="results-count">${resultsCount(list.meta.total)}</p>
<ol class="search-results" start="${(list.meta.page - 1) * list.meta.per_page + 1}">
${list.data.map((hit) => hitItem(hit, siteNames))}
</ol>
${pager(form, list.meta)}`
      : '';
    const body = html`<div class="search-page"><div class="card">
<h1>Search articles</h1>
${
  refused
    ? html`<p class="error" role="alert" id="search-error">This search cannot be made: ${KEYS.flatMap(
        (key) => (errors[key] ? [`${LABELS[key]} ${errors[key]}`] : []),
      ).join('; ')}.</p>`
    : ''
}
${searchForm(form, errors, sites)}
</div>
${
  list
    ? html`<section class="card" aria-labelledby="results-heading">
<h2 id="results-heading">Results for “${form.q ?? ''}”</h2>
${results}
</section>`
    : ''
}</div>`;
    return kit.send(reply, {
      status: refused ? 400 : 200,
      title: form.q ? `Search: ${form.q}` : 'Search',
      body,
      session,
      request,
      wide: true,
    });
  });
};

/**
 * How many articles a search found, in words. A search ranks and counts at most SEARCH_RANKED_MAX
 * matches (the newest), so a total of that many means "at least": the page says so, and how to narrow it.
 */
export function resultsCount(total: number): string {
  if (total >= SEARCH_RANKED_MAX) {
    const most = SEARCH_RANKED_MAX.toLocaleString('en');
    return `${most} or more articles match: the newest ${most} are ranked, most relevant first. Add words, a site or a status to narrow the search.`;
  }
  return `${total} ${total === 1 ? 'article matches' : 'articles match'}, most relevant first.`;
}
