import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOf, unwrap } from '../../apps/application/call.ts';
import {
  MONTHLY_REPORTS,
  type MonthlyReportsSummary,
  makeMonthlyReports,
  reportPeriodOf,
} from '../../apps/application/reports.ts';
import { createSites } from '../../apps/application/sites.ts';
import { createRuntime, type Runtime } from '../../apps/runtime.ts';
import { reportJobs } from '../../apps/worker/jobs/reports.ts';
import type { BacklinkCategory } from '../../domain/backlink/events.ts';
import { DomainError } from '../../domain/errors.ts';
import type { MonthlyReportReady } from '../../domain/report/events.ts';
import { openDatabase } from '../../infra/db/open.ts';
import { eventually, queueKinds, startTestBackground, type TestBackground } from '../support/jobs.ts';
import { apiKeyActor, createTestRuntime, pipelineActor, setUpAccount } from '../support/runtime.ts';

/*
 * Monthly reports on the real PostgreSQL and both queues: one MonthlyReportReady per site and month,
 * with the month's figures as the stats of that month give them, made once however often and by
 * however many processes the job runs.
 */

const REPORT_TIME = new Date('2026-12-01T00:00:05Z');
const rewrite = { origin: 'rewrite' as const, actor: pipelineActor };

type Report = MonthlyReportReady['data'];

describe.each(queueKinds)('monthly reports, the job on the %s queue', (kind) => {
  let runtime: Runtime;
  let databaseUrl: string;
  let drop: () => Promise<void>;
  let clock = new Date('2026-10-01T08:00:00Z');
  const now = (): Date => clock;
  let mine: { accountId: string; siteId: string; otherSiteId: string };
  let theirs: { accountId: string; siteId: string; otherSiteId: string };
  let lateSiteId: string;
  let background: TestBackground;
  let n = 0;

  async function article(
    accountId: string,
    siteId: string,
    status: 'published' | 'draft',
    publishedAt: string,
  ) {
    n++;
    return runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: `Article ${n}`,
        body: `<p>Body ${n}</p>`,
        url: `https://northside.example/${n}`,
        status,
        publishedAt,
        targetKeyword: null,
        featuredImage: null,
      },
      rewrite,
    );
  }
  async function backlink(accountId: string, siteId: string, acquiredOn: string, category: BacklinkCategory) {
    n++;
    await runtime.commands.acquireBacklink(accountId, {
      siteId,
      acquiredOn,
      sourceDomain: 'news.example',
      sourceUrl: `https://news.example/${n}`,
      targetUrl: 'https://northside.example/',
      anchorText: 'Northside',
      anchorType: 'branded',
      category,
    });
  }

  /** Every report event of the database, as stored. */
  async function reports(): Promise<{ stream_id: string; version: number; data: Report }[]> {
    const rows = await runtime.db
      .selectFrom('events')
      .select(['stream_id', 'version', 'data'])
      .where('type', '=', 'MonthlyReportReady')
      .orderBy('stream_id')
      .execute();
    return rows as { stream_id: string; version: number; data: Report }[];
  }

  beforeAll(async () => {
    const test = await createTestRuntime('postgres', { now });
    runtime = test.runtime;
    drop = test.drop;
    databaseUrl = test.databaseUrl as string;
    mine = await setUpAccount(runtime);
    theirs = await setUpAccount(runtime, 'Rival Ltd');

    // October: counted in October's report only.
    await article(mine.accountId, mine.siteId, 'published', '2026-10-31T23:59:59Z');
    await backlink(mine.accountId, mine.siteId, '2026-10-31', 'industry');
    // November.
    clock = new Date('2026-11-10T08:00:00Z');
    await article(mine.accountId, mine.siteId, 'published', '2026-11-01T00:00:00Z');
    await article(mine.accountId, mine.siteId, 'published', '2026-11-30T23:59:59Z');
    const { articleId: unpublished } = await article(
      mine.accountId,
      mine.siteId,
      'published',
      '2026-11-12T10:00:00Z',
    );
    await runtime.commands.changeArticleStatus(
      mine.accountId,
      unpublished,
      { status: 'draft' },
      {
        origin: 'api',
        actor: apiKeyActor,
      },
    );
    await article(mine.accountId, mine.siteId, 'draft', '2026-11-15T10:00:00Z');
    await backlink(mine.accountId, mine.siteId, '2026-11-01', 'industry');
    await backlink(mine.accountId, mine.siteId, '2026-11-20', 'industry');
    await backlink(mine.accountId, mine.siteId, '2026-11-30', 'local');
    await article(theirs.accountId, theirs.siteId, 'published', '2026-11-05T10:00:00Z');
    await backlink(theirs.accountId, theirs.siteId, '2026-11-05', 'local');
    // December: after November, and a site that did not exist in November.
    clock = new Date('2026-12-01T00:00:01Z');
    await article(mine.accountId, mine.siteId, 'published', '2026-12-01T00:00:00Z');
    await backlink(mine.accountId, mine.siteId, '2026-12-01', 'local');
    ({ siteId: lateSiteId } = await runtime.commands.addSite(mine.accountId, {
      name: 'Late Site',
      domain: 'late.example',
      url: 'https://late.example/',
    }));
    clock = REPORT_TIME;
    // The statistics are not caught up here on purpose: the job brings them up to the log's head,
    // events held back by a transaction open elsewhere on the server (another test file's) included.
    background = await startTestBackground(kind, runtime, [reportJobs], { now });
  });
  afterAll(async () => {
    await background?.close();
    await drop?.();
  });

  it('declares the job on the maintenance queue, at midnight UTC on the first of every month', () => {
    const [module] = background.modules;
    expect(module?.kinds.map((k) => [k.name, k.queue])).toEqual([['report.monthly', 'maintenance']]);
    expect(module?.repeats).toEqual([
      { id: 'report.monthly', name: 'report.monthly', repeat: { cron: '0 0 1 * *' } },
    ]);
  });

  it('reports the month before, once per site that existed in it, with the figures of its stats', async () => {
    await background.jobs.add(MONTHLY_REPORTS, {});
    const made = await eventually(async () => {
      const all = await reports();
      return all.length >= 4 ? all : undefined;
    });
    await background.settled();
    expect(background.failures()).toEqual([]);

    const stats = createSites({ db: runtime.db, now });
    const expected = [mine, theirs].flatMap((account) =>
      [account.siteId, account.otherSiteId].map((siteId) => ({ account, siteId })),
    );
    expect(made.map((r) => r.stream_id).sort()).toEqual(
      expected.map(({ siteId }) => `report-${siteId}-2026-11`).sort(),
    );
    for (const { account, siteId } of expected) {
      const report = made.find((r) => r.stream_id === `report-${siteId}-2026-11`);
      const call = callOf({ accountId: account.accountId, actor: apiKeyActor, origin: 'api', scope: 'read' });
      const figures = unwrap(await stats.stats(call, siteId, '2026-11'));
      expect(report?.version).toBe(1);
      expect(report?.data).toEqual({
        siteId,
        accountId: account.accountId,
        period: '2026-11',
        from: '2026-11-01',
        to: '2026-11-30',
        articlesPublished: figures.articles.published,
        backlinksIndustry: figures.backlinks.industry,
        backlinksLocal: figures.backlinks.local,
      });
    }
    // The figures themselves, counted by hand from the events above.
    const site = (siteId: string) => made.find((r) => r.stream_id === `report-${siteId}-2026-11`)?.data;
    expect(site(mine.siteId)).toMatchObject({
      articlesPublished: 2,
      backlinksIndustry: 2,
      backlinksLocal: 1,
    });
    expect(site(mine.otherSiteId)).toMatchObject({
      articlesPublished: 0,
      backlinksIndustry: 0,
      backlinksLocal: 0,
    });
    expect(site(theirs.siteId)).toMatchObject({
      articlesPublished: 1,
      backlinksIndustry: 0,
      backlinksLocal: 1,
    });
    expect(made.some((r) => r.stream_id.includes(lateSiteId))).toBe(false);
  });

  it('makes no second report however often, and by however many processes, it runs', async () => {
    const other = createRuntime(await openDatabase({ databaseUrl, dataDir: 'memory://' }), { now });
    try {
      const before = await reports();
      const runs = await Promise.all([
        makeMonthlyReports({ db: runtime.db, commands: runtime.commands, now }),
        makeMonthlyReports({ db: other.db, commands: other.commands, now }, '2026-11'),
        makeMonthlyReports({ db: other.db, commands: other.commands, now }, undefined, { sitesPerPage: 1 }),
      ]);
      await background.jobs.add(MONTHLY_REPORTS, { period: '2026-11' });
      await background.modules[0]?.sweep?.();
      await background.settled();
      expect(background.failures()).toEqual([]);
      expect(await reports()).toEqual(before);
      expect(runs).toEqual(
        Array.from(
          { length: 3 },
          (): MonthlyReportsSummary => ({ period: '2026-11', sites: 4, made: 0, skipped: 4 }),
        ),
      );
    } finally {
      await other.close();
    }
  });

  it('runs for a month given by hand; of several runs at once each site gets one report', async () => {
    const other = createRuntime(await openDatabase({ databaseUrl, dataDir: 'memory://' }), { now });
    try {
      const runs = await Promise.all([
        makeMonthlyReports({ db: runtime.db, commands: runtime.commands, now }, '2026-10', {
          sitesPerPage: 3,
        }),
        makeMonthlyReports({ db: other.db, commands: other.commands, now }, '2026-10', { sitesPerPage: 1 }),
      ]);
      expect(runs.map((r) => r.sites)).toEqual([4, 4]);
      expect(runs[0]?.made + runs[1]?.made).toBe(4);
      expect(runs[0]?.made + runs[0]?.skipped).toBe(4);
      const october = (await reports()).filter((r) => r.data.period === '2026-10');
      expect(october).toHaveLength(4);
      expect(october.every((r) => r.version === 1)).toBe(true);
      expect(october.find((r) => r.data.siteId === mine.siteId)?.data).toMatchObject({
        from: '2026-10-01',
        to: '2026-10-31',
        articlesPublished: 1,
        backlinksIndustry: 1,
        backlinksLocal: 0,
      });
    } finally {
      await other.close();
    }
  });

  it('records a report once: the second of two at once, or of two in turn, appends nothing', async () => {
    const other = createRuntime(await openDatabase({ databaseUrl, dataDir: 'memory://' }), { now });
    try {
      const report = (period: string): Report => ({
        siteId: lateSiteId,
        accountId: mine.accountId,
        period,
        from: `${period}-01`,
        to: `${period}-28`,
        articlesPublished: 0,
        backlinksIndustry: 0,
        backlinksLocal: 0,
      });
      const periods = ['2025-01', '2025-02', '2025-03', '2025-04', '2025-05'];
      const together = await Promise.all(
        periods.flatMap((p) => [runtime, other].map((rt) => rt.commands.makeMonthlyReport(report(p)))),
      );
      expect(together.filter((r) => r.made)).toHaveLength(periods.length);
      expect(await runtime.commands.makeMonthlyReport(report('2025-01'))).toEqual({ made: false });
      const stored = (await reports()).filter((r) => r.data.siteId === lateSiteId);
      expect(stored.map((r) => [r.data.period, r.version])).toEqual(periods.map((p) => [p, 1]));
    } finally {
      await other.close();
    }
  });

  it('refuses a month that has not ended, and what is not a month', async () => {
    for (const period of ['2026-12', '2027-01', 'last_month', '2026-13', '0000-01']) {
      const refusal = await makeMonthlyReports(
        { db: runtime.db, commands: runtime.commands, now },
        period,
      ).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(DomainError);
      expect((refusal as DomainError).code).toBe('invalid_request');
    }
    expect(reportPeriodOf(undefined, new Date('2027-01-01T00:00:00Z'))).toMatchObject({
      month: '2026-12',
      from: '2026-12-01',
      to: '2026-12-31',
    });
    expect(reportPeriodOf('2024-02', REPORT_TIME)).toMatchObject({ to: '2024-02-29' });
  });
});
