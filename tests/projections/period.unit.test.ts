import { describe, expect, it } from 'vitest';
import { periodDays, resolvePeriod } from '../../projections/site-stats.ts';

const today = new Date('2026-03-15T23:30:00Z');

describe('stats periods (UTC, inclusive dates)', () => {
  it('this_month and last_month are whole calendar months', () => {
    expect(resolvePeriod('this_month', today)).toEqual({
      key: 'this_month',
      from: '2026-03-01',
      to: '2026-03-31',
      grain: 'month',
    });
    expect(resolvePeriod('last_month', today)).toEqual({
      key: 'last_month',
      from: '2026-02-01',
      to: '2026-02-28',
      grain: 'month',
    });
    expect(resolvePeriod('last_month', new Date('2026-01-10T00:00:00Z'))).toMatchObject({
      from: '2025-12-01',
      to: '2025-12-31',
    });
  });

  it('last_30_days is today and the 29 days before', () => {
    expect(resolvePeriod('last_30_days', today)).toEqual({
      key: 'last_30_days',
      from: '2026-02-14',
      to: '2026-03-15',
      grain: 'day',
    });
  });

  it('YYYY-MM is that month, leap years included', () => {
    expect(resolvePeriod('2024-02', today)).toEqual({
      key: '2024-02',
      from: '2024-02-01',
      to: '2024-02-29',
      grain: 'month',
    });
  });

  it.each(['2026-13', '2026-00', '26-01', 'yesterday', '2026-1', ''])('refuses %j', (key) => {
    expect(() => resolvePeriod(key, today)).toThrow(RangeError);
  });
});

describe('the days of a period', () => {
  it('lists every day, inclusive, across a leap day', () => {
    expect(periodDays({ from: '2024-02-27', to: '2024-03-02' })).toEqual([
      '2024-02-27',
      '2024-02-28',
      '2024-02-29',
      '2024-03-01',
      '2024-03-02',
    ]);
    expect(periodDays(resolvePeriod('2026-03', today))).toHaveLength(31);
  });
});
