import { decideReport, evolveReport, initialReportState } from '../../../domain/report/decider.ts';
import { type MonthlyReportReady, reportStream } from '../../../domain/report/events.ts';
import type { CommandContext } from './handler.ts';

const reportFold = { initial: initialReportState, evolve: evolveReport };

export function reportCommands({ run, meta }: CommandContext) {
  return {
    /**
     * Records a site's report of a month in its own stream (`reportStream`), once: when the report
     * exists already (made by an earlier run, or by another process just now) nothing is appended and
     * `made` is false.
     */
    async makeMonthlyReport(data: MonthlyReportReady['data']): Promise<{ made: boolean }> {
      const result = await run(reportStream(data.siteId, data.period), reportFold, (state) =>
        decideReport({ type: 'MakeMonthlyReport', data, metadata: meta() }, state),
      );
      return { made: result.events.length > 0 };
    },
  };
}
