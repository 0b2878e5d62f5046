import { describe, expect, it } from 'vitest';
import { comparisonOf, type DateSpan } from '../../domain/report/comparison.ts';

const month = (from: string, to: string): DateSpan => ({ from, to, grain: 'month' });
const days = (from: string, to: string): DateSpan => ({ from, to, grain: 'day' });

describe('what a report compares', () => {
  it('compares this month up to today with as many days at the start of the month before', () => {
    expect(comparisonOf(month('2026-11-01', '2026-11-30'), '2026-11-26')).toEqual({
      partial: true,
      now: days('2026-11-01', '2026-11-26'),
      before: days('2026-10-01', '2026-10-26'),
    });
  });

  it('on the first day of a month, compares one day with the first day of the month before', () => {
    expect(comparisonOf(month('2026-11-01', '2026-11-30'), '2026-11-01')).toEqual({
      partial: true,
      now: days('2026-11-01', '2026-11-01'),
      before: days('2026-10-01', '2026-10-01'),
    });
    expect(comparisonOf(month('2027-01-01', '2027-01-31'), '2027-01-01')).toMatchObject({
      before: days('2026-12-01', '2026-12-01'),
    });
  });

  it('on the 31st, stops at the end of a shorter month before', () => {
    expect(comparisonOf(month('2026-12-01', '2026-12-31'), '2026-12-31')).toEqual({
      partial: true,
      now: days('2026-12-01', '2026-12-31'),
      before: days('2026-11-01', '2026-11-30'),
    });
    expect(comparisonOf(month('2026-03-01', '2026-03-31'), '2026-03-31').before).toEqual(
      days('2026-02-01', '2026-02-28'),
    );
    expect(comparisonOf(month('2026-03-01', '2026-03-31'), '2026-03-29').before).toEqual(
      days('2026-02-01', '2026-02-28'),
    );
  });

  it('counts the leap day of a leap year', () => {
    expect(comparisonOf(month('2028-03-01', '2028-03-31'), '2028-03-30').before).toEqual(
      days('2028-02-01', '2028-02-29'),
    );
    expect(comparisonOf(month('2028-03-01', '2028-03-31'), '2028-03-29').before).toEqual(
      days('2028-02-01', '2028-02-29'),
    );
    expect(comparisonOf(month('2028-02-01', '2028-02-29'), '2028-02-29')).toEqual({
      partial: true,
      now: days('2028-02-01', '2028-02-29'),
      before: days('2028-01-01', '2028-01-29'),
    });
  });

  it('compares a month that has ended (or not begun) with the whole month before', () => {
    expect(comparisonOf(month('2026-10-01', '2026-10-31'), '2026-11-26')).toEqual({
      partial: false,
      now: month('2026-10-01', '2026-10-31'),
      before: month('2026-09-01', '2026-09-30'),
    });
    expect(comparisonOf(month('2024-03-01', '2024-03-31'), '2026-11-26').before).toEqual(
      month('2024-02-01', '2024-02-29'),
    );
    expect(comparisonOf(month('2027-01-01', '2027-01-31'), '2026-11-26')).toMatchObject({
      partial: false,
      before: month('2026-12-01', '2026-12-31'),
    });
  });

  it('compares a rolling window with as many days just before it', () => {
    expect(comparisonOf(days('2026-10-28', '2026-11-26'), '2026-11-26')).toEqual({
      partial: false,
      now: days('2026-10-28', '2026-11-26'),
      before: days('2026-09-28', '2026-10-27'),
    });
    expect(comparisonOf(days('2024-02-15', '2024-03-15'), '2024-03-15').before).toEqual(
      days('2024-01-16', '2024-02-14'),
    );
  });
});
