import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { SEARCH_RANKED_MAX } from '../../../domain/article/search.ts';
import { ActivityQuery, ActivityRecord } from '../../application/activity.ts';
import {
  Article,
  ArticleAsOf,
  ArticleListItem,
  ArticleQuery,
  ArticleSearchHit,
  GetArticleQuery,
  ListAsOfMeta,
  SearchQuery,
} from '../../application/articles.ts';
import { ArticleParams, PageQuery, SiteParams } from '../../application/contract.ts';
import type { Application } from '../../application/index.ts';
import { Backlink, BacklinkQuery, Site, Stats, StatsQuery } from '../../application/sites.ts';
import { settled } from '../http/outcome.ts';
import { listOf, Problem } from '../http/schemas.ts';
import { apiCall, heldRevision, sendJson, sendNotModified, weakEtag } from './call.ts';
import { sendList } from './lists.ts';

type ReadRouteDeps = { application: Application; publicUrl: string };

/** The errors every authenticated read of an id can answer with (404: unknown, or of another account). */
export const readErrors = { 400: Problem, 401: Problem, 404: Problem, 429: Problem } as const;
/** A read that names no id has nothing to miss: no 404. */
const accountErrors = { 400: Problem, 401: Problem, 429: Problem } as const;

const exampleSite = 'site_06h014k26k323kar2chmr6p5jr';
const SiteList = listOf(Site, 'SiteList', { of: 'sites', examplePath: '/api/v1/sites' });
const ArticleList = listOf(
  ArticleListItem,
  'ArticleList',
  { of: 'articles', examplePath: `/api/v1/sites/${exampleSite}/articles` },
  ListAsOfMeta,
);
const SearchHitList = listOf(ArticleSearchHit, 'ArticleSearchHitList', {
  of: 'articles found',
  examplePath: '/api/v1/articles?q=boiler',
});
const BacklinkList = listOf(Backlink, 'BacklinkList', {
  of: 'backlinks',
  examplePath: `/api/v1/sites/${exampleSite}/backlinks`,
});
const ActivityList = listOf(ActivityRecord, 'ActivityList', {
  of: 'activity records',
  examplePath: '/api/v1/activity',
});
const ArticleHeaders = z.object({
  'if-none-match': z
    .string()
    .optional()
    .meta({ description: 'The ETag of a copy you hold: 304 when it is still current.', examples: ['W/"3"'] }),
});

/** The five read endpoints of the seed spec, and the activity log. They read read models only. */
export const readRoutes: FastifyPluginAsyncZod<ReadRouteDeps> = async (app, { application, publicUrl }) => {
  app.get(
    '/sites',
    {
      config: { operation: 'list_sites' },
      schema: {
        tags: ['sites'],
        summary: 'List the websites on the account',
        description: 'Oldest first (ties by id). Paginated with `page` and `per_page`.',
        querystring: PageQuery,
        response: { 200: SiteList, ...accountErrors },
      },
    },
    async (req, reply) => {
      const result = settled(req, reply, await application.sites.list(apiCall(req), req.query));
      return sendList(reply, { publicUrl, path: '/api/v1/sites', query: req.query }, result);
    },
  );

  app.get(
    '/sites/:id/articles',
    {
      config: { operation: 'list_articles', subject: 'site', keyCheck: 'statement' },
      schema: {
        tags: ['articles'],
        summary: 'List the articles of a site',
        description:
          'Newest `published_at` first, ties by id; articles with no publication time (drafts) last. ' +
          '`from` and `to` are inclusive UTC dates on `published_at`. With `as_of`, the list as it stood at that ' +
          'instant (`meta.as_of` echoes it): the articles that existed then, filtered and ordered by their status ' +
          'and `published_at` then, each with its title, word count, featured image and `revision` then; 400 for a ' +
          'future instant.',
        params: SiteParams,
        querystring: ArticleQuery,
        response: { 200: ArticleList, ...readErrors },
      },
    },
    async (req, reply) => {
      const result = settled(
        req,
        reply,
        await application.articles.list(apiCall(req), req.params.id, req.query),
      );
      const path = `/api/v1/sites/${encodeURIComponent(req.params.id)}/articles`;
      return sendList(reply, { publicUrl, path, query: req.query }, result);
    },
  );

  app.get(
    '/articles',
    {
      config: { operation: 'search_articles', keyCheck: 'statement' },
      schema: {
        tags: ['articles'],
        summary: "Search the account's articles",
        description:
          'Full-text search over the title, target keyword and body text of every article of the account ' +
          '(or of one site with `site_id`), in web-search syntax: `boiler pressure` (both words, any form, in the title and ' +
          'target keyword or in the body), ' +
          '`"combi boiler"` (the phrase), `boiler -gas` (gas nowhere), `boiler or furnace`. Most relevant first ' +
          '(`match.score`; title words count most, then the target keyword, then the body), then newest ' +
          `\`published_at\`, ties by id; of more than ${SEARCH_RANKED_MAX} matches, the newest ${SEARCH_RANKED_MAX} are ranked and counted. ` +
          '`match.snippet` is plain text from the body, `match.highlights` the ' +
          "matched words' character ranges in it. `q` is required: a site's articles without a search are at " +
          '`/sites/{id}/articles`. An empty `q`, or one of only common words (`the`), is a 400 naming `q`; a ' +
          "`site_id` that is not the account's is a 404.",
        querystring: SearchQuery,
        response: { 200: SearchHitList, ...readErrors },
      },
    },
    async (req, reply) => {
      const result = settled(req, reply, await application.articles.search(apiCall(req), req.query));
      return sendList(reply, { publicUrl, path: '/api/v1/articles', query: req.query }, result);
    },
  );

  app.get(
    '/articles/:id',
    {
      config: { operation: 'get_article', subject: 'article', keyCheck: 'statement' },
      schema: {
        tags: ['articles'],
        summary: 'Get one article with its full HTML body',
        description:
          'Protected blocks (inserted backlink anchors and internal links) carry `data-service-protected` in the body ' +
          'and are listed in `protected_links`. The weak `ETag` is the revision: send it as `If-Match` on an edit. ' +
          'With `as_of`, the article as it stood at that instant (the revision current then, `as_of` echoed, the ' +
          "`ETag` that revision's; `If-None-Match` is not looked at): 404 when it did not exist then, 400 for a " +
          'future instant.',
        params: ArticleParams,
        querystring: GetArticleQuery,
        headers: ArticleHeaders,
        response: {
          200: z.union([Article, ArticleAsOf]),
          304: z.null().meta({ description: 'Not modified: the ETag sent in If-None-Match is current' }),
          ...readErrors,
        },
        responseHeaders: { 200: ['ETag'], 304: ['ETag'] },
      },
    },
    async (req, reply) => {
      if (req.query.as_of !== undefined) {
        const past = settled(
          req,
          reply,
          await application.articles.getAsOf(apiCall(req), req.params.id, req.query.as_of),
        );
        reply.header('etag', weakEtag(past.revision));
        return sendJson(reply, JSON.stringify(past));
      }
      const held = heldRevision(req.headers['if-none-match']);
      const read = settled(
        req,
        reply,
        await application.articles.getUnlessHeld(apiCall(req), req.params.id, held),
      );
      reply.header('etag', weakEtag(read.revision));
      if (read.article === null) return sendNotModified(reply);
      return sendJson(reply, read.article);
    },
  );

  app.get(
    '/sites/:id/backlinks',
    {
      config: { operation: 'list_backlinks', subject: 'site', keyCheck: 'statement' },
      schema: {
        tags: ['backlinks'],
        summary: 'List the backlinks of a site',
        description:
          'Newest `acquired_on` first, ties by id. `from` and `to` are inclusive UTC dates on `acquired_on`; ' +
          '`category` keeps only industry or only local backlinks.',
        params: SiteParams,
        querystring: BacklinkQuery,
        response: { 200: BacklinkList, ...readErrors },
      },
    },
    async (req, reply) => {
      const result = settled(
        req,
        reply,
        await application.sites.backlinks(apiCall(req), req.params.id, req.query),
      );
      const path = `/api/v1/sites/${encodeURIComponent(req.params.id)}/backlinks`;
      return sendList(reply, { publicUrl, path, query: req.query }, result);
    },
  );

  app.get(
    '/sites/:id/stats',
    {
      config: { operation: 'get_stats', subject: 'site', keyCheck: 'statement' },
      schema: {
        tags: ['stats'],
        summary: 'Statistics of a site for a period',
        description:
          'Articles published (status `published`, `published_at` in the period) and backlinks acquired in the period. ' +
          'All periods are UTC; `from` and `to` in the answer are inclusive. With `as_of`, the statistics as they stood ' +
          'at that instant (`as_of` echoed): articles by their status and `published_at` then, backlinks recorded by ' +
          'then; `this_month`, `last_month` and `last_30_days` count from that instant’s day; 400 for a future instant.',
        params: SiteParams,
        querystring: StatsQuery,
        response: { 200: Stats, ...readErrors },
      },
    },
    async (req, reply) =>
      settled(
        req,
        reply,
        await application.sites.stats(apiCall(req), req.params.id, req.query.period, req.query.as_of),
      ),
  );

  app.get(
    '/activity',
    {
      config: { operation: 'list_activity' },
      schema: {
        tags: ['activity'],
        summary: "The account's activity log",
        description:
          'Every call through the API and MCP (refused ones included) and the changes the content pipeline made, ' +
          'newest first. Filters: inclusive UTC dates, source, site and article.',
        querystring: ActivityQuery,
        response: { 200: ActivityList, ...accountErrors },
      },
    },
    async (req, reply) => {
      const result = settled(req, reply, await application.activity.list(apiCall(req), req.query));
      return sendList(reply, { publicUrl, path: '/api/v1/activity', query: req.query }, result);
    },
  );
};
