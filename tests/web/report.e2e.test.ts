import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';
import { anotherAccountsSite, recentMonths, stats, waitForReadModels } from './site-helpers.ts';

/*
 * The period report in headless Chromium with JavaScript off: its charts (SVG with a title, a
 * description and axis labels), the totals against the period before as the API states them, the CSV
 * against the API's stats for the same period, the print layout, refused periods and other accounts.
 */

const BACKLINKS = 60;

/** One bar per series and day with a count, each titled with its day and count; some if `backlinks` > 0. */
async function expectBars(page: Page, backlinks: number): Promise<void> {
  const bars = await page.$$eval('#chart-backlinks rect title', (ts) => ts.map((t) => t.textContent));
  expect(bars.length > 0).toBe(backlinks > 0);
  expect(
    bars.every((t) =>
      /^\d{1,2} [A-Z][a-z]{2} \d{4}: (1 (industry|local) backlink|([02-9]|\d\d+) (industry|local) backlinks)$/.test(
        t ?? '',
      ),
    ),
  ).toBe(true);
}

/** The CSV's rows as numbers, after checking its header. */
function parseCsv(text: string): { date: string; a: number; i: number; l: number }[] {
  const lines = text.split('\r\n');
  expect(lines.at(-1)).toBe('');
  expect(lines[0]).toBe('date,articles_published,backlinks_industry,backlinks_local');
  return lines.slice(1, -1).map((line) => {
    const [date, a, i, l] = line.split(',');
    return { date: date as string, a: Number(a), i: Number(i), l: Number(l) };
  });
}

describe('the period report', () => {
  let web: WebApp;
  let context: BrowserContext;
  let site: { id: string; domain: string };
  const lastMonth = recentMonths()[1] as string;
  const monthBefore = recentMonths()[2] as string;

  beforeAll(async () => {
    web = await startWebApp({ articles: 40, backlinks: BACKLINKS });
    await waitForReadModels(web, BACKLINKS);
    context = await web.signedIn();
    site = web.demo.sites[0] as { id: string; domain: string };
  });
  afterAll(async () => {
    await web?.stop();
  });

  async function open(path: string, on: BrowserContext = context): Promise<{ page: Page; status: number }> {
    const page = await on.newPage();
    const response = await page.goto(`${web.url}${path}`);
    return { page, status: response?.status() ?? 0 };
  }

  /** The totals table: [this period, period before, change] per measure. */
  const totals = (page: Page): Promise<Record<string, string[]>> =>
    page.$$eval('#totals tbody tr', (rows) =>
      Object.fromEntries(
        rows.map((r) => [
          r.querySelector('th')?.textContent ?? '',
          [...r.querySelectorAll('td')].map((td) => td.textContent ?? ''),
        ]),
      ),
    );

  it('opens from the site page on this month, with both charts drawn in SVG with their labels', async () => {
    const { page } = await open(`/sites/${site.id}`);
    await Promise.all([page.waitForNavigation(), page.click("text=This month's report")]);
    expect(new URL(page.url()).pathname).toBe(`/sites/${site.id}/report`);
    expect(await page.textContent('h1')).toBe('Northside Plumbing: This month');
    const month = await stats(web, site.id, 'this_month');
    for (const id of ['chart-articles', 'chart-backlinks']) {
      const chart = await page.$eval(`svg#${id}`, (svg) => ({
        role: svg.getAttribute('role'),
        labelledBy: svg.getAttribute('aria-labelledby'),
        title: svg.querySelector('title')?.textContent,
        desc: svg.querySelector('desc')?.textContent,
        texts: [...svg.querySelectorAll(':scope > text')].map((t) => t.textContent),
      }));
      expect(chart.role).toBe('img');
      expect(chart.labelledBy).toBe(`${id}-title ${id}-desc`);
      expect(chart.texts).toContain('Day (UTC)');
      expect(chart.texts).toContain('0');
      expect(chart.texts).toContain(
        new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short', timeZone: 'UTC' }).format(
          new Date(`${month.period.from}T00:00:00Z`),
        ),
      );
      expect(chart.desc).toMatch(/^From 1 [A-Z][a-z]{2} \d{4} to \d{2} [A-Z][a-z]{2} \d{4}[:.] /);
    }
    const counted = (n: number, one: string, other: string): string => `${n} ${n === 1 ? one : other}`;
    const articlesDesc = await page.$eval('#chart-articles desc', (d) => d.textContent);
    expect(articlesDesc).toContain(
      month.articles.published === 0
        ? '. No article was published in this period.'
        : `: ${counted(month.articles.published, 'article', 'articles')};`,
    );
    const { industry, local } = month.backlinks;
    expect(await page.$eval('#chart-backlinks desc', (d) => d.textContent)).toContain(
      industry + local === 0
        ? '. No backlink was acquired in this period.'
        : `: ${counted(industry, 'industry backlink', 'industry backlinks')} and ${counted(local, 'local backlink', 'local backlinks')};`,
    );
    // None in the first hours of a month, before its first backlink (last month's page has them).
    await expectBars(page, industry + local);
    await expectLabelled(page);
  });

  it('states the totals of a month against the month before, as the API does', async () => {
    const { page } = await open(`/sites/${site.id}/report?period=${lastMonth}`);
    const [now, before] = [await stats(web, site.id, lastMonth), await stats(web, site.id, monthBefore)];
    expect(now.backlinks.total + before.backlinks.total).toBeGreaterThan(0);
    const table = await totals(page);
    expect(table['Articles published']?.slice(0, 2)).toEqual([
      String(now.articles.published),
      String(before.articles.published),
    ]);
    expect(table['Backlinks acquired']?.slice(0, 2)).toEqual([
      String(now.backlinks.total),
      String(before.backlinks.total),
    ]);
    expect(table['Industry backlinks']?.slice(0, 2)).toEqual([
      String(now.backlinks.industry),
      String(before.backlinks.industry),
    ]);
    expect(table['Local backlinks']?.slice(0, 2)).toEqual([
      String(now.backlinks.local),
      String(before.backlinks.local),
    ]);
    await expectBars(page, now.backlinks.total);
    const delta = now.backlinks.total - before.backlinks.total;
    expect(table['Backlinks acquired']?.[2]).toMatch(
      delta === 0 ? /^No change$/ : new RegExp(`^${delta > 0 ? '\\+' : '−'}${Math.abs(delta)} \\(`),
    );
    // The period's articles and backlinks are listed.
    const listed = await page.$$eval('#report-backlinks tbody tr', (rows) => rows.length);
    expect(listed).toBe(now.backlinks.total);
    expect(await page.$$eval('#report-articles tbody tr', (rows) => rows.length).catch(() => 0)).toBe(
      now.articles.published,
    );
    await screenshot(page, 'report');
  });

  it('changes the period with the form, from the keyboard', async () => {
    const { page } = await open(`/sites/${site.id}/report`);
    await page.selectOption('#period', 'last_30_days');
    await page.focus('#period-form button');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(new URL(page.url()).searchParams.get('period')).toBe('last_30_days');
    expect(await page.textContent('h1')).toBe('Northside Plumbing: Last 30 days');
    const s = await stats(web, site.id, 'last_30_days');
    expect((await totals(page))['Backlinks acquired']?.[0]).toBe(String(s.backlinks.total));
    expect(await page.getAttribute('#csv', 'href')).toBe(`/sites/${site.id}/report.csv?period=last_30_days`);
  });

  it("downloads a CSV of one row per day whose totals are the API's stats for the same period", async () => {
    for (const period of ['this_month', 'last_month', 'last_30_days', monthBefore]) {
      for (const demo of web.demo.sites) {
        const res = await context.request.get(`${web.url}/sites/${demo.id}/report.csv?period=${period}`);
        expect(res.status()).toBe(200);
        expect(res.headers()['content-type']).toBe('text/csv; charset=utf-8');
        const api = await stats(web, demo.id, period);
        expect(res.headers()['content-disposition']).toBe(
          `attachment; filename="${demo.domain}-${api.period.from}-${api.period.to}.csv"`,
        );
        const rows = parseCsv(await res.text());
        const days = (Date.parse(api.period.to) - Date.parse(api.period.from)) / 86_400_000 + 1;
        expect(rows).toHaveLength(days);
        expect(rows[0]?.date).toBe(api.period.from);
        expect(rows.at(-1)?.date).toBe(api.period.to);
        const sum = (pick: (r: (typeof rows)[number]) => number): number =>
          rows.reduce((n, r) => n + pick(r), 0);
        expect({
          articles: sum((r) => r.a),
          industry: sum((r) => r.i),
          local: sum((r) => r.l),
        }).toEqual({
          articles: api.articles.published,
          industry: api.backlinks.industry,
          local: api.backlinks.local,
        });
      }
    }
    // The seed's 60 backlinks a site over 180 days put some in the last 30.
    const recent = await stats(web, site.id, 'last_30_days');
    expect(recent.backlinks.total).toBeGreaterThan(0);
  });

  it('prints without the navigation and the form, the charts within the page', async () => {
    const { page } = await open(`/sites/${site.id}/report?period=last_30_days`);
    await page.emulateMedia({ media: 'print' });
    expect(await page.isVisible('header.top')).toBe(false);
    expect(await page.isVisible('#period-form')).toBe(false);
    expect(await page.isVisible('#chart-backlinks')).toBe(true);
    const width = await page.$eval('#chart-backlinks', (svg) => svg.getBoundingClientRect().width);
    const main = await page.$eval('main', (m) => m.getBoundingClientRect().width);
    expect(width).toBeLessThanOrEqual(main);
    await screenshot(page, 'report-print');
    const pdf = await page.pdf({ format: 'A4' });
    expect(pdf.subarray(0, 5).toString()).toBe('%PDF-');
  });

  it('compares this month so far with as many days at the start of the month before, and says so', async () => {
    const { page } = await open(`/sites/${site.id}/report`);
    const today = new Date().toISOString().slice(0, 10);
    const dayOfMonth = Number(today.slice(8));
    const month = await stats(web, site.id, 'this_month');
    const before = await stats(web, site.id, 'last_month');
    const beforeDays = Math.min(dayOfMonth, Number(before.period.to.slice(8)));
    const long = new Intl.DateTimeFormat('en-GB', { month: 'long', year: 'numeric', timeZone: 'UTC' });
    const name = (date: string): string => long.format(new Date(`${date}T00:00:00Z`));
    const span = (last: number, monthOf: string): string =>
      last === 1 ? `1 ${name(monthOf)}` : `1–${last} ${name(monthOf)}`;
    expect(await page.textContent('#comparison')).toBe(
      `Up to today, ${span(dayOfMonth, month.period.from)}, compared with ${span(beforeDays, before.period.from)}, the same days of the month before.`,
    );
    // The totals: this month's days up to today, and the same days of last month, from the CSVs.
    const csv = async (period: string) =>
      parseCsv(
        await (await context.request.get(`${web.url}/sites/${site.id}/report.csv?period=${period}`)).text(),
      );
    const upTo = (rows: Awaited<ReturnType<typeof csv>>, last: number) =>
      rows.filter((r) => Number(r.date.slice(8)) <= last).reduce((n, r) => n + r.i + r.l, 0);
    const table = await totals(page);
    expect(table['Backlinks acquired']?.slice(0, 2)).toEqual([
      String(upTo(await csv('this_month'), dayOfMonth)),
      String(upTo(await csv('last_month'), beforeDays)),
    ]);
    // A month that has ended is compared with the whole month before.
    const ended = await open(`/sites/${site.id}/report?period=${lastMonth}`);
    expect(await ended.page.textContent('#comparison')).toBe(
      `${name(before.period.from)} compared with ${name(`${monthBefore}-01`)}.`,
    );
  });

  it('says so when a period has nothing in it', async () => {
    const { page } = await open(`/sites/${site.id}/report?period=2001-02`);
    expect(await page.textContent('#chart-articles .chart-empty')).toBe(
      'No article was published in this period.',
    );
    expect(await page.textContent('#chart-backlinks .chart-empty')).toBe(
      'No backlink was acquired in this period.',
    );
    expect(await page.$$('.report-figure rect')).toHaveLength(0);
    expect(await page.textContent('#comparison')).toBe('February 2001 compared with January 2001.');
  });

  for (const width of [1280, 390]) {
    it(`fits a ${width} px screen: the whole month in each chart, its labels 11 px or more`, async () => {
      const on = await web.signedIn({ width });
      const { page } = await open(`/sites/${site.id}/report?period=${lastMonth}`, on);
      expect(await page.$eval('html', (el) => el.scrollWidth)).toBeLessThanOrEqual(width);
      for (const id of ['chart-articles', 'chart-backlinks']) {
        const chart = await page.$eval(`#${id}`, (svg) => {
          const box = svg.getBoundingClientRect();
          const figure = svg.closest('figure')?.getBoundingClientRect();
          const scale = box.width / 640;
          const sizes = [...svg.querySelectorAll('text.chart-tick')].map(
            (t) =>
              Number.parseFloat(t.ownerDocument.defaultView?.getComputedStyle(t).fontSize ?? '0') * scale,
          );
          const lastDay = [...svg.querySelectorAll('text.chart-day')].at(-1)?.getBoundingClientRect();
          return {
            right: box.right,
            figureRight: figure?.right ?? 0,
            smallest: Math.min(...sizes),
            lastDayRight: lastDay?.right ?? Number.POSITIVE_INFINITY,
          };
        });
        expect(chart.right).toBeLessThanOrEqual(chart.figureRight + 0.5);
        expect(chart.lastDayRight).toBeLessThanOrEqual(chart.right + 0.5);
        expect(chart.smallest, `${id} at ${width} px`).toBeGreaterThanOrEqual(11);
      }
      await screenshot(page, `report-${width}`);
    });
  }

  it('shows the form again with the error for an unknown period, never a server error', async () => {
    for (const period of ['next_year', '2026-13', '1969-12']) {
      const { page, status } = await open(`/sites/${site.id}/report?period=${period}`);
      expect(status).toBe(400);
      expect(await page.textContent('#period-error')).toContain(`You asked for “${period}”`);
      expect(await page.$('#period')).not.toBeNull();
      if (period === 'next_year') await screenshot(page, 'report-bad-period');
    }
    const twice = await open(`/sites/${site.id}/report?period=this_month&period=last_month`);
    expect(twice.status).toBe(400);
    const csv = await context.request.get(`${web.url}/sites/${site.id}/report.csv?period=next_year`);
    expect(csv.status()).toBe(400);
  });

  it("answers another account's site with the not-found page, the CSV too", async () => {
    const theirs = await anotherAccountsSite(web);
    for (const path of [`/sites/${theirs}/report`, `/sites/${theirs}/report?period=bogus`]) {
      const { page, status } = await open(path);
      expect(status).toBe(404);
      expect(await page.textContent('h1')).toBe('Not found');
    }
    const csv = await context.request.get(`${web.url}/sites/${theirs}/report.csv`);
    expect(csv.status()).toBe(404);
    expect(await csv.text()).not.toContain('date,articles_published');
    const signedOut = await fetch(`${web.url}/sites/${site.id}/report.csv`, { redirect: 'manual' });
    expect(signedOut.status).toBe(303);
  });
});
