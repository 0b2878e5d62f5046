import type { Command } from '../event.ts';
import type { MonthlyReportReady, ReportEvent } from './events.ts';

/** A site's report of one month as its stream leaves it: made or not. */
export type ReportState = { readonly made: false } | { readonly made: true; readonly period: string };

export const initialReportState: ReportState = { made: false };

export function evolveReport(_state: ReportState, event: ReportEvent): ReportState {
  switch (event.type) {
    case 'MonthlyReportReady':
      return { made: true, period: event.data.period };
    default: {
      const unknown: never = event.type;
      throw new Error(`unknown report event ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * Records a site's report of a month (the job has computed its figures). A month's report is made once:
 * when its stream holds the report already, the command gives no event, so that the job may run again,
 * or in several processes at once, and leave exactly one report per site and month.
 */
export type MakeMonthlyReport = Command<'MakeMonthlyReport', MonthlyReportReady['data']>;
export type ReportCommand = MakeMonthlyReport;

export function decideReport(command: ReportCommand, state: ReportState): ReportEvent[] {
  switch (command.type) {
    case 'MakeMonthlyReport':
      if (state.made) return [];
      return [{ type: 'MonthlyReportReady', data: command.data, metadata: command.metadata }];
    default: {
      const unknown: never = command.type;
      throw new Error(`unknown report command ${JSON.stringify(unknown)}`);
    }
  }
}
