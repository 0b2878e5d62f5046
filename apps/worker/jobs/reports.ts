import { type JobKind, jobIdOf } from '../../../infra/jobs/queue.ts';
import {
  MONTHLY_REPORTS,
  MONTHLY_REPORTS_CRON,
  type MonthlyReportsData,
  makeMonthlyReports,
  reportPeriodOf,
} from '../../application/reports.ts';
import type { JobDeps, JobModule } from './module.ts';

/**
 * Monthly reports as a background area: the job that makes a month's reports (every site's
 * `MonthlyReportReady`), on the first of every month at midnight UTC, and at start for the month just
 * ended, in case the queue was down when it was due (sites reported already are skipped).
 * apps/application/reports.ts holds the rules; the CLI calls `makeMonthlyReports` by hand.
 */
export function reportJobs(deps: JobDeps): JobModule {
  const monthly: JobKind<MonthlyReportsData> = {
    name: MONTHLY_REPORTS,
    queue: 'maintenance',
    async run(data) {
      const summary = await makeMonthlyReports(deps, data?.period);
      deps.logger.info({ job: MONTHLY_REPORTS, ...summary }, 'monthly reports made');
      return summary;
    },
  };
  return {
    kinds: [monthly],
    repeats: [{ id: MONTHLY_REPORTS, name: MONTHLY_REPORTS, repeat: { cron: MONTHLY_REPORTS_CRON } }],
    async sweep() {
      const { month } = reportPeriodOf(undefined, deps.now());
      await deps.jobs.add(MONTHLY_REPORTS, { period: month }, { jobId: jobIdOf('report', month) });
    },
  };
}
