/*
 * What a period's report compares its totals with. A month that has not ended (this month, up to
 * today) is compared with as many days at the start of the month before (the 1st to the 26th of
 * November with the 1st to the 26th of October), at most the whole of that month (the 1st to the 31st
 * of March with the 28 or 29 days of February); a month that has ended with the whole month before;
 * any other period (a rolling window) with as many days just before it. Pure: today comes in.
 */

/** Inclusive UTC dates `YYYY-MM-DD`, and the buckets that answer them: days, or a whole month. */
export type DateSpan = { from: string; to: string; grain: 'day' | 'month' };

export type Comparison = {
  /** True when the period has not ended: `now` stops at today. */
  partial: boolean;
  /** The part of the period compared: up to today when partial, else all of it. */
  now: DateSpan;
  /** What it is compared with. */
  before: DateSpan;
};

const DAY_MS = 86_400_000;
const iso = (t: number): string => new Date(t).toISOString().slice(0, 10);
const time = (date: string): number => Date.parse(`${date}T00:00:00Z`);
const daysIn = (span: Pick<DateSpan, 'from' | 'to'>): number =>
  (time(span.to) - time(span.from)) / DAY_MS + 1;

/** The comparison of `period` on `today` (`YYYY-MM-DD`, UTC). */
export function comparisonOf(period: DateSpan, today: string): Comparison {
  const from = time(period.from);
  if (period.grain === 'day') {
    const length = daysIn(period);
    return {
      partial: false,
      now: period,
      before: { from: iso(from - length * DAY_MS), to: iso(from - DAY_MS), grain: 'day' },
    };
  }
  const start = new Date(from);
  const monthBefore = Date.UTC(start.getUTCFullYear(), start.getUTCMonth() - 1, 1);
  const lastOfMonthBefore = from - DAY_MS;
  const partial = today >= period.from && today <= period.to;
  if (!partial) {
    return {
      partial,
      now: period,
      before: { from: iso(monthBefore), to: iso(lastOfMonthBefore), grain: 'month' },
    };
  }
  const elapsed = daysIn({ from: period.from, to: today });
  return {
    partial,
    now: { from: period.from, to: today, grain: 'day' },
    before: {
      from: iso(monthBefore),
      to: iso(Math.min(monthBefore + (elapsed - 1) * DAY_MS, lastOfMonthBefore)),
      grain: 'day',
    },
  };
}
