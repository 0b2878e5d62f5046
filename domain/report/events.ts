import { z } from 'zod';
import { type Event, eventSchema } from '../event.ts';

const calendarDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/);
const count = z.number().int().min(0);

/**
 * A site's report for a calendar month was computed (the monthly report job, on the first day of the
 * next month, UTC). Its stream is the site's month (`reportStream`) and holds this one event, so the
 * report of a month is made once however many processes run the job.
 */
export const MonthlyReportReadyData = z.object({
  siteId: z.string().min(1),
  accountId: z.string().min(1),
  /** `YYYY-MM`. */
  period: z.string().regex(/^\d{4}-(0[1-9]|1[0-2])$/),
  from: calendarDate,
  to: calendarDate,
  articlesPublished: count,
  backlinksIndustry: count,
  backlinksLocal: count,
});

export const ReportEventSchemas = {
  MonthlyReportReady: eventSchema('MonthlyReportReady', MonthlyReportReadyData),
} as const;
export type MonthlyReportReady = Event<'MonthlyReportReady', z.infer<typeof MonthlyReportReadyData>>;
export type ReportEvent = MonthlyReportReady;

/** The stream of a site's report for one month (`YYYY-MM`). */
export const reportStream = (siteId: string, period: string): string => `report-${siteId}-${period}`;
