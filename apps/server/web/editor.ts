import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { BODY_MAX_BYTES, BODY_MAX_MIB, REASON_MAX, TITLE_MAX } from '../../../domain/article/events.ts';
import { DomainError, isDomainError } from '../../../domain/errors.ts';
import type { ProtectedChange } from '../../../domain/html/protected.ts';
import { restoreProtectedBlocks } from '../../../domain/html/protected-repair.ts';
import type { SanitizeReason } from '../../../domain/html/sanitized-item.ts';
import { diffChanges } from '../../../domain/html/word-diff.ts';
import { ID_PATTERN } from '../../../domain/input.ts';
import type { ArticleWrite } from '../../application/article-write.ts';
import type { ArticleOut, EditPreview } from '../../application/articles.ts';
import { unwrap } from '../../application/call.ts';
import { revisionOf } from '../../application/contract.ts';
import type { RevisionContentOut, RevisionOut } from '../../application/revisions.ts';
import { answerErrorsWith, statusOf } from '../http/errors.ts';
import { type Html, html, raw } from '../http/html.ts';
import { settled } from '../http/outcome.ts';
import { actorLabel, originLabel } from './articles.ts';
import { recordChanges, webCall } from './call.ts';
import { installFormParser, installPageHeaders, SCRIPT_PAGE_CSP } from './kit.ts';
import type { PagesDeps } from './pages.ts';
import { sendRefusal } from './refusal.ts';
import type { WebSession } from './sessions.ts';
import { articleCrumbs } from './sites.ts';
import { DIFF_LEGEND, renderBodyDiff, shownDiff } from './word-diff.ts';

/*
 * The editor without JavaScript (`/articles/{id}/edit`): a form with the title, the body's HTML in a
 * textarea and a reason, the article's protected links beside it. Saving is `articles.edit` with
 * origin `editor` and the person as actor, through the same command as the API's PUT:
 * - saved: to the article page (`?saved=<revision>`), or, when the sanitiser removed something, a
 *   page that lists what it removed;
 * - nothing changed: the form again, saying so (no revision is made);
 * - refused (protected links, a stale revision, the title or body rules, the edit limit): the form
 *   again with the person's text, the status the API answers and what went wrong; a stale save also
 *   shows what changed since the revision the person started from, and offers to save on top of the
 *   current one; a save refused for its protected links offers to put them back (`action=repair`:
 *   `restoreProtectedBlocks`, the form again with the repaired body, nothing saved; in the activity
 *   log as `articles.put_back_protected_links`, with the article's site and no revision).
 * - checked (`Check changes`, the form sent to `/articles/{id}/preview`, JavaScript or not): the form
 *   again with the person's text and, above it, what saving it would do, from `articles.preview` (the
 *   decider's own verdict): what the sanitiser would remove, protected links it would be refused for,
 *   whether it would make a revision, and the word diff against the current revision. Nothing is saved;
 *   refused as Save is (a stale revision shows what changed since).
 * Enter in a field does not send the form: its first submit button, the one implicit submission
 * clicks, is disabled (and hidden); the form is sent by its Save button (or Ctrl/Cmd+S, with JavaScript).
 * With JavaScript the script sends Save and "Put the protected links back" with fetch and the field
 * `in_place=1` (apps/web-client/save-in-place.ts): the same route, the same checks (sender before the
 * body, then CSRF), the same outcomes, but a save is answered with this page again (its notice
 * "Saved as revision N", the removed items when any) instead of the redirect, and the script takes
 * the parts it needs from the answer (`#editor-messages`, the form's fields, the protected links,
 * the revisions): one rendering of every outcome.
 * `?since=N` (a revision before the current one) adds what changed since revision N above the form:
 * the stale save's view, which the script shows beside a draft kept in the browser since revision N.
 * Below the form, the article's latest revisions (`#revisions`, a <details>; a drawer with JavaScript),
 * each linking to its page, to the compare page against the current one and to Restore's confirmation.
 */

/**
 * Form bodies of this page: a body of BODY_MAX_MIB of HTML, url-encoded (a byte may take three
 * characters), with room for the other fields. Anything the domain would refuse for its size gets
 * the domain's message on the form; only bodies past this limit are cut off by the parser.
 */
export const EDITOR_FORM_LIMIT = 4 * BODY_MAX_BYTES;

/** What the person typed: kept in the form when a save is refused. */
export type Draft = { title: string; body: string; reason: string; expectedRevision: number };

/** Sanitiser reasons in words. */
const REMOVED_BECAUSE: Record<SanitizeReason, string> = {
  element_not_allowed: 'element not allowed (its text was kept)',
  unsafe_element: 'unsafe element (removed with its content)',
  invalid_nesting: 'element in a place HTML does not allow (its text was kept)',
  misplaced_text: 'text inside a table but outside any cell',
  attribute_not_allowed: 'attribute not allowed',
  event_handler: 'script event handler',
  unsafe_url: 'unsafe link address',
  invalid_protection_marker: 'invalid protection marker',
  link_opener:
    'a link that opens another page: its rel now says noopener noreferrer, so that page cannot reach this one',
  comment: 'HTML comment',
  unstable_markup: 'markup that could not be kept (its text was kept)',
  more_removed: 'removed as well, not listed one by one (where the first of them was)',
};

/** The most characters of a removed item shown on a page. */
const REMOVED_SHOWN = 200;

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** What the sanitiser removed (or, `would`, would remove on saving), as a table; nothing when nothing. */
export function removedList(
  items: readonly { path: string; removed: string; reason: string }[],
  opts: { would?: boolean } = {},
): Html {
  if (items.length === 0) return html``;
  const [heading, intro] = opts.would
    ? [
        'Would be removed when saving',
        'These are not allowed in an article’s HTML and would be taken out of your text:',
      ]
    : [
        'Removed when saving',
        "These are not allowed in an article's HTML and were taken out of what you sent:",
      ];
  // Within a check's section its heading is one level down.
  const title = opts.would
    ? html`<h3 id="removed-heading">${heading}</h3>`
    : html`<h2 id="removed-heading">${heading}</h2>`;
  return html`${title}
<p>${intro}</p>
<div class="table-scroll"><table id="removed" aria-labelledby="removed-heading"><thead><tr><th>Removed</th><th>Why</th><th>Where</th></tr></thead><tbody>
${items.map(
  (item) =>
    html`<tr><td><code>${shorten(item.removed, REMOVED_SHOWN)}</code></td><td>${REMOVED_BECAUSE[item.reason as SanitizeReason] ?? item.reason}</td><td><code>${item.path}</code></td></tr>`,
)}
</tbody></table></div>`;
}

/** The form's fields as text; anything missing or not a string is empty. */
export function draftOf(body: unknown, fallbackRevision: number): Draft {
  const fields = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const text = (name: string): string => (typeof fields[name] === 'string' ? (fields[name] as string) : '');
  const expected = text('expected_revision');
  return {
    title: text('title'),
    body: text('body'),
    reason: text('reason'),
    expectedRevision: revisionOf(expected) ?? fallbackRevision,
  };
}

/**
 * The notice the article page shows after the editor saved (`/articles/{id}?saved=<revision>`), or
 * nothing when the query has no such flag or names a revision the article does not have yet.
 */
export function savedNotice(query: unknown, current: number): Html {
  const saved =
    typeof query === 'object' && query !== null ? (query as Record<string, unknown>).saved : undefined;
  if (typeof saved !== 'string' || !/^[1-9][0-9]{0,9}$/.test(saved) || Number(saved) > current) return html``;
  return html`<p class="notice" role="status" id="saved-notice">Saved as revision ${saved}.</p>`;
}

function when(iso: string): string {
  return `${iso.slice(0, 16).replace('T', ' ')} UTC`;
}

const articlePath = (id: string): string => `/articles/${encodeURIComponent(id)}`;

/** What a refused edit did to a protected link: in the message, and beside the link in the list. */
const CHANGE_WORDS: Record<ProtectedChange['change'], { message: string; mark: string }> = {
  removed: { message: 'removed', mark: 'removed from your text' },
  rewritten: { message: 'changed', mark: 'changed in your text' },
  forged: { message: 'added (only the service adds them)', mark: 'added again in your text' },
};

/** The protected links a refused edit touched, by id, with what it did to each (the first thing said of it). */
type Refused = ReadonlyMap<string, ProtectedChange['change']>;

function refusedOf(changes: readonly ProtectedChange[]): Refused {
  const refused = new Map<string, ProtectedChange['change']>();
  for (const { id, change } of changes) if (!refused.has(id)) refused.set(id, change);
  return refused;
}

/** Beside a link in the list: what the refused edit did to it, in the message's words. */
function refusedMark(change: ProtectedChange['change'] | undefined): Html | string {
  return change ? html`<strong class="refused-mark">${CHANGE_WORDS[change].mark}</strong>` : '';
}

/** The activity log's operation for the editor's "Put the protected links back" (`action=repair`): nothing saved. */
export const PUT_BACK_OPERATION = 'articles.put_back_protected_links';

/** Revisions listed in the editor's revisions panel; the article page's history has them all. */
const PANEL_REVISIONS = 50;

/** True when the editor's script sent the form (`in_place=1`): a save is answered with the editor again. */
function inPlace(request: FastifyRequest): boolean {
  return (request.body as Record<string, unknown> | undefined)?.in_place === '1';
}

/**
 * The editor's revisions panel: the latest revisions, newest first, each with its origin, actor and
 * time, linking to its page, to the compare page against the current one and, but the current, to
 * Restore's confirmation page. A <details> without JavaScript; the script opens it as a drawer.
 */
export function revisionsPanel(
  id: string,
  revisions: readonly RevisionOut[],
  current: number,
  total: number,
): Html {
  const path = articlePath(id);
  return html`<details class="revisions-panel" id="revisions">
<summary>Revisions <span class="muted">(${total})</span></summary>
<div id="revisions-list">
<p class="muted">Newest first. Opening, comparing or restoring one leaves this editor: save your text first.</p>
<ol class="revision-list">
${revisions.map(
  (r) => html`<li id="panel-revision-${r.revision}">
<p class="revision-line"><a href="${path}/revisions/${r.revision}">Revision ${r.revision}</a>${r.revision === current ? html` <span class="tag">current</span>` : ''} <span class="muted"><time datetime="${r.created_at}">${when(r.created_at)}</time></span></p>
<p class="muted">${originLabel(r.origin)} · ${actorLabel(r.actor)}${r.restored_from ? html` · restores revision ${r.restored_from}` : ''}${r.reason ? html` · “${r.reason}”` : ''}</p>
${
  r.revision === current
    ? ''
    : html`<p class="revision-actions"><a href="${path}/revisions/compare?from=${r.revision}&amp;to=${current}">Compare with current<span class="visually-hidden"> (revision ${r.revision})</span></a> <a href="${path}/revisions/${r.revision}/restore">Restore<span class="visually-hidden"> revision ${r.revision}</span>…</a></p>`
}
</li>`,
)}
</ol>
${total > revisions.length ? html`<p><a href="${path}#history">All ${total} revisions, on the article page</a></p>` : ''}
</div>
</details>`;
}

export const editorRoutes: FastifyPluginAsync<PagesDeps> = async (app, { kit, application, diff }) => {
  installPageHeaders(app);
  recordChanges(app, kit, application.activity);
  // Large bodies, in this plugin's scope only (the other pages keep FORM_BODY_MAX).
  installFormParser(app, kit, { bodyLimit: EDITOR_FORM_LIMIT });

  // A form past even the parser's limit: the domain's words on a page, not a JSON 413.
  answerErrorsWith(app, async (error, request, reply) => {
    if (error.code !== 'FST_ERR_CTP_BODY_TOO_LARGE') return null;
    const session = await kit.sessions.current(request);
    const back = request.url.split('?')[0] ?? '/sites';
    return kit.send(reply, {
      status: 413,
      title: 'Body too large',
      session,
      request,
      body: html`<div class="card"><h1>The body is too large</h1>
<p role="alert">The body is larger than ${BODY_MAX_MIB} MiB, the most an article can have. Nothing was saved, and the text could not be kept: go back in your browser to get it.</p>
<p><a href="${back}">Open the editor again</a></p></div>`,
    });
  });

  /** The article, or a refusal page (not found, another account's) and null. */
  async function load(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    id: string,
  ): Promise<ArticleOut | null> {
    try {
      if (!ID_PATTERN.test(id)) throw new DomainError('not_found', `No article ${id}`);
      return unwrap(await application.articles.get(webCall(request, session), id));
    } catch (error) {
      sendRefusal(kit, request, reply, session, error);
      return null;
    }
  }

  async function editorPage(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    article: ArticleOut,
    opts: {
      status?: number;
      draft?: Draft;
      notice?: Html;
      error?: Html;
      stale?: Html;
      /** What saving the draft would do (Check changes), above the form. */
      check?: Html;
      refused?: Refused;
      /** What the answer is (the script reads it): saved, unchanged, repaired, refused, stale, checked, since. */
      outcome?: string;
    } = {},
  ): Promise<FastifyReply> {
    const draft: Draft = opts.draft ?? {
      title: article.title,
      body: article.body,
      reason: '',
      expectedRevision: article.revision,
    };
    const path = articlePath(article.id);
    const links = article.protected_links;
    const call = webCall(request, session);
    const history = unwrap(
      await application.revisions.list(call, article.id, { page: 1, per_page: PANEL_REVISIONS }),
    );
    const body = html`${await articleCrumbs(application, call, article, [['Edit', null]])}<div class="editor">
<div class="card editor-main">
<h1>Edit “${article.title}”</h1>
<p class="muted" id="editor-revision">Revision ${article.revision} · <a href="${path}">Back to the article</a></p>
<div id="editor-messages" data-outcome="${opts.outcome ?? ''}">
${opts.notice ?? ''}
${opts.error ?? ''}
${opts.stale ?? ''}
${opts.check ?? ''}
</div>
<form method="post" action="${path}/edit" class="editor-form" id="editor-form">
${kit.csrfField(request, reply, session)}
<button type="submit" disabled hidden aria-hidden="true" tabindex="-1">Save</button>
${
  opts.refused && opts.refused.size > 0
    ? html`<div class="repair" id="repair"><button type="submit" name="action" value="repair" aria-describedby="repair-help">Put the protected links back</button>
<p class="muted" id="repair-help">Puts each protected link back as it was, in its place (a removed one where the words around it still are, otherwise at the end of the body), makes copies ordinary links, and keeps the rest of your text. Nothing is saved until you press Save.</p></div>`
    : ''
}
<input type="hidden" name="expected_revision" value="${draft.expectedRevision}">
<label for="title">Title</label>
<input type="text" id="title" name="title" maxlength="${TITLE_MAX}" required value="${draft.title}">
<label for="body">Body (HTML)</label>
<p class="muted" id="body-help">The article's HTML. When you save, anything not allowed in an article (scripts, event handlers, unsafe links) is removed and listed. The <a href="#protected-heading">protected links</a>, listed beside it, must stay as they are: you may move one, but not remove it or change its words or address.</p>
<textarea id="body" name="body" rows="22" aria-describedby="body-help" data-rich-editor>
${draft.body}</textarea>
${
  // For the rich editor: the protected links of the article as it is (the text sent is refused).
  opts.refused && opts.refused.size > 0
    ? html`<template id="protected-source">${raw(article.body)}</template>`
    : ''
}
<label for="reason">Reason for the change <span class="muted">(optional, shown in the history)</span></label>
<input type="text" id="reason" name="reason" maxlength="${REASON_MAX}" value="${draft.reason}">
<div class="actions"><button class="primary" type="submit">${opts.stale ? `Save on top of revision ${draft.expectedRevision}` : 'Save'}</button><button type="submit" name="intent" value="check" formaction="${path}/preview" aria-describedby="check-help">Check changes</button><a class="cancel" href="${path}">Cancel</a></div>
<p class="muted" id="check-help">Check changes shows what saving would do (what would be removed, protected links, the changed words) without saving.</p>
</form>
${revisionsPanel(article.id, history.data, article.revision, history.meta.total)}
</div>
<aside class="card protected-links" aria-labelledby="protected-heading">
<h2 id="protected-heading">Protected links</h2>
${
  links.length === 0
    ? html`<p class="muted">This article has no protected links.</p>`
    : html`<p>The backlinks’ anchors and internal links the service placed in this article: they must stay as they are. You may move one within the text, but not remove it or change its words or address.</p>
<ul id="protected-links">
${links.map(
  (
    link,
  ) => html`<li${opts.refused?.has(link.id) ? html` class="refused"` : ''}><span class="link-text">${link.text}</span>
<span class="muted">${link.kind === 'backlink' ? 'backlink' : 'internal link'} · <code>${link.id}</code></span>
<code class="link-href">${link.href}</code>${refusedMark(opts.refused?.get(link.id))}</li>`,
)}
</ul>`
}
</aside>
</div>
<script type="module" src="/web/editor.js"></script>`;
    // The one page that runs a script: the rich editor, from this origin only.
    reply.header('content-security-policy', SCRIPT_PAGE_CSP);
    return kit.send(reply, {
      status: opts.status ?? 200,
      title: opts.check ? `Checked changes to ${article.title}` : `Edit ${article.title}`,
      body,
      session,
      request,
      wide: true,
    });
  }

  /** The protected blocks a refused edit removed or rewrote, named with their text. */
  function protectedError(error: DomainError, article: ArticleOut): { error: Html; refused: Refused } {
    const changes = (error.errors ?? []).flatMap((e) =>
      'change' in e && 'id' in e ? [{ id: e.id, change: e.change }] : [],
    );
    return {
      refused: refusedOf(changes),
      error: html`<div class="error" role="alert" id="editor-error">
<p><strong>Not saved: protected links must stay as they are.</strong> Put these back exactly as they were (you may move them), or use “Put the protected links back” below; your text is kept below.</p>
${protectedChanges(changes, article)}</div>`,
    };
  }

  /** What a check of the draft found (`articles.preview`): the verdict in words, what would be removed, the diff. */
  function checkView(article: ArticleOut, checked: EditPreview): { check: Html; refused: Refused } {
    const { preview, diff: whole } = checked;
    // The preview's diff is whole (as the API gives it); the page shortens its unchanged stretches.
    const bodyDiff = whole === null || whole === 'busy' ? whole : shownDiff(diffChanges(whole), whole.byLine);
    const { errors } = preview.protected_links;
    const verdict = !preview.protected_links.ok
      ? html`<strong>Saving this would be refused:</strong> protected links must stay as they are. Put these back exactly as they were (you may move them), or use “Put the protected links back”.`
      : preview.would_change
        ? html`<strong>Saving this would make revision ${preview.base_revision + 1}</strong> (${preview.word_count} words). Nothing is saved yet.`
        : html`<strong>Saving this would change nothing:</strong> the title and body are those of revision ${preview.base_revision}.`;
    const path = articlePath(article.id);
    return {
      refused: refusedOf(errors),
      check: html`<section class="edit-check" id="check" aria-labelledby="check-heading">
<h2 id="check-heading">Check of your changes</h2>
<p role="status" id="check-verdict">${verdict}</p>
${errors.length > 0 ? html`<div class="error" id="check-protected">${protectedChanges(errors, article)}</div>` : ''}
${removedList(preview.sanitized, { would: true })}
<h3>Title</h3>
${
  preview.title === article.title
    ? html`<p class="muted" id="check-title">The title stays “${article.title}”.</p>`
    : html`<p id="check-title"><del>${article.title}</del> → <ins>${preview.title}</ins></p>`
}
<h3>Text of the body</h3>
${
  preview.body === article.body
    ? html`<p class="muted" id="check-body">The body is the same as revision ${article.revision}.</p>`
    : bodyDiff !== null && bodyDiff !== 'busy' && bodyDiff.added === 0 && bodyDiff.removed === 0
      ? html`<p class="muted" id="check-body">The words are the same; only the markup differs (links, emphasis or layout).</p>`
      : html`${DIFF_LEGEND}
${renderBodyDiff(bodyDiff, {
  before: { label: `revision ${article.revision}`, href: `${path}/revisions/${article.revision}#content` },
  after: { label: 'your text below', href: '#body' },
})}`
}
</section>`,
    };
  }

  /** Protected blocks an edit removed, rewrote or forged, named with their text and address. */
  function protectedChanges(
    changes: readonly { id: string; change: 'removed' | 'rewritten' | 'forged' }[],
    article: ArticleOut,
  ): Html {
    const byId = new Map(article.protected_links.map((l) => [l.id, l]));
    return html`<ul>${changes.map((c) => {
      const link = byId.get(c.id);
      return html`<li>${link ? html`“${link.text}” ` : ''}<code>${c.id}</code>: ${CHANGE_WORDS[c.change].message}${link ? html` (<code>${link.href}</code>)` : ''}</li>`;
    })}</ul>`;
  }

  /** What changed between the revision the person started from and the current one. */
  async function staleView(
    request: FastifyRequest,
    session: WebSession,
    article: ArticleOut,
    from: number,
  ): Promise<Html> {
    const call = webCall(request, session);
    let before: RevisionContentOut | null = null;
    let now: RevisionContentOut | null = null;
    try {
      [before, now] = await Promise.all([
        application.revisions.get(call, article.id, from).then(unwrap),
        application.revisions.get(call, article.id, article.revision).then(unwrap),
      ]);
    } catch (error) {
      if (!isDomainError(error) || error.code !== 'not_found') throw error;
    }
    const intro = html`<p>You started from revision ${from}; the article is now at revision ${article.revision}${
      now ? html` (last saved ${when(now.created_at)} by ${now.actor.name}, ${now.origin})` : ''
    }. Your text is kept in the form below. Saving it now replaces revision ${article.revision}: bring the changes shown here into your text if they should stay.</p>`;
    if (!before || !now) {
      return html`<section class="stale" aria-labelledby="stale-heading" id="stale"><h2 id="stale-heading">Changed since you opened it</h2>${intro}</section>`;
    }
    const changes = await diff(before.body, now.body);
    return html`<section class="stale" aria-labelledby="stale-heading" id="stale">
<h2 id="stale-heading">Changed since you opened it</h2>
${intro}
<h3>Title</h3>
${
  before.title === now.title
    ? html`<p class="muted" id="stale-title">The title is the same: “${now.title}”.</p>`
    : html`<p id="stale-title"><del>${before.title}</del> → <ins>${now.title}</ins></p>`
}
<h3>Text of the body</h3>
<p class="muted">Words added since revision ${from} are <ins>underlined</ins>, words removed are <del>struck through</del>.</p>
${renderBodyDiff(changes, {
  before: { label: `revision ${from}`, href: `${articlePath(article.id)}/revisions/${from}#content` },
  after: {
    label: `revision ${article.revision}`,
    href: `${articlePath(article.id)}/revisions/${article.revision}#content`,
  },
})}
</section>`;
  }

  /**
   * A save or check refused: a refusal page (not found, another account's, not a domain refusal), or
   * the form again with the person's text, the API's status and what went wrong.
   */
  async function refusedForm(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    id: string,
    draft: Draft,
    error: unknown,
  ): Promise<FastifyReply> {
    if (!isDomainError(error) || error.code === 'not_found') {
      return sendRefusal(kit, request, reply, session, error);
    }
    // Every other refusal: the form again with the person's text and the API's status.
    const latest = await load(request, reply, session, id);
    if (!latest) return reply;
    const status = statusOf[error.code];
    if (error.code === 'revision_mismatch') {
      const stale = await staleView(request, session, latest, draft.expectedRevision);
      return editorPage(request, reply, session, latest, {
        status,
        outcome: 'stale',
        draft: { ...draft, expectedRevision: latest.revision },
        stale,
        error: html`<p class="error" role="alert" id="editor-error"><strong>Not saved:</strong> the article changed since you opened it. Nothing was overwritten.</p>`,
      });
    }
    if (error.code === 'protected_links_modified') {
      const named = protectedError(error, latest);
      return editorPage(request, reply, session, latest, { status, outcome: 'refused', draft, ...named });
    }
    return editorPage(request, reply, session, latest, {
      status,
      outcome: 'refused',
      draft,
      error: html`<p class="error" role="alert" id="editor-error"><strong>Not saved:</strong> ${error.message}.</p>`,
    });
  }

  app.get<{ Params: { id: string } }>(
    '/articles/:id/edit',
    { schema: { hide: true } },
    async (request, reply) => {
      const session = await kit.signedIn(request, reply);
      if (!session) return reply;
      const article = await load(request, reply, session, request.params.id);
      if (!article) return reply;
      // What changed since an earlier revision (a draft's): ignored when it is not one.
      const since = revisionOf((request.query as { since?: unknown } | undefined)?.since);
      if (since === null || since >= article.revision) return editorPage(request, reply, session, article);
      return editorPage(request, reply, session, article, {
        outcome: 'since',
        stale: await staleView(request, session, article, since),
      });
    },
  );

  /**
   * A POST of the editor form to `/articles/{id}/<action>`, recorded as `operation` (source `editor`):
   * the person signed in, the form checked, the article theirs; `handle` gets it and the person's draft.
   */
  function formRoute(
    action: string,
    operation: string,
    handle: (
      request: FastifyRequest,
      reply: FastifyReply,
      session: WebSession,
      article: ArticleOut,
      draft: Draft,
    ) => Promise<FastifyReply>,
  ): void {
    app.post<{ Params: { id: string } }>(
      `/articles/:id/${action}`,
      {
        schema: { hide: true },
        config: { form: { from: 'account' }, operation, subject: 'article', source: 'editor' },
      },
      async (request, reply) => {
        const id = request.params.id;
        const session = await kit.signedIn(request, reply, `${articlePath(id)}/edit`);
        if (!session || !kit.checkForm(request, reply, session)) return reply;
        const article = await load(request, reply, session, id);
        if (!article) return reply;
        return handle(request, reply, session, article, draftOf(request.body, article.revision));
      },
    );
  }

  formRoute('edit', 'update_article', async (request, reply, session, article, draft) => {
    const id = article.id;
    if ((request.body as Record<string, unknown> | undefined)?.action === 'repair') {
      // Not an edit: nothing is saved. In the activity log as what it was, on the article's site.
      request.activityOperation = PUT_BACK_OPERATION;
      request.activity = { siteId: article.site_id, articleId: article.id, revision: null };
      return editorPage(request, reply, session, article, {
        outcome: 'repaired',
        draft: { ...draft, body: restoreProtectedBlocks(article.body, draft.body) },
        notice: html`<div class="notice-box" role="status" id="editor-notice"><p><strong>The protected links are back as they were</strong> (one you had removed is back where the words around it still are, or else at the end of the body: check where it stands). The rest of your text is kept. Nothing is saved yet: check the text, then save.</p></div>`,
      });
    }
    let saved: ArticleWrite;
    try {
      saved = settled(
        request,
        reply,
        await application.articles.edit(webCall(request, session), {
          articleId: id,
          title: draft.title,
          body: draft.body,
          reason: draft.reason.trim() === '' ? null : draft.reason,
          expectedRevision: draft.expectedRevision,
        }),
      );
    } catch (error) {
      return refusedForm(request, reply, session, id, draft, error);
    }
    const { change } = saved;
    if (!change.changed) {
      return editorPage(request, reply, session, change, {
        outcome: 'unchanged',
        notice: html`<div class="notice-box" role="status" id="editor-notice"><p><strong>Nothing changed:</strong> the title and body are the same as revision ${change.revision}, so no new revision was made.</p>${removedList(change.sanitized)}</div>`,
      });
    }
    if (inPlace(request)) {
      // The script's save: the editor again, on the new revision, saying so.
      return editorPage(request, reply, session, change, {
        outcome: 'saved',
        notice: html`<div class="notice-box" role="status" id="editor-notice"><p><strong>Saved as revision ${change.revision}.</strong>${
          change.sanitized.length > 0
            ? ' Some of what you sent was removed; the text below is what was saved.'
            : ''
        }</p>${removedList(change.sanitized)}</div>`,
      });
    }
    if (change.sanitized.length === 0) {
      return reply.redirect(`${articlePath(id)}?saved=${change.revision}`, 303);
    }
    return kit.send(reply, {
      title: `Saved ${change.title}`,
      session,
      request,
      wide: true,
      body: html`<div class="card saved">
<h1>Saved “${change.title}”</h1>
<p class="notice" role="status" id="editor-notice">Saved as revision ${change.revision}, with some of what you sent removed.</p>
${removedList(change.sanitized)}
<div class="actions"><a href="${articlePath(id)}">Open the article</a><a href="${articlePath(id)}/edit">Edit again</a></div>
</div>`,
    });
  });

  // Check changes: the editor form sent here (its second submit button's formaction), nothing saved.
  formRoute('preview', 'articles.preview', async (request, reply, session, article, draft) => {
    const id = article.id;
    let checked: EditPreview;
    try {
      checked = settled(
        request,
        reply,
        await application.articles.preview(webCall(request, session), {
          articleId: id,
          title: draft.title,
          body: draft.body,
          expectedRevision: draft.expectedRevision,
        }),
      );
    } catch (error) {
      return refusedForm(request, reply, session, id, draft, error);
    }
    return editorPage(request, reply, session, article, {
      outcome: 'checked',
      draft,
      ...checkView(article, checked),
    });
  });
};
