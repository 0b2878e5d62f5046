import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Db } from '../infra/db/schema.ts';
import { findArticle, listArticles } from '../projections/articles.ts';
import { resolvePeriod, siteStats } from '../projections/site-stats.ts';
import type { SiteScope } from '../projections/sites.ts';

/*
 * The floor: a bare fastify app (no schemas, no authentication, no hooks, no logging) whose routes
 * run the same single SQL query the real route's read model runs and send its rows as JSON. What the
 * real route costs above this is the price of the API itself: key lookup, tenancy check, validation,
 * serialisation through the wire schemas, limits, the activity log.
 */

/** Same columns, filter and order as listArticles' page query (projections/articles.ts). */
function articlePage(db: Db, scope: SiteScope, perPage: number, page: number) {
  return db
    .selectFrom('articles as a')
    .where('a.site_id', '=', scope.siteId)
    .where('a.account_id', '=', scope.accountId)
    .select([
      'a.id',
      'a.site_id',
      'a.title',
      'a.url',
      'a.status',
      'a.published_at',
      'a.target_keyword',
      'a.word_count',
      'a.featured_image',
      'a.revision',
      'a.updated_at',
    ])
    .orderBy(sql`a.published_at desc nulls last`)
    .orderBy('a.id', 'desc')
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute();
}

type SiteParams = {
  Params: { id: string };
  Querystring: { per_page?: string; page?: string; period?: string };
};

export async function buildFloor(
  db: Db,
  opts: { accountId: string; now: () => Date },
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });

  // The page query alone: one statement, the rows of the page.
  app.get<SiteParams>('/floor/sites/:id/articles', async (req) =>
    articlePage(
      db,
      { accountId: opts.accountId, siteId: req.params.id },
      Number(req.query.per_page ?? 20),
      Number(req.query.page ?? 1),
    ),
  );

  // listArticles itself (the page query and the count, in parallel): the read model's full cost.
  app.get<SiteParams>('/floor/sites/:id/articles-with-count', async (req) =>
    listArticles(
      db,
      { accountId: opts.accountId, siteId: req.params.id },
      {
        perPage: Number(req.query.per_page ?? 20),
        page: Number(req.query.page ?? 1),
      },
    ),
  );

  // findArticle: one statement (list row joined with its body).
  app.get<{ Params: { id: string } }>('/floor/articles/:id', async (req, reply) => {
    const row = await findArticle(db, opts.accountId, req.params.id);
    if (!row) return reply.status(404).send({ error: 'not found' });
    return row;
  });

  // siteStats: one statement over at most 30 daily or one monthly bucket (and whose the site is).
  app.get<SiteParams>('/floor/sites/:id/stats', async (req) =>
    siteStats(
      db,
      { accountId: opts.accountId, siteId: req.params.id },
      resolvePeriod(req.query.period ?? 'this_month', opts.now()),
    ),
  );

  return app;
}
