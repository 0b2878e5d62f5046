import {
  type ListResourcesResult,
  ProtocolError,
  ProtocolErrorCode,
  type ReadResourceResult,
  ResourceNotFoundError,
  type ResourceTemplateType,
  type Server,
  type TextResourceContents,
} from '@modelcontextprotocol/server';
import { DomainError } from '../../../domain/errors.ts';
import { extractProtectedLinks } from '../../../domain/html/facts.ts';
import type { ArticleOut } from '../../application/articles.ts';
import type { RevisionContentOut } from '../../application/revisions.ts';
import type { ReportOut, StatsOut } from '../../application/sites.ts';
import { recorded, type Served } from './recorded.ts';

/*
 * The MCP resources: the account's sites (resources/list, one resource each) and three templates, an
 * article, one revision of it, and a site's report for a period. Each read is the use case the matching
 * tool calls (get_article, get_revision, the report page's), recorded like a tool call; another
 * account's id reads as not found, with the same error as an unknown one.
 */

export const RESOURCE_SCHEME = 'content-service://';

/** Sites per page of resources/list; `nextCursor` names the next page. */
export const RESOURCE_PAGE_SIZE = 50;

/** Where a read's metadata travels in its content's `_meta` (the article's, or the revision's). */
export const ARTICLE_META_KEY = 'content-service.dev/article';

export const SITE_URI = 'content-service://sites/{site_id}';
export const ARTICLE_URI = 'content-service://articles/{article_id}';
export const REVISION_URI = 'content-service://articles/{article_id}/revisions/{revision}';
export const REPORT_URI = 'content-service://sites/{site_id}/reports/{period}';

/** The templates resources/templates/list answers, the same for every caller. */
export const RESOURCE_TEMPLATES: readonly ResourceTemplateType[] = [
  {
    uriTemplate: ARTICLE_URI,
    name: 'article',
    title: 'An article',
    description:
      'The HTML body of one article (text/html). Its metadata is in the content’s _meta under ' +
      `"${ARTICLE_META_KEY}": id, site_id, title, url, status, published_at, revision, target_keyword, ` +
      'word_count, featured_image and protected_links (the elements an edit must keep exactly as they are).',
    mimeType: 'text/html',
  },
  {
    uriTemplate: REVISION_URI,
    name: 'article_revision',
    title: 'An article at one revision',
    description:
      'The HTML body of one article as it was at a revision (text/html), with that revision’s metadata in ' +
      `_meta under "${ARTICLE_META_KEY}" (as for the article, plus origin, actor, reason and created_at).`,
    mimeType: 'text/html',
  },
  {
    uriTemplate: REPORT_URI,
    name: 'site_report',
    title: 'A site’s report for a period',
    description:
      'Articles published and backlinks acquired by one site in a period (this_month, last_month, ' +
      'last_30_days or a month YYYY-MM; UTC), per day and in total, compared with the period before: as ' +
      'application/json, and the same in words as text/plain.',
    mimeType: 'application/json',
  },
];

/** What a URI names: one of the resources, or null for anything else (read as not found). */
type Named =
  | { kind: 'site'; siteId: string }
  | { kind: 'article'; articleId: string }
  | { kind: 'revision'; articleId: string; revision: number }
  | { kind: 'report'; siteId: string; period: string };

function segment(text: string | undefined): string | null {
  if (text === undefined) return null;
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** The resource a URI names (its ids percent-decoded), or null. */
export function parseResourceUri(uri: string): Named | null {
  if (!uri.startsWith(RESOURCE_SCHEME)) return null;
  const parts = uri.slice(RESOURCE_SCHEME.length).split('/');
  const [collection, first, sub, second, ...rest] = parts;
  const id = segment(first);
  if (!id || rest.length > 0) return null;
  if (collection === 'sites' && sub === undefined) return { kind: 'site', siteId: id };
  if (collection === 'sites' && sub === 'reports') {
    const period = segment(second);
    return period ? { kind: 'report', siteId: id, period } : null;
  }
  if (collection === 'articles' && sub === undefined) return { kind: 'article', articleId: id };
  if (collection === 'articles' && sub === 'revisions' && second && /^[1-9]\d{0,9}$/.test(second)) {
    return { kind: 'revision', articleId: id, revision: Number(second) };
  }
  return null;
}

export const siteUri = (siteId: string): string => `${RESOURCE_SCHEME}sites/${encodeURIComponent(siteId)}`;
export const articleUri = (articleId: string): string =>
  `${RESOURCE_SCHEME}articles/${encodeURIComponent(articleId)}`;

/** The operation a read is recorded as. */
const OPERATIONS: Record<Named['kind'], string> = {
  site: 'read_site',
  article: 'read_article',
  revision: 'read_revision',
  report: 'read_report',
};

/** The page a cursor names: the cursor is the page number, as this server wrote it. */
function pageOfCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 1;
  if (!/^[1-9]\d{0,8}$/.test(cursor)) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid cursor ${JSON.stringify(cursor)}`);
  }
  return Number(cursor);
}

function articleMeta(a: ArticleOut): Record<string, unknown> {
  const { body: _body, ...meta } = a;
  return meta;
}

function revisionMeta(
  r: RevisionContentOut,
  articleId: string,
  siteId: string | null,
): Record<string, unknown> {
  const { body, ...meta } = r;
  return { id: articleId, site_id: siteId, ...meta, protected_links: extractProtectedLinks(body) };
}

const signed = (n: number): string => (n > 0 ? `+${n}` : String(n));

function statsLine(s: StatsOut): string {
  return (
    `${s.articles.published} articles published; ${s.backlinks.total} backlinks acquired ` +
    `(${s.backlinks.industry} industry, ${s.backlinks.local} local)`
  );
}

/** A report in words: the period's totals and the comparison with the period before. */
export function renderReport(r: ReportOut): string {
  const { stats, comparison } = r;
  const { now, before } = comparison;
  return [
    `Report of ${r.site.name} (${r.site.domain}, site_id ${r.site.id}) for ${stats.period.key}: ` +
      `${stats.period.from} to ${stats.period.to} (UTC, inclusive).`,
    `Totals: ${statsLine(stats)}.`,
    comparison.partial
      ? `The period has not ended: ${now.period.from} to ${now.period.to} is compared with ${before.period.from} to ${before.period.to}.`
      : `Compared with the period before, ${before.period.from} to ${before.period.to}.`,
    `- Articles published: ${now.articles.published} against ${before.articles.published} ` +
      `(${signed(now.articles.published - before.articles.published)})`,
    `- Backlinks acquired: ${now.backlinks.total} against ${before.backlinks.total} ` +
      `(${signed(now.backlinks.total - before.backlinks.total)}); industry ${now.backlinks.industry} against ` +
      `${before.backlinks.industry}, local ${now.backlinks.local} against ${before.backlinks.local}`,
  ].join('\n');
}

/** resources/list, resources/templates/list and resources/read on a request's server. */
export function registerResources(server: Server, served: Served): void {
  const { application } = served.services;

  server.setRequestHandler('resources/list', async (listing): Promise<ListResourcesResult> => {
    const page = pageOfCursor(listing.params?.cursor);
    return recorded(served, 'list_resources', {}, async ({ call, settle }) => {
      const sites = settle(await application.sites.list(call, { page, per_page: RESOURCE_PAGE_SIZE }));
      return {
        resources: sites.data.map((site) => ({
          uri: siteUri(site.id),
          name: site.domain,
          title: site.name,
          description: `The website ${site.name} (${site.url}) as JSON: id, name, domain, url, created_at.`,
          mimeType: 'application/json',
        })),
        ...(page < sites.meta.total_pages ? { nextCursor: String(page + 1) } : {}),
      };
    });
  });

  server.setRequestHandler('resources/templates/list', async () => ({
    resourceTemplates: [...RESOURCE_TEMPLATES],
  }));

  server.setRequestHandler('resources/read', async (reading): Promise<ReadResourceResult> => {
    const { uri } = reading.params;
    const named = parseResourceUri(uri);
    const notFound = (detail: string) => new ResourceNotFoundError(uri, detail);
    if (!named) {
      return recorded(
        served,
        'read_resource',
        {},
        async () => {
          throw new DomainError('not_found', `No resource ${uri}`);
        },
        notFound,
      );
    }
    const known = {
      siteId: 'siteId' in named ? named.siteId : null,
      articleId: 'articleId' in named ? named.articleId : null,
    };
    return recorded(
      served,
      OPERATIONS[named.kind],
      known,
      async ({ call, settle }): Promise<ReadResourceResult> => {
        const contents = (...items: Omit<TextResourceContents, 'uri'>[]): ReadResourceResult => ({
          contents: items.map((item) => ({ uri, ...item })),
        });
        switch (named.kind) {
          case 'site': {
            const site = settle(await application.sites.get(call, named.siteId));
            return contents({ mimeType: 'application/json', text: JSON.stringify(site) });
          }
          case 'article': {
            const article = settle(await application.articles.get(call, named.articleId));
            return contents({
              mimeType: 'text/html',
              text: article.body,
              _meta: { [ARTICLE_META_KEY]: articleMeta(article) },
            });
          }
          case 'revision': {
            const outcome = await application.revisions.get(call, named.articleId, named.revision);
            const revision = settle(outcome);
            return contents({
              mimeType: 'text/html',
              text: revision.body,
              _meta: {
                [ARTICLE_META_KEY]: revisionMeta(revision, named.articleId, outcome.subject.siteId),
              },
            });
          }
          case 'report': {
            const report = settle(await application.sites.report(call, named.siteId, named.period));
            return contents(
              { mimeType: 'application/json', text: JSON.stringify(report) },
              { mimeType: 'text/plain', text: renderReport(report) },
            );
          }
          default: {
            const unknown: never = named;
            throw new Error(`unknown resource ${JSON.stringify(unknown)}`);
          }
        }
      },
      notFound,
    );
  });
}
