import type { ToolAnnotations } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { KeyScope } from '../../../domain/account/events.ts';
import { MAX_IMAGE_MIB, MAX_IMAGE_SIDE } from '../../../domain/article/events.ts';
import { SEARCH_RANKED_MAX } from '../../../domain/article/search.ts';
import { countWords } from '../../../domain/html/text.ts';
import { ActivityRecord, ListActivityInput } from '../../application/activity.ts';
import {
  ArticleChange,
  ArticleListItem,
  ArticlePreview,
  ArticleRead,
  ArticleSearchHit,
  GetArticleInput,
  ListArticlesInput,
  ListAsOfMeta,
  PreviewArticleEditInput,
  ReplaceFeaturedImageInput,
  SearchArticlesInput,
  UpdateArticleInput,
} from '../../application/articles.ts';
import type { Call, Idempotency, Outcome } from '../../application/call.ts';
import type { Application } from '../../application/index.ts';
import type { Listed } from '../../application/lists.ts';
import {
  CompareRevisionsInput,
  GetRevisionInput,
  ListRevisionsInput,
  RestoreRevisionInput,
  Revision,
  RevisionComparison,
  RevisionContent,
} from '../../application/revisions.ts';
import {
  Backlink,
  GetStatsInput,
  ListBacklinksInput,
  ListSitesInput,
  Site,
  Stats,
} from '../../application/sites.ts';
import { PageMeta } from '../http/schemas.ts';

/*
 * The tools' inputs are the resources' own (apps/application: the API's fields, described for a
 * model); their outputs are the API's wire objects, and a list is `{data, meta, next_page}` (the API
 * envelope without its links, which point at the HTTP API: a model pages by calling the tool again
 * with `page: next_page`).
 */

const ToolPageMeta = PageMeta.extend({
  total: PageMeta.shape.total.meta({ description: 'Items in the whole list.' }),
});

/** A page of a list, as the tools answer it. */
function pageOf<T extends z.ZodType, M extends z.ZodRawShape = Record<never, never>>(item: T, meta?: M) {
  return z.object({
    data: z.array(item),
    meta: ToolPageMeta.extend(meta ?? ({} as M)),
    next_page: z
      .number()
      .int()
      .min(2)
      .nullable()
      .meta({ description: 'The page to ask for next with the same arguments; null on the last page.' }),
  });
}

const SiteList = pageOf(Site);
const ArticleList = pageOf(ArticleListItem, ListAsOfMeta);
const SearchHitList = pageOf(ArticleSearchHit);
const BacklinkList = pageOf(Backlink);
const RevisionList = pageOf(Revision);
const ActivityList = pageOf(ActivityRecord);

/**
 * What a tool call may use: its application call (principal with origin `mcp`), the use cases, and
 * `settle`, which takes in a use case's outcome (what it touched and its edit-limit decision, for the
 * call's record and headers) and gives its value or throws its refusal.
 */
export type ToolContext = { call: Call; application: Application; settle<T>(outcome: Outcome<T>): T };

/** The four hints, always stated (MCP leaves their defaults pessimistic and clients differ). */
type Hints = Required<
  Pick<ToolAnnotations, 'readOnlyHint' | 'destructiveHint' | 'idempotentHint' | 'openWorldHint'>
>;

export type McpTool = {
  name: string;
  title: string;
  description: string;
  /** The grant a call needs: a read-only grant neither sees nor calls `write` tools. */
  scope: KeyScope;
  /** A call counts against the account's daily edit limit (its listing says so, with the limit). */
  countsAsEdit?: true;
  /** The operation its calls are recorded as in the activity log, when not the tool's name. */
  operation?: string;
  annotations: Hints;
  input: z.ZodType;
  output: z.ZodType;
  /** Runs a call whose arguments `input` has parsed: the structured result (checked against `output`) and its text. */
  call(ctx: ToolContext, input: unknown): Promise<{ structured: Record<string, unknown>; text: string }>;
};

function defineTool<I extends z.ZodType, O extends z.ZodType<Record<string, unknown>>>(def: {
  name: string;
  title: string;
  description: string;
  scope: KeyScope;
  countsAsEdit?: true;
  operation?: string;
  annotations: Hints;
  input: I;
  output: O;
  run(ctx: ToolContext, input: z.output<I>): Promise<z.input<O>>;
  render(out: z.output<O>, input: z.output<I>): string;
}): McpTool {
  const { run, render, ...meta } = def;
  return {
    ...meta,
    async call(ctx, raw) {
      const input = raw as z.output<I>;
      // The same check the API's response serialiser makes: nothing leaves that its schema does not describe.
      const structured = def.output.parse(await run(ctx, input));
      return { structured, text: render(structured, input) };
    },
  };
}

const READ: Hints = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};

/** A page as the tools answer it: the application's list and the next page to ask for (null on the last). */
function withNext<T>(list: Listed<T>): Listed<T> & { next_page: number | null } {
  const { page, total_pages: totalPages } = list.meta;
  return { ...list, next_page: page < totalPages ? page + 1 : null };
}

const PAGING =
  'Paginated: page (from 1) and per_page (1 to 100, default 20); the answer has meta {page, per_page, total, ' +
  'total_pages} and next_page (null on the last page): call again with page: next_page for more.';
const DATES = 'Dates are UTC calendar dates YYYY-MM-DD; from and to are inclusive.';

const listSitesTool = defineTool({
  name: 'list_sites',
  title: 'List websites',
  description:
    'List the websites on the account you are connected to, oldest first. Each has an id (site_id) that the ' +
    `other tools take. ${PAGING}`,
  scope: 'read',
  annotations: READ,
  input: ListSitesInput,
  output: SiteList,
  run: async (ctx, input) => withNext(ctx.settle(await ctx.application.sites.list(ctx.call, input))),
  render: (out) => renderSites(out),
});

const listArticlesTool = defineTool({
  name: 'list_articles',
  title: 'List articles of a site',
  description:
    'List the articles of one website, newest published first (drafts without a date last): id, title, url, ' +
    'status (draft, scheduled, published, archived), published_at (RFC 3339 UTC), target_keyword, word_count, ' +
    `featured_image and current revision, without the body (get_article has it). Filter by status and by ` +
    `publication date with from/to. With as_of (RFC 3339, UTC), the list as it stood at that instant: the ` +
    `articles that existed then, with their status, dates and revision then. ${DATES} ${PAGING}`,
  scope: 'read',
  annotations: READ,
  input: ListArticlesInput,
  output: ArticleList,
  run: async (ctx, input) =>
    withNext(ctx.settle(await ctx.application.articles.list(ctx.call, input.site_id, input))),
  render: (out, input) => renderArticles(out, input.site_id),
});

const getArticleTool = defineTool({
  name: 'get_article',
  title: 'Get an article',
  description:
    'Get one article with its full HTML body, its current revision number and its protected_links: the ' +
    'inserted backlink anchors and internal links, marked in the body with data-service-protected. Read it ' +
    'before editing: update_article needs those elements kept exactly as they are, and takes the revision ' +
    'as expected_revision. With as_of (RFC 3339, UTC), the article as it stood at that instant: the revision ' +
    'current then (not found when it did not exist yet).',
  scope: 'read',
  annotations: READ,
  input: GetArticleInput,
  output: ArticleRead,
  run: async (ctx, input) =>
    ctx.settle(
      input.as_of === undefined
        ? await ctx.application.articles.get(ctx.call, input.article_id)
        : await ctx.application.articles.getAsOf(ctx.call, input.article_id, input.as_of),
    ),
  render: (out) => renderArticle(out),
});

const searchArticlesTool = defineTool({
  name: 'search_articles',
  title: 'Search articles by words',
  description:
    'Find articles by the words in them: use this to find an article when you know what it is about or some of ' +
    'its words but not its id. Searches the title, target keyword and body text of every article on the account ' +
    '(or of one site with site_id). q is web-search syntax: plain words must all appear, in the title and ' +
    'target keyword or in the body (in any form: ' +
    '"boilers" finds "boiler"), "a quoted phrase" matches in that order, -word excludes, and `or` between words ' +
    'allows either; common words such as "the" are ignored (a q of only those is refused). Most relevant first ' +
    `(title words count most), then newest published; of more than ${SEARCH_RANKED_MAX} matches only the newest ${SEARCH_RANKED_MAX} are ranked (add words to narrow it). ` +
    'Each hit is the article as list_articles gives it (with ' +
    'article_id for get_article) plus match: score, snippet (plain text from the body) and highlights ([start, ' +
    `end] character ranges of the matched words in the snippet). Filter by status and publication date with ` +
    `from/to. ${DATES} ${PAGING}`,
  scope: 'read',
  annotations: READ,
  input: SearchArticlesInput,
  output: SearchHitList,
  run: async (ctx, input) => withNext(ctx.settle(await ctx.application.articles.search(ctx.call, input))),
  render: (out, input) => renderSearch(out, input.q),
});

const listBacklinksTool = defineTool({
  name: 'list_backlinks',
  title: 'List backlinks of a site',
  description:
    'List the backlinks acquired for one website, newest first: acquired_on (date), source_domain, source_url, ' +
    'target_url, anchor_text, anchor_type (exact, partial, branded, naked_url, generic, image) and category ' +
    `(industry or local). Filter by category and by acquisition date with from/to. ${DATES} ${PAGING}`,
  scope: 'read',
  annotations: READ,
  input: ListBacklinksInput,
  output: BacklinkList,
  run: async (ctx, input) =>
    withNext(ctx.settle(await ctx.application.sites.backlinks(ctx.call, input.site_id, input))),
  render: (out, input) => renderBacklinks(out, input.site_id),
});

const getStatsTool = defineTool({
  name: 'get_stats',
  title: 'Statistics of a site for a period',
  description:
    'Counts for a monthly report: articles published (status published, published_at in the period) and ' +
    'backlinks acquired in the period, in total and split into industry and local. period is this_month ' +
    '(default), last_month, last_30_days (today and the 29 days before) or a month YYYY-MM; all UTC. The ' +
    'answer names the period’s first and last day (inclusive). With as_of (RFC 3339, UTC), the statistics as ' +
    'they stood at that instant (what a report made then said): backlinks recorded by then, articles by their ' +
    'status then; a relative period counts from that instant’s day.',
  scope: 'read',
  annotations: READ,
  input: GetStatsInput,
  output: Stats,
  run: async (ctx, input) =>
    ctx.settle(await ctx.application.sites.stats(ctx.call, input.site_id, input.period, input.as_of)),
  render: (out) => renderStats(out),
});

/**
 * The idempotency of a write tool's call (CONTRACT "MCP": the API's Idempotency-Key rules): its
 * `idempotency_key`, and the request it names, the tool and its other arguments. A key is the account's,
 * whichever face sent it: the same key on the API names another request.
 */
function idempotencyOf(
  tool: string,
  input: { idempotency_key?: string | undefined },
): Idempotency | undefined {
  const { idempotency_key: key, ...args } = input;
  return key === undefined ? undefined : { key, request: ['mcp', tool, args] };
}

const updateArticleTool = defineTool({
  name: 'update_article',
  title: 'Edit an article',
  description:
    'Change the title and/or the HTML body of one article (give at least one). Call get_article first and ' +
    'edit its body. PROTECTED LINKS: every element carrying data-service-protected in the current body ' +
    '(inserted backlink anchors and internal links, listed in protected_links) must be in the new body ' +
    'exactly as it is: same tag, attributes, href and text. Copy each one verbatim; you may move it and ' +
    'change everything around it. An edit that removes, rewrites or adds such an element is refused ' +
    '(protected_links_modified) and nothing changes. The body is sanitised as the web editor does: scripts, ' +
    'iframes, event handlers and javascript: links are removed and listed in `sanitized`. An accepted change ' +
    'is a new revision (history is kept; restore_revision brings an earlier one back); an edit that changes ' +
    'nothing creates none (changed: false). Give expected_revision to be safe against concurrent edits. When ' +
    'unsure whether an edit keeps the protected links or what the sanitiser will remove, call preview_article_edit ' +
    'with the same arguments first: it answers the same verdict and changes nothing.',
  scope: 'write',
  countsAsEdit: true,
  // Destructive: no, every change is a new revision and the previous text stays restorable. Idempotent:
  // the same arguments again leave the article as it is (changed: false, no second revision).
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  input: UpdateArticleInput,
  output: ArticleChange,
  run: async (ctx, input) => {
    const { article_id: articleId, title, body, reason, expected_revision: expectedRevision } = input;
    const write = ctx.settle(
      await ctx.application.articles.edit(
        ctx.call,
        { articleId, title, body, reason, expectedRevision },
        idempotencyOf('update_article', input),
      ),
    );
    return write.change;
  },
  render: (out) => renderChange(out, 'Saved'),
});

const previewArticleEditTool = defineTool({
  name: 'preview_article_edit',
  title: 'Preview an edit of an article',
  description:
    'Check an edit before making it: takes update_article’s title and/or body (and expected_revision) and ' +
    'answers what update_article would do now, changing nothing: the title and sanitised body it would store, ' +
    'word_count, what the sanitiser would remove (sanitized), the protected links’ verdict (protected_links: ' +
    '{ok, errors: [{id, change: removed|rewritten|forged}]}; not ok means update_article would be refused with ' +
    'protected_links_modified and these errors), would_change (false: nothing to save, or refused), ' +
    'base_revision (the revision judged against) and a word diff of the body’s text against it (diff: [{op: ' +
    'equal|insert|delete, text}], null when too long to compare). No revision, not an edit for the daily limit.',
  scope: 'read',
  operation: 'articles.preview',
  annotations: READ,
  input: PreviewArticleEditInput,
  output: ArticlePreview,
  run: async (ctx, input) => {
    const { article_id: articleId, title, body, expected_revision: expectedRevision } = input;
    return ctx.settle(
      await ctx.application.articles.preview(ctx.call, { articleId, title, body, expectedRevision }),
    ).preview;
  },
  render: (out) => renderPreview(out),
});

const replaceFeaturedImageTool = defineTool({
  name: 'replace_featured_image',
  title: 'Replace an article’s featured image',
  description:
    'Replace the featured image of one article with the image at an https URL, which the service fetches, ' +
    `checks and stores. Accepted: JPEG, PNG, WebP, GIF, AVIF (recognised from the bytes), at most ${MAX_IMAGE_MIB} MiB and ` +
    `${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} pixels; SVG is refused. Private, loopback and other non-public addresses ` +
    'are refused, and the ' +
    `fetch gives up after 10 seconds or 3 redirects. Give alt, a short description of the image. A new revision.`,
  scope: 'write',
  countsAsEdit: true,
  // Open world: it fetches a URL on the internet; each call stores what the URL serves at that moment.
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  input: ReplaceFeaturedImageInput,
  output: ArticleChange,
  async run(ctx, input) {
    const write = ctx.settle(
      await ctx.application.articles.replaceFeaturedImage(
        ctx.call,
        {
          articleId: input.article_id,
          image: { url: input.url, alt: input.alt ?? '' },
          expectedRevision: input.expected_revision,
        },
        idempotencyOf('replace_featured_image', input),
      ),
    );
    return write.change;
  },
  render: (out) => renderChange(out, 'Featured image replaced'),
});

const listRevisionsTool = defineTool({
  name: 'list_revisions',
  title: 'List the revisions of an article',
  description:
    'The history of one article, newest first: each revision’s number, origin (api, mcp, editor, rewrite), ' +
    'actor, reason, time (RFC 3339 UTC), title and word count, and restored_from for restores. Revision 1 is ' +
    `the creation. ${PAGING}`,
  scope: 'read',
  annotations: READ,
  input: ListRevisionsInput,
  output: RevisionList,
  run: async (ctx, input) =>
    withNext(ctx.settle(await ctx.application.revisions.list(ctx.call, input.article_id, input))),
  render: (out, input) => renderRevisions(out, input.article_id),
});

const getRevisionTool = defineTool({
  name: 'get_revision',
  title: 'Get an article as it was at a revision',
  description:
    'The title, HTML body, featured image, status and publication time of one article as they were at ' +
    'revision n (from list_revisions), with who made that revision and why.',
  scope: 'read',
  annotations: READ,
  input: GetRevisionInput,
  output: RevisionContent,
  run: async (ctx, input) =>
    ctx.settle(await ctx.application.revisions.get(ctx.call, input.article_id, input.revision)),
  render: (out, input) => renderRevision(out, input.article_id),
});

const compareRevisionsTool = defineTool({
  name: 'compare_revisions',
  title: 'Compare two revisions of an article',
  description:
    'What changed in one article from revision from to revision to (numbers from list_revisions; to may be ' +
    'earlier than from, or the same): both titles, and a word diff of the visible text as changes [{op, text}] ' +
    'in order, op equal, insert or delete. A protected link is one unit: its text is kept, added or removed ' +
    'whole. Texts too long or too different to compare are refused (diff_too_large): then read both with ' +
    'get_revision.',
  scope: 'read',
  annotations: READ,
  input: CompareRevisionsInput,
  output: RevisionComparison,
  run: async (ctx, input) =>
    ctx.settle(
      await ctx.application.revisions.compare(ctx.call, input.article_id, { from: input.from, to: input.to }),
    ),
  render: (out) => renderComparison(out),
});

const restoreRevisionTool = defineTool({
  name: 'restore_revision',
  title: 'Restore an earlier revision',
  description:
    'Bring back the title, body and featured image an article had at revision n, as a new revision ' +
    '(restored_from: n); the history in between is kept. Refused (protected_links_modified) when it would ' +
    `remove a protected link added since revision n.`,
  scope: 'write',
  countsAsEdit: true,
  // Not idempotent: every call appends a new revision carrying revision n's content.
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  input: RestoreRevisionInput,
  output: ArticleChange,
  async run(ctx, input) {
    const write = ctx.settle(
      await ctx.application.revisions.restore(
        ctx.call,
        {
          articleId: input.article_id,
          revision: input.revision,
          reason: input.reason ?? null,
          expectedRevision: input.expected_revision,
        },
        idempotencyOf('restore_revision', input),
      ),
    );
    return write.change;
  },
  render: (out, input) => renderChange(out, `Restored revision ${input.revision}`),
});

const listActivityTool = defineTool({
  name: 'list_activity',
  title: 'The account’s activity log',
  description:
    'Every call made through the API and by assistants (refused ones included) and the changes the content ' +
    'pipeline made, newest first: time, source, actor, operation (the tool names; articles.preview for a ' +
    'preview of an edit; articles.put_back_protected_links when the web editor put protected links back ' +
    'into a refused draft, nothing saved), site, article, status (an HTTP status; 200 is success).' +
    ` Filter by date, source, site_id and article_id. ${DATES} ${PAGING}`,
  scope: 'read',
  annotations: READ,
  input: ListActivityInput,
  output: ActivityList,
  run: async (ctx, input) => withNext(ctx.settle(await ctx.application.activity.list(ctx.call, input))),
  render: (out) => renderActivity(out),
});

/** Every tool, in the order tools/list shows them. */
export const mcpTools: readonly McpTool[] = [
  listSitesTool,
  listArticlesTool,
  getArticleTool,
  searchArticlesTool,
  listBacklinksTool,
  getStatsTool,
  updateArticleTool,
  previewArticleEditTool,
  replaceFeaturedImageTool,
  listRevisionsTool,
  getRevisionTool,
  compareRevisionsTool,
  restoreRevisionTool,
  listActivityTool,
];

/*
 * The text of each tool result: a short readable summary for the model (structuredContent carries the
 * full data), with the ids a follow-up call needs and, for lists, how to get the next page.
 */

type Meta = { page: number; per_page: number; total: number; total_pages: number };

const quote = (text: string): string => JSON.stringify(text);
const day = (timestamp: string | null): string => (timestamp ? timestamp.slice(0, 10) : 'no date');

/** The line under a list: where this page is, and the call that gets the next one. */
function pageFooter(tool: string, meta: Meta, nextPage: number | null, noun: string): string {
  if (meta.total === 0) return `No ${noun}.`;
  if (meta.page > meta.total_pages) {
    return `Page ${meta.page} is past the end: there ${meta.total_pages === 1 ? 'is 1 page' : `are ${meta.total_pages} pages`} of ${meta.per_page}.`;
  }
  const where = `Page ${meta.page} of ${meta.total_pages} (${meta.total} ${noun} in all, ${meta.per_page} per page).`;
  return nextPage === null
    ? `${where} This is the last page.`
    : `${where} For more, call ${tool} again with the same arguments and page: ${nextPage}.`;
}

function list(header: string, lines: string[], footer: string): string {
  return [header, ...lines.map((line) => `- ${line}`), footer].filter(Boolean).join('\n');
}

function renderSites(out: z.infer<typeof SiteList>): string {
  return list(
    'Websites on the account:',
    out.data.map((s) => `${s.name} — ${s.domain} (${s.url}) — site_id ${s.id}`),
    pageFooter('list_sites', out.meta, out.next_page, 'sites'),
  );
}

function publication(status: string, publishedAt: string | null): string {
  if (status === 'published') return `published ${day(publishedAt)}`;
  if (status === 'scheduled') return `scheduled for ${day(publishedAt)}`;
  return publishedAt ? `${status} (published ${day(publishedAt)})` : status;
}

function renderArticles(out: z.infer<typeof ArticleList>, siteId: string): string {
  return list(
    `Articles of site ${siteId}${out.meta.as_of ? ` as the list stood at ${out.meta.as_of}` : ''}, newest published first:`,
    out.data.map(
      (a) =>
        `${quote(a.title)} — ${publication(a.status, a.published_at)}, ` +
        `${a.word_count} words${a.target_keyword ? `, keyword ${quote(a.target_keyword)}` : ''}, revision ${a.revision} — article_id ${a.id}`,
    ),
    pageFooter('list_articles', out.meta, out.next_page, 'articles'),
  );
}

/** A snippet with its matched words in [brackets]. */
function marked(snippet: string, highlights: readonly (readonly number[])[]): string {
  let text = '';
  let at = 0;
  for (const [start = 0, end = start] of highlights) {
    text += `${snippet.slice(at, start)}[${snippet.slice(start, end)}]`;
    at = end;
  }
  return text + snippet.slice(at);
}

function renderSearch(out: z.infer<typeof SearchHitList>, q: string): string {
  return list(
    `Articles matching ${quote(q)}, most relevant first (matched words in [brackets]):`,
    out.data.map(
      (a) =>
        `${quote(a.title)} — ${publication(a.status, a.published_at)}, site ${a.site_id}, revision ${a.revision} — ` +
        `article_id ${a.id} — score ${a.match.score.toFixed(3)} — ${quote(marked(a.match.snippet, a.match.highlights))}`,
    ),
    pageFooter('search_articles', out.meta, out.next_page, 'matching articles'),
  );
}

function renderArticle(a: z.infer<typeof ArticleRead>): string {
  const lines = [
    `Article ${a.id} on site ${a.site_id}, revision ${a.revision}${a.as_of ? ` (as it stood at ${a.as_of})` : ''}: ${quote(a.title)}`,
    `Status ${a.status}${a.published_at ? `, published ${a.published_at}` : ''}; ${a.word_count} words; ` +
      `target keyword ${a.target_keyword ? quote(a.target_keyword) : 'none'}; ${a.url}`,
    a.featured_image
      ? `Featured image: ${a.featured_image.url} (alt ${quote(a.featured_image.alt)})`
      : 'Featured image: none',
  ];
  if (a.protected_links.length > 0) {
    lines.push(
      `Protected links (${a.protected_links.length}): when you edit the body, keep each element carrying ` +
        'data-service-protected exactly as it is in the body below (copy it verbatim; you may move it):',
      ...a.protected_links.map((l) => `- ${l.id} (${l.kind}) ${quote(l.text)} → ${l.href}`),
    );
  } else {
    lines.push('Protected links: none.');
  }
  lines.push('Body (HTML):', a.body);
  return lines.join('\n');
}

function renderBacklinks(out: z.infer<typeof BacklinkList>, siteId: string): string {
  return list(
    `Backlinks of site ${siteId}, newest first:`,
    out.data.map(
      (b) =>
        `${b.acquired_on} — ${b.category} — ${b.source_url} → ${b.target_url}, anchor ${quote(b.anchor_text)} ` +
        `(${b.anchor_type}) — id ${b.id}`,
    ),
    pageFooter('list_backlinks', out.meta, out.next_page, 'backlinks'),
  );
}

function renderStats(s: z.infer<typeof Stats>): string {
  return (
    `Site ${s.site_id}, period ${s.period.key} (${s.period.from} to ${s.period.to}, UTC, inclusive)` +
    `${s.as_of ? `, as it stood at ${s.as_of}` : ''}: ` +
    `${s.articles.published} articles published; ${s.backlinks.total} backlinks acquired ` +
    `(${s.backlinks.industry} industry, ${s.backlinks.local} local).`
  );
}

function renderChange(c: z.infer<typeof ArticleChange>, what: string): string {
  const lines = c.changed
    ? [
        `${what}: article ${c.id} is now at revision ${c.revision} (${quote(c.title)}, ${c.word_count} words).`,
      ]
    : [`Nothing changed: article ${c.id} already had this content; it stays at revision ${c.revision}.`];
  if (c.sanitized.length > 0) {
    lines.push(
      'The sanitiser removed from the body:',
      ...c.sanitized.map((s) => `- ${s.path}: ${s.removed} (${s.reason})`),
    );
  }
  if (c.featured_image && what.startsWith('Featured image')) {
    lines.push(
      `Featured image: ${c.featured_image.url} (${c.featured_image.width ?? '?'}x${c.featured_image.height ?? '?'} px).`,
    );
  }
  return lines.join('\n');
}

/** A preview's verdict in words: would it change, refused for which links, what is removed. */
function renderPreview(p: z.infer<typeof ArticlePreview>): string {
  const lines: string[] = [];
  if (!p.protected_links.ok) {
    lines.push(
      `Would be refused (protected_links_modified): this edit of article ${p.article_id} changes protected links; nothing was changed.`,
      ...p.protected_links.errors.map((e) => `- ${e.id}: ${e.change}`),
      'Copy each protected element from get_article’s body verbatim (it may be moved) and preview again.',
    );
  } else if (p.would_change) {
    lines.push(
      `Would be saved: article ${p.article_id} would go from revision ${p.base_revision} to ${p.base_revision + 1} ` +
        `(${quote(p.title)}, ${p.word_count} words). Nothing was changed yet: call update_article to save.`,
    );
  } else {
    lines.push(
      `Would change nothing: the title and body are those of revision ${p.base_revision} of article ${p.article_id}.`,
    );
  }
  if (p.sanitized.length > 0) {
    lines.push(
      'The sanitiser would remove from the body:',
      ...p.sanitized.map((s) => `- ${s.path}: ${s.removed} (${s.reason})`),
    );
  }
  if (p.diff === null)
    lines.push('The word diff is not shown: the texts are too long or too different to compare.');
  else {
    const inserted = p.diff.filter((d) => d.op === 'insert').length;
    const deleted = p.diff.filter((d) => d.op === 'delete').length;
    lines.push(
      `Word diff of the body: ${inserted} insertions, ${deleted} deletions (structuredContent.diff).`,
    );
  }
  return lines.join('\n');
}

function renderRevisions(out: z.infer<typeof RevisionList>, articleId: string): string {
  return list(
    `Revisions of article ${articleId}, newest first:`,
    out.data.map(
      (r) =>
        `revision ${r.revision} — ${r.created_at} — ${r.origin} by ${r.actor.name} (${r.actor.type})` +
        `${r.reason ? ` — reason ${quote(r.reason)}` : ''}${r.restored_from ? ` — restored from revision ${r.restored_from}` : ''}` +
        ` — title ${quote(r.title)}, ${r.word_count} words`,
    ),
    pageFooter('list_revisions', out.meta, out.next_page, 'revisions'),
  );
}

function renderRevision(r: z.infer<typeof RevisionContent>, articleId: string): string {
  return [
    `Article ${articleId} as it was at revision ${r.revision} (${r.created_at}, ${r.origin} by ${r.actor.name}` +
      `${r.reason ? `, reason ${quote(r.reason)}` : ''}): ${quote(r.title)}, status ${r.status}, ${r.word_count} words.`,
    `To bring it back, call restore_revision with article_id ${articleId} and revision ${r.revision}.`,
    'Body (HTML):',
    r.body,
  ].join('\n');
}

function renderComparison(c: z.infer<typeof RevisionComparison>): string {
  const words = (op: 'insert' | 'delete') =>
    c.changes.filter((change) => change.op === op).reduce((n, change) => n + countWords(change.text), 0);
  const inserted = words('insert');
  const deleted = words('delete');
  const title =
    c.title.before === c.title.after
      ? `The title is the same: ${quote(c.title.after)}.`
      : `The title changed from ${quote(c.title.before)} to ${quote(c.title.after)}.`;
  const text = c.changes.every((change) => change.op === 'equal')
    ? 'The text is the same.'
    : `The text: ${inserted} word${inserted === 1 ? '' : 's'} inserted, ${deleted} deleted` +
      `${c.granularity === 'line' ? ' (compared line by line: the texts are too long or too different for words)' : ''}.`;
  return [
    `Article ${c.article_id} from revision ${c.from} to revision ${c.to}. ${title} ${text}`,
    'structuredContent.changes has the whole diff in order (equal, insert, delete).',
  ].join('\n');
}

function renderActivity(out: z.infer<typeof ActivityList>): string {
  return list(
    'Activity of the account, newest first:',
    out.data.map(
      (a) =>
        `${a.at} — ${a.source} — ${a.operation} — ${a.status} — by ${a.actor.name} (${a.actor.type})` +
        `${a.site_id ? ` — site ${a.site_id}` : ''}${a.article_id ? ` — article ${a.article_id}` : ''}` +
        `${a.revision !== null ? ` — created revision ${a.revision}` : ''}`,
    ),
    pageFooter('list_activity', out.meta, out.next_page, 'records'),
  );
}
