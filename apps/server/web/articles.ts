import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { REASON_MAX } from '../../../domain/article/events.ts';
import { DomainError, isDomainError } from '../../../domain/errors.ts';
import type { Actor, Origin } from '../../../domain/event.ts';
import type { ProtectedChange } from '../../../domain/html/protected.ts';
import { diffText } from '../../../domain/html/word-diff.ts';
import { ID_PATTERN } from '../../../domain/input.ts';
import { PAGE_MAX } from '../../../domain/vocabulary.ts';
import type { BodyDiff } from '../../../infra/sanitize-pool.ts';
import type { ArticleWrite } from '../../application/article-write.ts';
import type { ArticleOut } from '../../application/articles.ts';
import { unwrap } from '../../application/call.ts';
import { revisionOf } from '../../application/contract.ts';
import type { RevisionComparisonOut, RevisionContentOut, RevisionOut } from '../../application/revisions.ts';
import { statusOf } from '../http/errors.ts';
import { type Html, html, raw } from '../http/html.ts';
import { settled } from '../http/outcome.ts';
import { FORM_SHORT_MAX, FORM_TEXT_MAX, FORM_TOKEN_MAX } from '../http/schemas.ts';
import { asOfForm, asOfRefusal, asOfView, inFuture, notYet, readAsOf } from './as-of.ts';
import { recordChanges, webCall } from './call.ts';
import { savedNotice } from './editor.ts';
import { ARTICLE_PAGE_CSP, installFormParser, installPageHeaders } from './kit.ts';
import type { PagesDeps } from './pages.ts';
import { sendRefusal } from './refusal.ts';
import type { WebSession } from './sessions.ts';
import { articleCrumbs, linkTo } from './sites.ts';
import {
  DIFF_LEGEND,
  renderBodyDiff,
  renderDiff,
  renderSides,
  shownDiff,
  type Versions,
} from './word-diff.ts';

/*
 * The article pages:
 * - `/articles/{id}`: the article (its facts, featured image, the stored body rendered, its protected
 *   links) and its history, each revision linking to its page and, but the current, to Restore;
 * - `/articles/{id}/revisions/{n}`: revision n by replay, its word diff against n-1 and against the
 *   current version, and Restore;
 * - `/articles/{id}/revisions/compare?from=&to=`: any two revisions compared (the `compare` use case,
 *   as the API's): titles before and after, the text side by side on a wide screen and inline on a
 *   narrow one; the article page's history has the form (a GET: two selects, From and To);
 * - `/articles/{id}/revisions/{n}/restore`: what restoring n would change, a reason, and the POST that
 *   restores it (a new revision with `restored_from: n`), refused as the API refuses it.
 * The stored body is sanitised by the domain when written, so it is rendered with `raw`; the page's
 * Content-Security-Policy allows no script besides.
 */

/** Revisions per page of an article's history. */
const HISTORY_PER_PAGE = 50;

const RestoreForm = z.object({
  reason: z.string().max(FORM_TEXT_MAX).optional(),
  expected_revision: z.string().max(FORM_SHORT_MAX).optional(),
  csrf: z.string().max(FORM_TOKEN_MAX).optional(),
});
/** The restore form's route: who may send it (kit.ts FormSender). */
const RESTORE_FORM = {
  schema: { hide: true },
  config: {
    form: { from: 'account' },
    operation: 'restore_revision',
    subject: 'article',
    source: 'editor',
    heavyPage: true,
  },
} as const;

/** A positive whole number from a path or query value, or null. */
export function wholeNumber(value: unknown, max: number): number | null {
  if (typeof value !== 'string' || !/^[1-9][0-9]{0,9}$/.test(value)) return null;
  const n = Number(value);
  return n <= max ? n : null;
}

const ORIGINS: Record<Origin, string> = {
  api: 'API',
  mcp: 'AI assistant (MCP)',
  editor: 'Editor',
  rewrite: 'Content pipeline',
};
const ACTOR_TYPES: Record<Actor['type'], string> = {
  api_key: 'API key',
  oauth_client: 'assistant',
  user: 'person',
  staff: 'support staff',
  system: 'service',
};
const STATUSES: Record<ArticleOut['status'], string> = {
  draft: 'Draft',
  scheduled: 'Scheduled',
  published: 'Published',
  archived: 'Archived',
};

/** A revision's origin as the history names it: `mcp` as "AI assistant (MCP)". */
export function originLabel(origin: string): string {
  return ORIGINS[origin as Origin] ?? origin;
}

/** Who made a revision, with the kind of actor (the history's and the editor's revisions panel). */
export function actorLabel(actor: { type: string; name: string }): Html {
  const type = ACTOR_TYPES[actor.type as Actor['type']] ?? actor.type;
  return html`${actor.name} <span class="muted">(${type})</span>`;
}

/** An RFC 3339 time as a person reads it, in UTC, in a <time> element. */
function when(iso: string | null): Html {
  if (!iso) return html`<span class="muted">none</span>`;
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;
}

const articlePath = (id: string): string => `/articles/${encodeURIComponent(id)}`;
const revisionPath = (id: string, n: number): string => `${articlePath(id)}/revisions/${n}`;
const comparePath = (id: string): string => `${articlePath(id)}/revisions/compare`;
const asOfPath = (id: string): string => `${articlePath(id)}/as-of`;

/**
 * The form that picks two revisions to compare: a GET to the compare page, two selects labelled From
 * and To offering every revision, newest first.
 */
function compareForm(id: string, latest: number, from: number, to: number): Html {
  const options = (selected: number): Html[] =>
    Array.from({ length: latest }, (_, i) => latest - i).map(
      (n) =>
        html`<option value="${n}"${n === selected ? raw(' selected') : ''}>Revision ${n}${n === latest ? ' (current)' : n === 1 ? ' (creation)' : ''}</option>`,
    );
  return html`<form class="compare-form" method="get" action="${comparePath(id)}">
<div class="field"><label for="compare-from">From</label><select id="compare-from" name="from">${options(from)}</select></div>
<div class="field"><label for="compare-to">To</label><select id="compare-to" name="to">${options(to)}</select></div>
<button type="submit">Compare</button>
</form>`;
}

/**
 * The featured image with its alt text as caption (an image stored without alt text says so). Its
 * width and height, when known, keep its place while it loads or when it cannot be loaded.
 */
export function featuredImage(image: ArticleOut['featured_image']): Html {
  if (!image) return html`<p class="muted">No featured image.</p>`;
  return html`<figure class="featured"><img src="${image.url}" alt="${image.alt}"${
    image.width && image.height ? raw(` width="${image.width}" height="${image.height}"`) : ''
  }><figcaption class="muted">${image.alt || 'No alt text.'}</figcaption></figure>`;
}

/** An article's body as stored (sanitised by the domain when it was written), as the page shows it. */
export function storedBody(body: string): Html {
  return html`<article class="article-body">${raw(body)}</article>`;
}

export type Diffable = { title: string; body: string; featured_image: ArticleOut['featured_image'] };

/** The word diff of two bodies, off the server's thread (Runtime.diff). */
export type DiffBodies = (before: string, after: string) => Promise<BodyDiff>;

/**
 * What changes from `before` to `after`: the title and the text word by word, and the featured image.
 * The text's diff is `diff`'s; when it is not shown, the note links to `versions`.
 */
export async function changes(
  diff: DiffBodies,
  before: Diffable,
  after: Diffable,
  id: string,
  versions: Versions,
): Promise<Html> {
  // Titles are short (TITLE_MAX): compared here.
  const titleDiff = diffText(before.title, after.title);
  const title =
    before.title === after.title
      ? html`<p class="muted">The title is the same: ${after.title}</p>`
      : html`<h3 class="change-part">Title</h3>${titleDiff ? renderDiff(titleDiff) : html`<p><del>${before.title}</del> → <ins>${after.title}</ins></p>`}`;
  let text: Html;
  if (before.body === after.body) {
    text = html`<p class="muted">The text is the same.</p>`;
  } else {
    const body = await diff(before.body, after.body);
    const counted = body !== null && body !== 'busy' ? body : null;
    text = html`<h3 class="change-part">Text${counted ? html` <span class="muted">(${counted.added} words added, ${counted.removed} removed)</span>` : ''}</h3>
${counted && counted.added === 0 && counted.removed === 0 ? html`<p class="muted">The words are the same; only the markup differs (links, emphasis or layout).</p>` : renderBodyDiff(body, versions)}`;
  }
  const beforeImage = before.featured_image;
  const afterImage = after.featured_image;
  const image =
    JSON.stringify(beforeImage) === JSON.stringify(afterImage)
      ? ''
      : html`<h3 class="change-part">Featured image</h3><p>${beforeImage ? html`<code>${beforeImage.url}</code>` : 'none'} → ${
          afterImage ? html`<code>${afterImage.url}</code>` : 'none'
        }</p>`;
  return html`<div class="changes" id="${id}">${title}${text}${image}</div>`;
}

/** The titles at two revisions: one line when they are the same. */
function titles(from: number, to: number, before: string, after: string): Html {
  return before === after
    ? html`<p class="muted" id="titles">The title is the same: ${after}</p>`
    : html`<h3 class="change-part">Title</h3>
<dl class="facts" id="titles"><dt>At revision ${from}</dt><dd><del>${before}</del></dd><dt>At revision ${to}</dt><dd><ins>${after}</ins></dd></dl>`;
}

/** A comparison of two revisions: titles, then the text side by side (wide screens) and inline (narrow ones). */
function comparison(id: string, c: RevisionComparisonOut): Html {
  const diff = shownDiff(c.changes, c.granularity === 'line');
  const text = c.changes.every((change) => change.op === 'equal')
    ? html`<p class="muted">The text is the same.</p>`
    : html`${diff.byLine ? html`<p class="muted">Compared line by line (too long or too many changes for words).</p>` : ''}
<div class="compare-wide">${renderSides(diff, { before: `Revision ${c.from}`, after: `Revision ${c.to}` })}</div>
<div class="compare-narrow">${renderDiff(diff)}</div>`;
  return html`${titles(c.from, c.to, c.title.before, c.title.after)}
<h3 class="change-part">Text <span class="muted">(${diff.added} words added, ${diff.removed} removed)</span></h3>
${text}
<p class="muted"><a href="${revisionPath(id, c.from)}#content">Revision ${c.from} whole</a> · <a href="${revisionPath(id, c.to)}#content">Revision ${c.to} whole</a></p>`;
}

function historyTable(id: string, revisions: RevisionOut[], current: number): Html {
  return html`<div class="scroll"><table class="history">
<thead><tr><th scope="col">Revision</th><th scope="col">When</th><th scope="col">Origin</th><th scope="col">By</th><th scope="col">Reason</th><th scope="col"><span class="visually-hidden">Restore</span></th></tr></thead>
<tbody>
${revisions.map(
  (r) => html`<tr id="revision-${r.revision}">
<td><a href="${revisionPath(id, r.revision)}">Revision ${r.revision}</a>${r.revision === current ? html` <span class="tag">current</span>` : ''}${
    r.restored_from
      ? html`<br><span class="muted restored-from">restores revision ${r.restored_from}</span>`
      : ''
  }</td>
<td data-label="When">${when(r.created_at)}</td>
<td data-label="Origin">${originLabel(r.origin)}</td>
<td data-label="By">${actorLabel(r.actor)}</td>
<td data-label="Reason">${r.reason ?? html`<span class="muted">none given</span>`}</td>
<td>${r.revision === current ? '' : html`<a class="button" href="${revisionPath(id, r.revision)}/restore">Restore<span class="visually-hidden"> revision ${r.revision}</span></a>`}</td>
</tr>`,
)}
</tbody></table></div>`;
}

function pager(id: string, page: number, totalPages: number): Html {
  if (totalPages <= 1) return html``;
  const link = (p: number, label: string, rel: string) =>
    html`<a href="${articlePath(id)}?page=${p}#history" rel="${rel}">${label}</a>`;
  return html`<nav class="pager" aria-label="History pages">${page > 1 ? link(page - 1, 'Newer revisions', 'prev') : ''}
<span class="muted">Page ${page} of ${totalPages}</span>
${page < totalPages ? link(page + 1, 'Older revisions', 'next') : ''}</nav>`;
}

export const articlePages: FastifyPluginAsync<PagesDeps> = async (app, { kit, application, diff, heavy }) => {
  installFormParser(app, kit);
  installPageHeaders(app, { policy: ARTICLE_PAGE_CSP });
  recordChanges(app, kit, application.activity);

  const notFound = (what: string) => new DomainError('not_found', what);

  /** The article id of the path, or a 404 page. */
  function articleIdOf(request: FastifyRequest): string {
    const { id } = request.params as { id?: string };
    if (typeof id !== 'string' || !ID_PATTERN.test(id)) throw notFound(`No article ${id ?? ''}`);
    return id;
  }
  function revisionParam(request: FastifyRequest): number {
    const n = revisionOf((request.params as { n?: string }).n);
    if (n === null) throw notFound('No such revision');
    return n;
  }

  /** Runs a page; an application refusal becomes its page (404 for another account's article). */
  async function page(
    request: FastifyRequest,
    reply: FastifyReply,
    render: (session: WebSession) => Promise<FastifyReply>,
  ): Promise<FastifyReply> {
    const session = await kit.signedIn(request, reply);
    if (!session) return reply;
    try {
      return await render(session);
    } catch (error) {
      return sendRefusal(kit, request, reply, session, error);
    }
  }

  app.get('/articles/:id', { schema: { hide: true } }, (request, reply) =>
    page(request, reply, async (session) => {
      const id = articleIdOf(request);
      const query = request.query as { page?: string; restored?: string; unchanged?: string };
      const historyPage = wholeNumber(query.page, PAGE_MAX) ?? 1;
      const call = webCall(request, session);
      const article = unwrap(await application.articles.get(call, id));
      const history = unwrap(
        await application.revisions.list(call, id, {
          page: historyPage,
          per_page: HISTORY_PER_PAGE,
        }),
      );
      const restored = revisionOf(query.restored);
      const restoredRecord = history.data.find((r) => r.revision === restored && r.restored_from);
      const unchanged = revisionOf(query.unchanged);
      const notice = restoredRecord
        ? html`<p class="notice" role="status" id="restored">Restored: revision ${restoredRecord.revision} has the content of revision ${restoredRecord.restored_from}. The history keeps every earlier revision.</p>`
        : unchanged
          ? html`<p class="notice" role="status" id="restored">Revision ${unchanged} has the same content as the current version: nothing was changed.</p>`
          : savedNotice(query, article.revision);
      const links = article.protected_links;
      const body = html`${await articleCrumbs(application, call, article)}<div class="article-view">
${notice}
<div class="card">
<h1>${article.title}</h1>
<div class="article-head">
<dl class="facts">
<dt>Status</dt><dd><span class="tag">${STATUSES[article.status]}</span>${article.published_at ? html` <span class="muted">${article.status === 'scheduled' ? 'for' : 'on'} ${when(article.published_at)}</span>` : ''}</dd>
<dt>URL</dt><dd>${linkTo(article.url, article.url)}</dd>
<dt>Target keyword</dt><dd>${article.target_keyword ?? html`<span class="muted">none</span>`}</dd>
<dt>Word count</dt><dd>${article.word_count}</dd>
<dt>Revision</dt><dd>${article.revision} <span class="muted">(updated ${when(article.updated_at)})</span></dd>
</dl>
${featuredImage(article.featured_image)}
</div>
<div class="actions"><a class="button primary" href="${articlePath(id)}/edit">Edit article</a>
<a class="button" href="${articlePath(id)}/featured-image">${article.featured_image ? 'Replace featured image' : 'Add a featured image'}</a>
<a class="button" href="${revisionPath(id, article.revision)}">Current revision and its changes</a></div>
<nav class="jump" aria-label="On this page"><a href="#body">Text</a> <a href="#protected-links">Protected links (${links.length})</a> <a href="#as-of">View as of…</a> <a href="#history">History (${history.meta.total})</a></nav>
</div>
<section class="card" aria-labelledby="body">
<h2 id="body">Text</h2>
${storedBody(article.body)}
</section>
<section class="card" aria-labelledby="protected-links">
<h2 id="protected-links">Protected links</h2>
<p class="muted">Links the service placed in the text: an edit or a restore must keep them.</p>
${
  links.length === 0
    ? html`<p class="muted">This article has no protected links.</p>`
    : html`<div class="scroll"><table class="links"><thead><tr><th scope="col">Kind</th><th scope="col">Text</th><th scope="col">Address</th></tr></thead><tbody>
${links.map((l) => html`<tr><td>${l.kind}</td><td>${l.text}</td><td><code>${l.href}</code></td></tr>`)}
</tbody></table></div>`
}
</section>
<section class="card" aria-labelledby="as-of">
<h2 id="as-of">View as of…</h2>
${asOfForm(asOfPath(id), readAsOf({}))}
</section>
<section class="card" aria-labelledby="history">
<h2 id="history">History</h2>
<p class="muted">Every change is a revision; restoring one adds a new revision with its content.</p>
${
  article.revision > 1
    ? html`<h3 class="change-part" id="compare">Compare two revisions</h3>
${compareForm(id, article.revision, article.revision - 1, article.revision)}`
    : ''
}
${historyTable(id, history.data, article.revision)}
${pager(id, historyPage, history.meta.total_pages)}
</section>
</div>`;
      return kit.send(reply, { title: article.title, body, session, request, wide: true });
    }),
  );

  /**
   * The article as it stood at an instant (`?date=YYYY-MM-DD&time=HH:MM[:SS]`, UTC): the API's
   * `getAsOf`. The article must be the person's first (another account's is the 404 page); then an
   * instant not given is the form alone, a malformed or future one the form again with its error
   * (400), one before the article existed says so (404), with the form kept filled.
   */
  app.get('/articles/:id/as-of', { schema: { hide: true } }, (request, reply) =>
    page(request, reply, async (session) => {
      const id = articleIdOf(request);
      const call = webCall(request, session);
      const article = unwrap(await application.articles.get(call, id));
      const asked = readAsOf(request.query);
      let status = 200;
      let result: Html = html``;
      let refusal: Html = html``;
      let stated: string | null = null;
      let invalid: 'date' | null = null;
      if (asked.kind === 'refused') {
        status = 400;
        refusal = asOfRefusal(asked.message);
      } else if (asked.kind === 'instant') {
        const outcome = await application.articles.getAsOf(call, id, asked.instant);
        if (outcome.ok) {
          stated = outcome.value.as_of;
          result = asOfView(outcome.value, {
            revisionHref: (n) => revisionPath(id, n),
            currentHref: articlePath(id),
            compareHref: (from, to) => `${comparePath(id)}?from=${from}&to=${to}`,
            current: article.revision,
            images: true,
            body: storedBody,
          });
        } else if (isDomainError(outcome.error) && outcome.error.code === 'invalid_request') {
          // The instant was read as the API reads it: what is left to refuse is a future one.
          status = 400;
          invalid = 'date';
          refusal = inFuture(asked.instant, kit.now());
        } else if (isDomainError(outcome.error) && outcome.error.code === 'not_found') {
          status = 404;
          const first = await application.revisions.get(call, id, 1);
          refusal = notYet(asked.instant, first.ok ? first.value.created_at : null);
        } else {
          throw outcome.error;
        }
      }
      const body = html`<div class="article-view">
<div class="card">
${await articleCrumbs(application, call, article, [['As of…', null]])}
<h1>View as of…</h1>
${refusal}
${asOfForm(asOfPath(id), asked, { invalid })}
<div class="actions"><a class="button" href="${articlePath(id)}">Back to the current version</a></div>
</div>
${stated ? html`<section class="card as-of-view" aria-labelledby="as-of-title">${result}</section>` : ''}
</div>`;
      return kit.send(reply, {
        status,
        title: `${stated ? `As it stood at ${stated}` : 'View as of'} · ${article.title}`,
        body,
        session,
        request,
        wide: true,
      });
    }),
  );

  // A static segment: the router prefers it to `/revisions/:n`.
  app.get(
    '/articles/:id/revisions/compare',
    { schema: { hide: true }, config: { heavyPage: true } },
    (request, reply) =>
      page(request, reply, async (session) => {
        // Two bodies read by replay and compared whole: heavy work, as a revision page is.
        await heavy.admit(request, reply);
        const id = articleIdOf(request);
        const query = request.query as { from?: unknown; to?: unknown };
        const call = webCall(request, session);
        const article = unwrap(await application.articles.get(call, id));
        const from = revisionOf(query.from);
        const to = revisionOf(query.to);
        const picked = from !== null && to !== null;
        let result: Html;
        let status = 200;
        if (!picked) {
          status = 400;
          result = html`<div class="error" role="alert" id="refusal"><p>Choose two revisions, From and To, and press Compare.</p></div>`;
        } else {
          const outcome = await application.revisions.compare(call, id, { from, to });
          if (outcome.ok) {
            result = comparison(id, outcome.value);
          } else if (isDomainError(outcome.error) && outcome.error.code === 'diff_too_large') {
            const [before, after] = await Promise.all([
              application.revisions.get(call, id, from).then(unwrap),
              application.revisions.get(call, id, to).then(unwrap),
            ]);
            result = html`${titles(from, to, before.title, after.title)}
<h3 class="change-part">Text</h3>
<p class="diff-fallback" id="too-large">These two revisions are too long or too different to compare here, or the server is busy comparing others just now. Read each whole: <a href="${revisionPath(id, from)}#content">revision ${from}</a> and <a href="${revisionPath(id, to)}#content">revision ${to}</a>.</p>`;
          } else {
            throw outcome.error;
          }
        }
        const heading = picked ? `Revision ${from} compared with revision ${to}` : 'Compare two revisions';
        const body = html`<div class="article-view">
<div class="card">
${await articleCrumbs(application, call, article, [['Compare revisions', null]])}
<h1>${heading}</h1>
${compareForm(id, article.revision, from ?? Math.max(1, article.revision - 1), to ?? article.revision)}
<div class="actions"><a class="button" href="${articlePath(id)}#history">Back to the article</a></div>
</div>
<section class="card" aria-labelledby="changes">
<h2 id="changes">${picked ? `Changes from revision ${from} to revision ${to}` : 'Changes'}</h2>
${picked ? DIFF_LEGEND : ''}${result}
</section>
</div>`;
        return kit.send(reply, {
          status,
          title: `${heading} · ${article.title}`,
          body,
          session,
          request,
          wide: true,
        });
      }),
  );

  app.get(
    '/articles/:id/revisions/:n',
    { schema: { hide: true }, config: { heavyPage: true } },
    (request, reply) =>
      page(request, reply, async (session) => {
        // Up to three bodies read, two diffs, one rendered: a revision page is heavy work.
        await heavy.admit(request, reply);
        const id = articleIdOf(request);
        const n = revisionParam(request);
        const call = webCall(request, session);
        const article = unwrap(await application.articles.get(call, id));
        const at = unwrap(await application.revisions.get(call, id, n));
        const previous = n > 1 ? unwrap(await application.revisions.get(call, id, n - 1)) : null;
        const isCurrent = n === article.revision;
        const [fromPrevious, toCurrent] = await Promise.all([
          previous
            ? changes(diff, previous, at, 'diff-previous', {
                before: { label: `revision ${n - 1}`, href: revisionPath(id, n - 1) },
                after: { label: `revision ${n}`, href: `${revisionPath(id, n)}#content` },
              })
            : null,
          isCurrent
            ? null
            : changes(diff, at, article, 'diff-current', {
                before: { label: `revision ${n}`, href: `${revisionPath(id, n)}#content` },
                after: { label: `the current version`, href: articlePath(id) },
              }),
        ]);
        const body = html`<div class="article-view">
<div class="card">
${await articleCrumbs(application, call, article, [[`Revision ${n}`, null]])}
<h1>Revision ${n}${isCurrent ? html` <span class="tag">current</span>` : ''}</h1>
<dl class="facts">
<dt>When</dt><dd>${when(at.created_at)}</dd>
<dt>Origin</dt><dd>${originLabel(at.origin)}</dd>
<dt>By</dt><dd>${actorLabel(at.actor)}</dd>
<dt>Reason</dt><dd>${at.reason ?? html`<span class="muted">none given</span>`}</dd>
${at.restored_from ? html`<dt>Restores</dt><dd><a href="${revisionPath(id, at.restored_from)}">revision ${at.restored_from}</a></dd>` : ''}
<dt>Status then</dt><dd>${STATUSES[at.status]}</dd>
<dt>Word count</dt><dd>${at.word_count}</dd>
</dl>
<div class="actions">${
          isCurrent
            ? html`<p class="muted">This is the current version.</p>`
            : html`<a class="button primary" href="${revisionPath(id, n)}/restore">Restore revision ${n}…</a>`
        }
<a class="button" href="${articlePath(id)}#history">Back to the article</a></div>
<nav class="pager" aria-label="Revisions">${n > 1 ? html`<a href="${revisionPath(id, n - 1)}" rel="prev">Revision ${n - 1}</a>` : ''}
${n < article.revision ? html`<a href="${revisionPath(id, n + 1)}" rel="next">Revision ${n + 1}</a>` : ''}</nav>
</div>
<section class="card" aria-labelledby="against-previous">
<h2 id="against-previous">${previous ? `Changes from revision ${n - 1}` : 'The first revision'}</h2>
${fromPrevious ? html`${DIFF_LEGEND}${fromPrevious}` : html`<p class="muted">The article was created with this content.</p>`}
</section>
${
  isCurrent
    ? ''
    : html`<section class="card" aria-labelledby="against-current">
<h2 id="against-current">Changes from revision ${n} to the current version (revision ${article.revision})</h2>
${DIFF_LEGEND}${toCurrent ?? ''}
</section>`
}
<section class="card" aria-labelledby="content">
<h2 id="content">Content at revision ${n}</h2>
<h3 class="revision-title">${at.title}</h3>
${featuredImage(at.featured_image)}
${storedBody(at.body)}
</section>
</div>`;
        return kit.send(reply, {
          title: `Revision ${n} · ${article.title}`,
          body,
          session,
          request,
          wide: true,
        });
      }),
  );

  /** The confirmation page: what restoring n changes in the current version, a reason, the button. */
  async function restorePage(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    opts: {
      article: ArticleOut;
      at: RevisionContentOut;
      reason?: string;
      status?: number;
      refusal?: Html;
    },
  ): Promise<FastifyReply> {
    const { article, at } = opts;
    const id = article.id;
    const n = at.revision;
    const current = article.revision === n;
    const whatChanges = current
      ? null
      : await changes(diff, article, at, 'diff-restore', {
          before: { label: 'the current version', href: articlePath(id) },
          after: { label: `revision ${n}`, href: `${revisionPath(id, n)}#content` },
        });
    const body = html`<div class="article-view">
<div class="card">
${await articleCrumbs(application, webCall(request, session), article, [
  [`Revision ${n}`, revisionPath(id, n)],
  ['Restore', null],
])}
<h1>Restore revision ${n}?</h1>
${opts.refusal ?? ''}
${
  current
    ? html`<p id="nothing-to-restore">Revision ${n} is the current version: there is nothing to restore.</p>
<div class="actions"><a class="button" href="${articlePath(id)}">Back to the article</a></div>`
    : html`<p>This adds revision ${article.revision + 1} with the title, text and featured image of revision ${n} (from ${when(at.created_at)}). Revision ${article.revision} and every earlier one stay in the history.</p>
<form method="post" action="${revisionPath(id, n)}/restore">
${kit.csrfField(request, reply, session)}
<input type="hidden" name="expected_revision" value="${article.revision}">
<label for="reason">Reason <span class="muted">(optional, kept in the history)</span></label>
<input type="text" id="reason" name="reason" maxlength="${REASON_MAX}" value="${opts.reason ?? ''}" placeholder="Back to the version before the rewrite">
<div class="actions"><button class="primary" type="submit">Restore revision ${n}</button>
<a class="button" href="${revisionPath(id, n)}">Cancel</a></div>
</form>`
}
</div>
${
  current
    ? ''
    : html`<section class="card" aria-labelledby="what-changes">
<h2 id="what-changes">What will change</h2>
<p class="muted">From the current version (revision ${article.revision}) to revision ${n}.</p>
${DIFF_LEGEND}${whatChanges ?? ''}
</section>`
}
</div>`;
    return kit.send(reply, {
      status: opts.status ?? 200,
      title: `Restore revision ${n} · ${article.title}`,
      body,
      session,
      request,
      wide: true,
    });
  }

  app.get(
    '/articles/:id/revisions/:n/restore',
    { schema: { hide: true }, config: { heavyPage: true } },
    (request, reply) =>
      page(request, reply, async (session) => {
        await heavy.admit(request, reply);
        const id = articleIdOf(request);
        const n = revisionParam(request);
        const call = webCall(request, session);
        const article = unwrap(await application.articles.get(call, id));
        const at = unwrap(await application.revisions.get(call, id, n));
        return restorePage(request, reply, session, { article, at });
      }),
  );

  app.post('/articles/:id/revisions/:n/restore', RESTORE_FORM, async (request, reply) => {
    const session = await kit.signedIn(request, reply);
    if (!session || !kit.checkForm(request, reply, session)) return reply;
    const parsed = RestoreForm.safeParse(request.body ?? {});
    const form = parsed.success ? parsed.data : {};
    const reason = (form.reason ?? '').trim();
    try {
      await heavy.admit(request, reply);
      const id = articleIdOf(request);
      const n = revisionParam(request);
      const call = webCall(request, session);
      const refused = async (status: number, refusal: Html) => {
        const [article, at] = await Promise.all([
          application.articles.get(webCall(request, session), id).then(unwrap),
          application.revisions.get(webCall(request, session), id, n).then(unwrap),
        ]);
        return restorePage(request, reply, session, { article, at, reason, status, refusal });
      };
      const expectedRevision = revisionOf(form.expected_revision);
      if (expectedRevision === null) {
        return await refused(
          400,
          html`<div class="error" role="alert"><p>The form did not say which version it was opened on. Look at the changes below and confirm again.</p></div>`,
        );
      }
      if (reason.length > REASON_MAX) {
        return await refused(
          400,
          html`<div class="error" role="alert"><p>The reason is ${reason.length} characters long; at most ${REASON_MAX} are kept.</p></div>`,
        );
      }
      const outcome = await application.revisions.restore(call, {
        articleId: id,
        revision: n,
        reason: reason === '' ? null : reason,
        expectedRevision,
      });
      let result: ArticleWrite;
      try {
        result = settled(request, reply, outcome);
      } catch (error) {
        if (!isDomainError(error) || error.code === 'not_found') throw error;
        const current = unwrap(await application.articles.get(webCall(request, session), id));
        return await refused(statusOf[error.code], refusalOf(error, current, expectedRevision));
      }
      const { change } = result;
      return reply.redirect(
        change.changed
          ? `${articlePath(id)}?restored=${change.revision}`
          : `${articlePath(id)}?unchanged=${n}`,
        303,
      );
    } catch (error) {
      return sendRefusal(kit, request, reply, session, error);
    }
  });
};

/** Why a restore was refused, in words, with what the person can do. */
function refusalOf(error: DomainError, current: ArticleOut, expected: number): Html {
  const alert = (title: string, detail: Html) =>
    html`<div class="error" role="alert" id="refusal"><p><strong>${title}</strong></p>${detail}</div>`;
  switch (error.code) {
    case 'revision_mismatch':
      return alert(
        'The article changed since you opened this page.',
        html`<p>You confirmed on revision ${expected}; it is now at revision ${current.revision}. The changes below are against the version as it is now: look at them and confirm again.</p>`,
      );
    case 'protected_links_modified': {
      const byId = new Map(current.protected_links.map((l) => [l.id, l]));
      const blocks = (error.errors ?? []).filter((e): e is ProtectedChange => 'change' in e);
      return alert(
        'This restore would remove protected links.',
        html`<p>These links were placed after that revision and must stay:</p><ul id="protected-refused">${blocks.map(
          (b) => {
            const link = byId.get(b.id);
            return html`<li>${link ? html`${link.kind} link “${link.text}” to <code>${link.href}</code>` : html`<code>${b.id}</code>`} (would be ${b.change})</li>`;
          },
        )}</ul><p>Restore a later revision, or edit the article instead.</p>`,
      );
    }
    case 'edit_limit_reached':
      return alert("Today's edits are used up.", html`<p>${sentence(error.message)}</p>`);
    default:
      return alert('That did not work.', html`<p>${sentence(error.message)}</p>`);
  }
}

/** A message as a sentence: a capital first and a full stop last. */
export function sentence(message: string): string {
  const text = message.trim();
  if (text === '') return text;
  const capital = text[0]?.toUpperCase() + text.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}
