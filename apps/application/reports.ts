import { DomainError } from '../../domain/errors.ts';
import { reportStream } from '../../domain/report/events.ts';
import type { Db } from '../../infra/db/schema.ts';
import {
  committedHead,
  existingStreams,
  isAfter,
  type LogPosition,
  readCheckpoint,
} from '../../infra/event-store.ts';
import { applyNextBatch } from '../../infra/projection-runner.ts';
import { type Period, resolvePeriod, siteStats, siteStatsProjector } from '../../projections/site-stats.ts';
import { listSitesMadeBefore } from '../../projections/sites.ts';
import type { Commands } from './commands/index.ts';

/*
 * Monthly reports: on the first day of a month (UTC), every site's figures of the month before are
 * computed from the statistics read model, as the stats of that month are answered, and recorded as
 * `MonthlyReportReady` in the site's report stream of that month. A report is made once: the stream
 * takes one event (see domain/report/decider.ts), so the job may run in several processes, twice, or
 * again by hand, and each site gets one report per month. Webhooks (`report.ready`) are made from the
 * event by their own subscription.
 */

/** The job kind that makes a month's reports (queue `maintenance`). */
export const MONTHLY_REPORTS = 'report.monthly';
/** When: at midnight UTC on the first day of every month. */
export const MONTHLY_REPORTS_CRON = '0 0 1 * *';

/** The job's data: the month (`YYYY-MM`); without one, the month before the job's time. */
export type MonthlyReportsData = { period?: string | undefined };

export type ReportDeps = { db: Db; commands: Pick<Commands, 'makeMonthlyReport'>; now: () => Date };

/** What one run did. */
export type MonthlyReportsSummary = {
  period: string;
  /** Sites looked at: those that existed before the month ended. */
  sites: number;
  /** Reports made by this run. */
  made: number;
  /** Sites whose report of the month existed already. */
  skipped: number;
};

/** Sites per page. */
const SITE_PAGE = 500;
/** How long a run waits for the statistics to take in what the log held when it started. */
const CATCH_UP_TIMEOUT_MS = 60_000;

const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;

/**
 * The month a run reports on: `period` (`YYYY-MM`) or, without one, the month before `now`. A month
 * that has not ended at `now` is refused: its report would be made once, with part of its figures.
 * Pure.
 */
export function reportPeriodOf(period: string | undefined, now: Date): Period & { month: string } {
  const notAMonth = (): DomainError =>
    new DomainError('invalid_request', `The report period must be a month YYYY-MM, not ${period}`, [
      { field: 'period', message: 'must be a month YYYY-MM' },
    ]);
  if (period !== undefined && !MONTH.test(period)) throw notAMonth();
  let resolved: Period;
  try {
    resolved = resolvePeriod(period ?? 'last_month', now);
  } catch (error) {
    if (error instanceof RangeError) throw notAMonth();
    throw error;
  }
  const month = resolved.from.slice(0, 7);
  if (resolved.to >= now.toISOString().slice(0, 10)) {
    throw new DomainError(
      'invalid_request',
      `The month ${month} has not ended yet; its report is made after`,
      [{ field: 'period', message: 'must be a month that has ended' }],
    );
  }
  return { ...resolved, key: month, month };
}

/**
 * Brings the statistics read model up to where the log stood when this was called: the report of a
 * month is made once, so it must count every event committed before it, however far the projection
 * runner (maybe in another process, maybe not running) has got. Batches are applied as the runner
 * applies them, under the projector's lock, so this and the runners take turns. The target is the
 * newest committed event, held back or not (committedHead): an event committed behind a transaction
 * still open is waited for, up to `timeoutMs`, then the run fails and the job tries again.
 */
async function statisticsUpToNow(db: Db, timeoutMs: number): Promise<void> {
  const target: LogPosition = await committedHead(db);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!isAfter(target, await readCheckpoint(db, siteStatsProjector.name))) return;
    const { applied } = await applyNextBatch(db, siteStatsProjector);
    if (applied > 0) continue;
    if (Date.now() > deadline) {
      throw new Error(`${siteStatsProjector.name} has not reached the log's head; the reports wait for it`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Makes the month's report of every site that existed before the month ended and has none yet (the
 * job `report.monthly`, and the CLI by hand): sites in pages, the figures of each from the statistics,
 * one `MonthlyReportReady` each. Safe to run again, and at once in several processes.
 */
export async function makeMonthlyReports(
  deps: ReportDeps,
  period?: string,
  opts: { sitesPerPage?: number; catchUpMs?: number } = {},
): Promise<MonthlyReportsSummary> {
  const pageSize = opts.sitesPerPage ?? SITE_PAGE;
  const month = reportPeriodOf(period, deps.now());
  const endOfMonth = new Date(`${month.to}T00:00:00Z`).getTime() + 86_400_000;
  await statisticsUpToNow(deps.db, opts.catchUpMs ?? CATCH_UP_TIMEOUT_MS);
  const summary: MonthlyReportsSummary = { period: month.month, sites: 0, made: 0, skipped: 0 };
  let after = '';
  for (;;) {
    const sites = await listSitesMadeBefore(deps.db, {
      after,
      before: new Date(endOfMonth),
      limit: pageSize,
    });
    if (sites.length === 0) return summary;
    const reported = await existingStreams(
      deps.db,
      sites.map((s) => reportStream(s.id, month.month)),
    );
    for (const site of sites) {
      summary.sites++;
      if (reported.has(reportStream(site.id, month.month))) {
        summary.skipped++;
        continue;
      }
      const scope = { accountId: site.account_id, siteId: site.id };
      const stats = await siteStats(deps.db, scope, month);
      if (!stats) continue; // the site is gone from the read model since the page was read
      const result = await deps.commands.makeMonthlyReport({
        siteId: site.id,
        accountId: site.account_id,
        period: month.month,
        from: month.from,
        to: month.to,
        articlesPublished: stats.articles_published,
        backlinksIndustry: stats.backlinks_industry,
        backlinksLocal: stats.backlinks_local,
      });
      if (result.made) summary.made++;
      else summary.skipped++;
    }
    if (sites.length < pageSize) return summary;
    after = sites[sites.length - 1]?.id ?? after;
  }
}
