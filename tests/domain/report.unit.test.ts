import { describe, it } from 'vitest';
import {
  decideReport,
  evolveReport,
  initialReportState,
  type ReportCommand,
  type ReportState,
} from '../../domain/report/decider.ts';
import type { MonthlyReportReady, ReportEvent } from '../../domain/report/events.ts';
import { specFor } from '../support/decider.ts';
import { metadata } from '../support/events.ts';

const spec = specFor<ReportState, ReportEvent, ReportCommand>({
  initialState: initialReportState,
  evolve: evolveReport,
  decide: decideReport,
});
const data: MonthlyReportReady['data'] = {
  siteId: 'site_1',
  accountId: 'acc_1',
  period: '2026-11',
  from: '2026-11-01',
  to: '2026-11-30',
  articlesPublished: 2,
  backlinksIndustry: 2,
  backlinksLocal: 1,
};
const ready: MonthlyReportReady = { type: 'MonthlyReportReady', data, metadata };
const make: ReportCommand = { type: 'MakeMonthlyReport', data, metadata };

describe('report decider', () => {
  it('makes a month report once: asked again, it gives no event (no error: the job runs again safely)', () => {
    spec.given([]).when(make).thenEvents([ready]);
    spec.given([ready]).when(make).thenEvents([]);
  });
});
