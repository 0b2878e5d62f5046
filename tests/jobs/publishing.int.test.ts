import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { callOf, unwrap } from '../../apps/application/call.ts';
import { type Application, createApplication } from '../../apps/application/index.ts';
import {
  PUBLISH_ARTICLE,
  planScheduledArticles,
  publicationOf,
  publishingSubscription,
  publishScheduledArticle,
  SCHEDULER_ACTOR,
} from '../../apps/application/publishing.ts';
import { createRuntime, type Runtime } from '../../apps/runtime.ts';
import { publishingJobs } from '../../apps/worker/jobs/publishing.ts';
import type { ArticleStatus } from '../../domain/article/events.ts';
import { openDatabase } from '../../infra/db/open.ts';
import type { AddOptions, JobSink } from '../../infra/jobs/queue.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { catchUp } from '../../infra/projection-runner.ts';
import { eventually, queueKinds, startTestBackground, type TestBackground } from '../support/jobs.ts';
import { apiKeyActor, createTestRuntime, setUpAccount } from '../support/runtime.ts';

/*
 * Scheduled publishing on the real PostgreSQL and both queues: an article scheduled for a time is
 * published at that time, once, as a revision of origin `rewrite` by the scheduler; a changed plan is
 * followed; an article unscheduled in time stays as it is; two processes running the job at once make
 * one revision.
 */

const api = { origin: 'api' as const, actor: apiKeyActor };

/** A JobSink that only records what is added: the plans, without running them. */
function recordingSink(): JobSink & { added: { name: string; data: unknown; opts?: AddOptions }[] } {
  const added: { name: string; data: unknown; opts?: AddOptions }[] = [];
  return {
    added,
    async add(name, data, opts) {
      added.push({ name, data, ...(opts ? { opts } : {}) });
    },
  };
}

describe('scheduled publishing', () => {
  let runtime: Runtime;
  let databaseUrl: string;
  let drop: () => Promise<void>;
  let accountId: string;
  let siteId: string;
  let app: Application;
  let n = 0;

  beforeAll(async () => {
    const test = await createTestRuntime('postgres');
    runtime = test.runtime;
    drop = test.drop;
    databaseUrl = test.databaseUrl as string;
    ({ accountId, siteId } = await setUpAccount(runtime));
    app = createApplication({
      db: runtime.db,
      commands: runtime.commands,
      publicUrl: 'https://content.example.test',
      now: () => new Date(),
      editLimit: {
        take: async () => ({
          policy: { name: 'edits', quota: 200, window: 'utc-day' },
          allowed: true,
          remaining: 199,
          resetSeconds: 3600,
        }),
      },
      media: createDirectoryMediaStore('/nonexistent'),
      fetchImage: async () => new Uint8Array(),
    });
  });
  afterAll(async () => {
    await drop?.();
  });

  /** A new article of the account, with this status and published_at. */
  async function article(status: ArticleStatus, publishedAt: Date | null): Promise<string> {
    n++;
    const { articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: `Boiler care ${n}`,
        body: `<p>Service your boiler, part ${n}.</p>`,
        url: `https://northside.example/boiler-${n}`,
        status,
        publishedAt: publishedAt?.toISOString() ?? null,
        targetKeyword: null,
        featuredImage: null,
      },
      api,
    );
    return articleId;
  }

  async function row(articleId: string) {
    return runtime.db
      .selectFrom('articles')
      .select(['status', 'published_at', 'revision'])
      .where('id', '=', articleId)
      .executeTakeFirstOrThrow();
  }

  async function statusChanges(articleId: string) {
    return runtime.db
      .selectFrom('events')
      .select(['version', 'data', 'recorded_at'])
      .where('stream_id', '=', `article-${articleId}`)
      .where('type', '=', 'ArticleStatusChanged')
      .orderBy('version')
      .execute();
  }

  describe.each(queueKinds)('on the %s queue', (kind) => {
    let background: TestBackground;

    beforeAll(async () => {
      background = await startTestBackground(kind, runtime, [publishingJobs]);
    });
    afterAll(async () => {
      await background?.close();
    });
    afterEach(() => {
      expect(background.failures()).toEqual([]);
    });

    /** Plans what the log holds, as the background side's subscription runner does. */
    async function plan(): Promise<void> {
      const [subscription] = background.modules[0]?.subscriptions ?? [];
      if (!subscription) throw new Error('no subscription');
      await catchUp(runtime.db, subscription);
    }

    it('declares its job kinds, its subscription and a sweep every 5 minutes', () => {
      const [module] = background.modules;
      expect(module?.kinds.map((k) => [k.name, k.queue])).toEqual([
        ['article.publish', 'publishing'],
        ['publishing.sweep', 'publishing'],
      ]);
      expect(module?.subscriptions?.map((s) => [s.name, s.handles])).toEqual([
        ['publishing@1', ['ArticleCreated', 'ArticleStatusChanged']],
      ]);
      expect(module?.repeats).toEqual([
        { id: 'publishing.sweep', name: 'publishing.sweep', repeat: { everyMs: 300_000 } },
      ]);
    });

    it('publishes a scheduled article once its time comes, and not before', async () => {
      // Far enough ahead that the checks before it are made before it, on a busy machine too.
      const at = new Date(Date.now() + 4_000);
      const articleId = await article('scheduled', at);
      await plan();
      await plan(); // planned again (a second runner, a restart): still one job
      expect(await row(articleId)).toMatchObject({ status: 'scheduled' });
      const publishing = (await background.jobs.status()).find((q) => q.queue === 'publishing');
      expect(publishing?.delayed).toBe(1);

      const published = await eventually(async () => {
        const r = await row(articleId);
        return r.status === 'published' ? { r, seenAt: Date.now() } : undefined;
      });
      expect(published.seenAt).toBeGreaterThanOrEqual(at.getTime());
      expect(published.r).toEqual({ status: 'published', published_at: at, revision: 2 });
      await background.settled();
      const changes = await statusChanges(articleId);
      expect(changes).toHaveLength(1);
      expect(changes[0]?.recorded_at.getTime()).toBeGreaterThanOrEqual(at.getTime());
    });

    it('publishes at once an article scheduled for a time already past', async () => {
      const articleId = await article('scheduled', new Date(Date.now() - 60_000));
      await plan();
      await eventually(async () => ((await row(articleId)).status === 'published' ? true : undefined));
      expect((await statusChanges(articleId))[0]?.data).toMatchObject({
        origin: 'rewrite',
        actor: SCHEDULER_ACTOR,
      });
    });

    it('follows a re-planned time: the old job does nothing, the new one publishes', async () => {
      const first = new Date(Date.now() + 1_000);
      const articleId = await article('scheduled', first);
      await plan();
      const second = new Date(Date.now() + 3_000);
      await runtime.commands.changeArticleStatus(
        accountId,
        articleId,
        { status: 'scheduled', publishedAt: second.toISOString() },
        api,
      );
      await plan();

      await eventually(async () => ((await row(articleId)).status === 'published' ? true : undefined));
      expect(await row(articleId)).toEqual({ status: 'published', published_at: second, revision: 3 });
      await background.settled();
      // The first job, at its time, left the article as it was: the only change since the re-plan is
      // the publication, written at the second time.
      const changes = await statusChanges(articleId);
      expect(changes).toHaveLength(2);
      expect(changes[1]?.recorded_at.getTime()).toBeGreaterThanOrEqual(second.getTime());
    });

    it('leaves an article unscheduled before its time as it is', async () => {
      const at = new Date(Date.now() + 1_500);
      const articleId = await article('scheduled', at);
      await plan();
      await runtime.commands.changeArticleStatus(accountId, articleId, { status: 'draft' }, api);
      await plan();
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, at.getTime() + 200 - Date.now())));
      await background.settled();
      expect(await row(articleId)).toMatchObject({ status: 'draft', revision: 2 });
    });

    it('publishes by its sweep an article whose job was never planned', async () => {
      const at = new Date(Date.now() - 1_000);
      const articleId = await article('scheduled', at);
      // No plan(): as if the job was lost with an in-process queue, or adding it failed.
      await background.modules[0]?.sweep?.();
      await eventually(async () => ((await row(articleId)).status === 'published' ? true : undefined));
      await background.settled();
      expect(await statusChanges(articleId)).toHaveLength(1);
    });
  });

  describe('planning', () => {
    it('gives a job id per article and time, delayed until then (none once it has passed)', () => {
      const now = new Date('2026-12-01T08:00:00Z');
      expect(publicationOf('art_1', '2026-12-01T09:00:00+01:00', now)).toEqual({
        data: { articleId: 'art_1', publishedAt: '2026-12-01T08:00:00.000Z' },
        opts: { jobId: `publish.art_1.${Date.parse('2026-12-01T08:00:00Z')}`, delayMs: 0 },
      });
      const later = publicationOf('art_1', '2026-12-01T09:30:00Z', now);
      expect(later.opts).toEqual({
        jobId: `publish.art_1.${Date.parse('2026-12-01T09:30:00Z')}`,
        delayMs: 90 * 60_000,
      });
    });

    it('plans a job for each event that leaves an article scheduled, and none for the others', async () => {
      const now = new Date();
      const at = new Date(now.getTime() + 3_600_000);
      const scheduled = await article('scheduled', at);
      const draft = await article('draft', null);
      const moved = new Date(at.getTime() + 60_000);
      await runtime.commands.changeArticleStatus(
        accountId,
        draft,
        { status: 'scheduled', publishedAt: moved.toISOString() },
        api,
      );
      await runtime.commands.changeArticleStatus(accountId, scheduled, { status: 'draft' }, api);

      const sink = recordingSink();
      const subscription = publishingSubscription({ jobs: sink, now: () => now });
      expect(subscription).toMatchObject({ name: 'publishing@1', mode: 'async', tables: [] });
      await catchUp(runtime.db, subscription);
      const mine = sink.added.filter((a) =>
        [scheduled, draft].includes((a.data as { articleId: string }).articleId),
      );
      expect(mine).toEqual([
        { name: PUBLISH_ARTICLE, ...publicationOf(scheduled, at, now) },
        { name: PUBLISH_ARTICLE, ...publicationOf(draft, moved, now) },
      ]);
      // Nothing is planned twice by the subscription: its checkpoint moved past these events.
      const planned = sink.added.length;
      await catchUp(runtime.db, subscription);
      expect(sink.added).toHaveLength(planned);
    });

    it('sweeps every scheduled article of the read model into a job, the same job however often', async () => {
      const now = new Date();
      const at = new Date(now.getTime() + 7_200_000);
      const one = await article('scheduled', at);
      const published = await article('published', new Date(now.getTime() - 60_000));
      const sink = recordingSink();
      await planScheduledArticles({ db: runtime.db, jobs: sink, now: () => now });
      await planScheduledArticles({ db: runtime.db, jobs: sink, now: () => now });
      const ids = sink.added.map((a) => a.opts?.jobId);
      const expected = publicationOf(one, at, now).opts.jobId;
      expect(ids.filter((id) => id === expected)).toHaveLength(2); // added twice, one job: the id is taken
      expect(ids.some((id) => id?.includes(published))).toBe(false);
      const scheduledCount = await runtime.db
        .selectFrom('articles')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('status', '=', 'scheduled')
        .executeTakeFirstOrThrow();
      expect(sink.added).toHaveLength(2 * Number(scheduledCount.n));
    });
  });

  describe('the job, on a fixed clock', () => {
    it('publishes at the time, keeping published_at, as a revision of the scheduler', async () => {
      const at = new Date(Date.now() + 3_600_000);
      const articleId = await article('scheduled', at);
      const job = { articleId, publishedAt: at.toISOString() };
      const deps = { db: runtime.db, commands: runtime.commands };

      await expect(
        publishScheduledArticle({ ...deps, now: () => new Date(at.getTime() - 1) }, job),
      ).rejects.toThrow(/not yet due/);
      expect(await row(articleId)).toMatchObject({ status: 'scheduled', revision: 1 });

      expect(await publishScheduledArticle({ ...deps, now: () => at }, job)).toBe('published');
      expect(await row(articleId)).toEqual({ status: 'published', published_at: at, revision: 2 });
      // Run again (a retry, another process later): nothing more.
      expect(await publishScheduledArticle({ ...deps, now: () => at }, job)).toBe('not_scheduled');
      const changes = await statusChanges(articleId);
      expect(changes).toHaveLength(1);
      expect(changes[0]?.data).toMatchObject({
        revision: 2,
        status: 'published',
        publishedAt: at.toISOString(),
        origin: 'rewrite',
        actor: SCHEDULER_ACTOR,
      });
    });

    it('does nothing for a plan that changed: unscheduled, moved to another time, or gone', async () => {
      const at = new Date(Date.now() + 3_600_000);
      const deps = { db: runtime.db, commands: runtime.commands, now: () => new Date(at.getTime() + 1_000) };
      const unscheduled = await article('scheduled', at);
      await runtime.commands.changeArticleStatus(accountId, unscheduled, { status: 'draft' }, api);
      const moved = await article('scheduled', at);
      const later = new Date(at.getTime() + 86_400_000);
      await runtime.commands.changeArticleStatus(
        accountId,
        moved,
        { status: 'scheduled', publishedAt: later.toISOString() },
        api,
      );

      for (const articleId of [unscheduled, moved, 'art_missing']) {
        expect(await publishScheduledArticle(deps, { articleId, publishedAt: at.toISOString() })).toBe(
          'not_scheduled',
        );
      }
      expect(await row(unscheduled)).toMatchObject({ status: 'draft', revision: 2 });
      expect(await row(moved)).toMatchObject({ status: 'scheduled', published_at: later, revision: 2 });
    });

    it('publishes over an edit made after the plan (a new title), on the revision it reads', async () => {
      const at = new Date(Date.now() - 1_000);
      const articleId = await article('scheduled', at);
      await runtime.commands.editArticle(accountId, articleId, { title: 'Boiler care, revised' }, api);
      const outcome = await publishScheduledArticle(
        { db: runtime.db, commands: runtime.commands, now: () => new Date() },
        { articleId, publishedAt: at.toISOString() },
      );
      expect(outcome).toBe('published');
      expect(await row(articleId)).toMatchObject({ status: 'published', revision: 3 });
    });

    it('run by two processes at once on one PostgreSQL, makes one revision and fails in neither', async () => {
      const other = createRuntime(await openDatabase({ databaseUrl, dataDir: 'memory://' }));
      try {
        const at = new Date(Date.now() - 1_000);
        const ids = await Promise.all(Array.from({ length: 12 }, () => article('scheduled', at)));
        const now = (): Date => new Date();
        const outcomes = await Promise.all(
          ids.flatMap((articleId) =>
            [runtime, other].map((rt) =>
              publishScheduledArticle(
                { db: rt.db, commands: rt.commands, now },
                { articleId, publishedAt: at.toISOString() },
              ).then((outcome) => ({ articleId, outcome })),
            ),
          ),
        );
        for (const articleId of ids) {
          const mine = outcomes.filter((o) => o.articleId === articleId).map((o) => o.outcome);
          expect(mine.sort()).toEqual(['not_scheduled', 'published']);
          expect(await row(articleId)).toMatchObject({ status: 'published', revision: 2 });
          const changes = await statusChanges(articleId);
          expect(changes).toHaveLength(1);
          expect(changes[0]?.data).toMatchObject({ origin: 'rewrite', actor: SCHEDULER_ACTOR });
        }
      } finally {
        await other.close();
      }
    });

    it('shows the publication in the revisions and the activity log as other revisions are shown', async () => {
      const at = new Date(Date.now() - 1_000);
      const articleId = await article('scheduled', at);
      await publishScheduledArticle(
        { db: runtime.db, commands: runtime.commands, now: () => new Date() },
        { articleId, publishedAt: at.toISOString() },
      );
      const call = () => callOf({ accountId, actor: apiKeyActor, origin: 'api', scope: 'read' });
      const revisions = unwrap(await app.revisions.list(call(), articleId, { page: 1, per_page: 20 }));
      expect(revisions.data.map((r) => [r.revision, r.origin, r.actor])).toEqual([
        [2, 'rewrite', SCHEDULER_ACTOR],
        [1, 'api', apiKeyActor],
      ]);
      const activity = unwrap(
        await app.activity.list(call(), { page: 1, per_page: 20, article_id: articleId }),
      );
      expect(activity.data).toEqual([
        expect.objectContaining({
          source: 'rewrite',
          actor: SCHEDULER_ACTOR,
          operation: 'change_article_status',
          article_id: articleId,
          site_id: siteId,
          revision: 2,
        }),
      ]);
    });
  });
});
