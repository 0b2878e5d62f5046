import Fastify, { type FastifyInstance } from 'fastify';
import { changeOut } from '../apps/application/articles.ts';
import type { Runtime } from '../apps/runtime.ts';
import type { Db } from '../infra/db/schema.ts';
import { activityPage, listActivity } from '../projections/activity.ts';
import { articlePage, findArticle, listArticles } from '../projections/articles.ts';
import { backlinkPage, listBacklinks } from '../projections/backlinks.ts';
import { resolvePeriod, siteStats } from '../projections/site-stats.ts';

/*
 * The floor: a bare fastify app (no schemas, no authentication, no hooks, no logging) whose routes
 * run the same single SQL query the real route's read model runs and send its rows as JSON. What the
 * real route costs above this is the price of the API itself: key lookup, tenancy check, validation,
 * the wire mapping, limits, the activity log.
 */

type SiteParams = {
  Params: { id: string };
  Querystring: { per_page?: string; page?: string; period?: string };
};

/** The page a floor route is asked for, as the real routes default it. */
function pageOf(query: SiteParams['Querystring']): { perPage: number; page: number } {
  return { perPage: Number(query.per_page ?? 20), page: Number(query.page ?? 1) };
}

export async function buildFloor(
  db: Db,
  opts: { accountId: string; now: () => Date },
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });

  // The page query alone: one statement, the rows of the page.
  app.get<SiteParams>('/floor/sites/:id/articles', async (req) =>
    articlePage(db, { accountId: opts.accountId, siteId: req.params.id }, pageOf(req.query)).execute(),
  );

  // listArticles itself (the page query and the count, in parallel): the read model's full cost.
  app.get<SiteParams>('/floor/sites/:id/articles-with-count', async (req) =>
    listArticles(db, { accountId: opts.accountId, siteId: req.params.id }, pageOf(req.query)),
  );

  // The page query of listBacklinks alone.
  app.get<SiteParams>('/floor/sites/:id/backlinks', async (req) =>
    backlinkPage(db, { accountId: opts.accountId, siteId: req.params.id }, pageOf(req.query)).execute(),
  );

  // listBacklinks itself (the page query and the total from backlink_counts, in parallel).
  app.get<SiteParams>('/floor/sites/:id/backlinks-with-count', async (req) =>
    listBacklinks(db, { accountId: opts.accountId, siteId: req.params.id }, pageOf(req.query)),
  );

  // The page query of listActivity alone: the account's newest records.
  app.get<SiteParams>('/floor/activity', async (req) =>
    activityPage(db, opts.accountId, pageOf(req.query)).execute(),
  );

  // listActivity itself (the page query and the total from activity_counts, in parallel).
  app.get<SiteParams>('/floor/activity-with-count', async (req) =>
    listActivity(db, opts.accountId, pageOf(req.query)),
  );

  // findArticle: one statement (list row joined with its body), the row sent with JSON.stringify, the
  // body escaped on every read. The real route reads the body's JSON text as stored (findArticleJson);
  // the floor stays the plain way a bare app would serve the article.
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

/**
 * The edit's floor: a bare fastify app (no schemas, no authentication, no limits, no activity, no
 * logging) whose one route runs the edit command itself (`commands.editArticle`: the decider, the
 * append with its inline projections, the remembered head) on an article of `accountId` and answers
 * what the real PUT answers (`changeOut`). What the real PUT costs above this is the API's: the key,
 * the limits, validation, the activity record, the access log.
 */
export async function buildEditFloor(
  runtime: Pick<Runtime, 'commands'>,
  opts: { accountId: string },
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  const caller = { origin: 'api', actor: { type: 'system', id: 'bench', name: 'Benchmark' } } as const;
  app.put<{ Params: { id: string }; Body: { title?: string; body?: string } }>(
    '/floor/articles/:id',
    async (req) =>
      changeOut(
        await runtime.commands.editArticle(
          opts.accountId,
          req.params.id,
          { title: req.body.title, body: req.body.body },
          caller,
        ),
      ),
  );
  return app;
}
