import { DomainError } from '../../domain/errors.ts';
import { type MonthlyReportReady, reportStream } from '../../domain/report/events.ts';
import { firstEventOfType } from '../../infra/event-store.ts';
import { type Call, type Outcome, outcomeOf } from './call.ts';
import { rfc3339 } from './contract.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';

/*
 * A site's monthly report as it was made: the `MonthlyReportReady` event the monthly report job
 * appended to the site's report stream of that month (`reportStream`) on the first day of the next
 * month (apps/application/reports.ts). No read model holds it: a report is one event in a stream of
 * its own, so it is read from the event store by its stream, as the job itself checks for it. The
 * figures are those the report had when it was made; the statistics of the same month may have moved
 * since (a backlink recorded late, a status changed), and the report page shows both.
 */

/** A monthly report as it was made. */
export type MonthlyReportOut = {
  /** `YYYY-MM`. */
  period: string;
  /** The month's first and last day (UTC calendar dates). */
  from: string;
  to: string;
  /** When the report was made (RFC 3339): the event's time. */
  made_at: string;
  articles_published: number;
  backlinks: { total: number; industry: number; local: number };
};

const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;

export type Reported = ReturnType<typeof createReported>;

export function createReported(deps: Pick<ApplicationDeps, 'db' | 'reads'>) {
  const reads = readsOf(deps);
  return {
    /**
     * The site's report of `period` (`YYYY-MM`) as it was made, or null when none was made (the month
     * has not ended, the site was added after it, or the job has not run yet). A report of another
     * account's site is none of the caller's: null as well (the pages ask for the site first, which
     * is the 404 there).
     */
    monthly(call: Call, siteId: string, period: string): Promise<Outcome<MonthlyReportOut | null>> {
      return outcomeOf({ siteId }, async () => {
        if (!MONTH.test(period)) {
          throw new DomainError(
            'invalid_request',
            `The report period must be a month YYYY-MM, not ${period}`,
            [{ field: 'period', message: 'must be a month YYYY-MM' }],
          );
        }
        const { accountId } = call.principal;
        const report = await reads.read(accountId, (on) =>
          firstEventOfType<MonthlyReportReady>(on, reportStream(siteId, period), 'MonthlyReportReady'),
        );
        if (!report) return null;
        const { data, metadata } = report;
        if (data.accountId !== accountId || data.siteId !== siteId) return null;
        return {
          period: data.period,
          from: data.from,
          to: data.to,
          made_at: rfc3339(new Date(metadata.at)),
          articles_published: data.articlesPublished,
          backlinks: {
            total: data.backlinksIndustry + data.backlinksLocal,
            industry: data.backlinksIndustry,
            local: data.backlinksLocal,
          },
        };
      });
    },
  };
}
