import { describe, expect, it } from 'vitest';
import { htmlText } from '../../apps/server/http/html.ts';
import { barChart, count, describeChart, labelledDays, yScale } from '../../apps/server/web/chart.ts';
import { change, periodChoices, periodLabel, reportCsv, spanText } from '../../apps/server/web/report.ts';
import { hrefOf, httpHref, readSiteQuery } from '../../apps/server/web/sites.ts';

describe('the report helpers', () => {
  it('scales the y axis to whole steps of 1, 2 or 5 times a power of ten, at most 5 of them', () => {
    expect(yScale(0)).toEqual({ top: 1, step: 1 });
    expect(yScale(3)).toEqual({ top: 3, step: 1 });
    expect(yScale(7)).toEqual({ top: 8, step: 2 });
    expect(yScale(23)).toEqual({ top: 25, step: 5 });
    expect(yScale(101)).toEqual({ top: 150, step: 50 });
  });

  it('labels every day of a week, and every 7th day of a month', () => {
    expect(labelledDays(3)).toEqual([0, 1, 2]);
    expect(labelledDays(31)).toEqual([0, 7, 14, 21, 28]);
  });

  it('describes a chart by its totals and its busiest day', () => {
    const chart = {
      id: 'c',
      title: 'Backlinks',
      yLabel: 'Backlinks',
      nothing: 'No backlink was acquired in this period.',
      days: ['2026-11-01', '2026-11-02'],
      series: [
        { label: ['industry backlink', 'industry backlinks'], className: 'a', values: [1, 0] },
        { label: ['local backlink', 'local backlinks'], className: 'b', values: [1, 3] },
      ],
    } as const;
    expect(describeChart(chart)).toBe(
      'From 1 Nov 2026 to 2 Nov 2026: 1 industry backlink and 4 local backlinks; the most on 2 Nov 2026 (3).',
    );
    const svg = htmlText(barChart(chart));
    expect(svg).toContain('<title id="c-title">Backlinks</title>');
    expect(svg).toContain('aria-labelledby="c-title c-desc"');
    // Three bars (no bar for a zero), stacked: the local bar of the 1st sits on its industry bar.
    expect(svg.match(/<rect /g)).toHaveLength(3);
    expect(svg).toContain('<title>2 Nov 2026: 3 local backlinks</title>');
    expect(svg).toContain('<title>1 Nov 2026: 1 local backlink</title>');
    expect(svg).not.toContain('chart-empty');
    expect(svg).not.toContain('style=');
    expect(htmlText(barChart({ ...chart, title: '<script>' }))).toContain('&lt;script&gt;');
  });

  it('says so when a chart has nothing in it', () => {
    const chart = {
      id: 'e',
      title: 'Articles published per day',
      yLabel: 'Articles',
      nothing: 'No article was published in this period.',
      days: ['2026-11-01', '2026-11-02'],
      series: [{ label: ['article', 'articles'], className: 'a', values: [0, 0] }],
    } as const;
    expect(describeChart(chart)).toBe(
      'From 1 Nov 2026 to 2 Nov 2026. No article was published in this period.',
    );
    const svg = htmlText(barChart(chart));
    expect(svg).toContain('class="chart-empty"');
    expect(svg).toContain('>No article was published in this period.</text>');
    expect(svg).not.toContain('<rect ');
  });

  it('counts in the singular for one', () => {
    expect(count(1, ['article', 'articles'])).toBe('1 article');
    expect(count(0, ['article', 'articles'])).toBe('0 articles');
    expect(count(2, ['backlink', 'backlinks'])).toBe('2 backlinks');
  });

  it('writes one CSV row per day under its header, with CRLF', () => {
    expect(
      reportCsv([
        { date: '2026-11-01', articles_published: 2, backlinks_industry: 0, backlinks_local: 1 },
        { date: '2026-11-02', articles_published: 0, backlinks_industry: 3, backlinks_local: 0 },
      ]),
    ).toBe(
      'date,articles_published,backlinks_industry,backlinks_local\r\n2026-11-01,2,0,1\r\n2026-11-02,0,3,0\r\n',
    );
  });

  it('states a change against the period before', () => {
    expect(change(6, 4)).toBe('+2 (+50%)');
    expect(change(1, 4)).toBe('−3 (−75%)');
    expect(change(3, 3)).toBe('No change');
    expect(change(2, 0)).toBe('+2 (none before)');
  });

  it('puts the dates compared in words', () => {
    expect(spanText('2026-10-01', '2026-10-26')).toBe('1–26 October 2026');
    expect(spanText('2026-10-01', '2026-10-31')).toBe('October 2026');
    expect(spanText('2026-10-01', '2026-10-31', { days: true })).toBe('1–31 October 2026');
    expect(spanText('2026-10-01', '2026-10-26', { days: true })).toBe('1–26 October 2026');
    expect(spanText('2024-02-01', '2024-02-29')).toBe('February 2024');
    expect(spanText('2026-10-01', '2026-10-01')).toBe('1 October 2026');
    expect(spanText('2026-10-28', '2026-11-26')).toBe('28 October – 26 November 2026');
    expect(spanText('2026-12-28', '2027-01-26')).toBe('28 December 2026 – 26 January 2027');
  });

  it('names periods, and offers the named ones and the 12 months before this one', () => {
    expect(periodLabel('last_30_days')).toBe('Last 30 days');
    expect(periodLabel('2026-02')).toBe('February 2026');
    expect(periodLabel('2026-13')).toBe('2026-13');
    const choices = periodChoices(new Date('2026-01-15T00:00:00Z'));
    expect(choices.slice(0, 5)).toEqual(['this_month', 'last_month', 'last_30_days', '2025-12', '2025-11']);
    expect(choices.at(-1)).toBe('2025-01');
  });
});

describe('the site page helpers', () => {
  it('reads the filters, empty fields as none, and names refused ones by their labels', () => {
    expect(readSiteQuery({ from: '', status: 'draft', page: '2' })).toMatchObject({
      query: { status: 'draft', page: 2, backlinks_page: 1 },
      errors: [],
    });
    expect(readSiteQuery({ to: '2026-01-01', from: '2026-02-01' }).errors).toEqual([
      'Published from: must not be after the end date',
    ]);
    expect(readSiteQuery({ backlinks_page: '1.5', category: 'x' }).errors).toEqual([
      'Category: must be one of industry, local',
      'Page of backlinks: must be a whole number from 1',
    ]);
    expect(readSiteQuery({ status: ['a', 'b'] })).toMatchObject({
      query: null,
      errors: ['Status: must be given once'],
    });
  });

  it('builds addresses with the non-empty parameters, and links only http(s) addresses', () => {
    expect(hrefOf('/sites/s1', { from: '', status: 'draft', page: 2 })).toBe('/sites/s1?status=draft&page=2');
    expect(hrefOf('/sites', {})).toBe('/sites');
    expect(httpHref('https://a.example/x')).toBe('https://a.example/x');
    expect(httpHref('javascript:alert(1)')).toBeNull();
  });
});
