import type { z } from 'zod';
import type {
  ActivityList,
  Article,
  ArticleChange,
  ArticleList,
  BacklinkList,
  RevisionContent,
  RevisionList,
  SiteList,
  Stats,
} from './schemas.ts';

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

export function renderSites(out: z.infer<typeof SiteList>): string {
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

export function renderArticles(out: z.infer<typeof ArticleList>, siteId: string): string {
  return list(
    `Articles of site ${siteId}, newest published first:`,
    out.data.map(
      (a) =>
        `${quote(a.title)} — ${publication(a.status, a.published_at)}, ` +
        `${a.word_count} words${a.target_keyword ? `, keyword ${quote(a.target_keyword)}` : ''}, revision ${a.revision} — article_id ${a.id}`,
    ),
    pageFooter('list_articles', out.meta, out.next_page, 'articles'),
  );
}

export function renderArticle(a: z.infer<typeof Article>): string {
  const lines = [
    `Article ${a.id} on site ${a.site_id}, revision ${a.revision}: ${quote(a.title)}`,
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

export function renderBacklinks(out: z.infer<typeof BacklinkList>, siteId: string): string {
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

export function renderStats(s: z.infer<typeof Stats>): string {
  return (
    `Site ${s.site_id}, period ${s.period.key} (${s.period.from} to ${s.period.to}, UTC, inclusive): ` +
    `${s.articles.published} articles published; ${s.backlinks.total} backlinks acquired ` +
    `(${s.backlinks.industry} industry, ${s.backlinks.local} local).`
  );
}

export function renderChange(c: z.infer<typeof ArticleChange>, what: string): string {
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

export function renderRevisions(out: z.infer<typeof RevisionList>, articleId: string): string {
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

export function renderRevision(r: z.infer<typeof RevisionContent>, articleId: string): string {
  return [
    `Article ${articleId} as it was at revision ${r.revision} (${r.created_at}, ${r.origin} by ${r.actor.name}` +
      `${r.reason ? `, reason ${quote(r.reason)}` : ''}): ${quote(r.title)}, status ${r.status}, ${r.word_count} words.`,
    `To bring it back, call restore_revision with article_id ${articleId} and revision ${r.revision}.`,
    'Body (HTML):',
    r.body,
  ].join('\n');
}

export function renderActivity(out: z.infer<typeof ActivityList>): string {
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
