import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { isDomainError } from '../../../domain/errors.ts';
import { unwrap } from '../../application/call.ts';
import { SiteParams } from '../../application/contract.ts';
import type { Application } from '../../application/index.ts';
import type { MonthlyReportOut } from '../../application/reported.ts';
import type { ReportDayOut, ReportOut, StatsOut } from '../../application/sites.ts';
import { type Html, html, raw } from '../http/html.ts';
import { webCall } from './call.ts';
import { barChart, count, longDate } from './chart.ts';
import { csvText } from './csv.ts';
import { installPageHeaders, type WebKit } from './kit.ts';
import { sendRefusal } from './refusal.ts';
import type { WebSession } from './sessions.ts';
import { crumbs, day, hrefOf, linkTo } from './sites.ts';

/*
 * The period report of a site (`/sites/{id}/report?period=`): articles published and backlinks
 * acquired per day as SVG charts, the totals against the period before (a month not ended: its days so
 * far against as many days of the month before, and the page says which), the period's articles and
 * backlinks, printable; for a past month with its monthly report, "As reported on" with the report's
 * figures beside today's; and its CSV (`/sites/{id}/report.csv?period=`), one row per day.
 */

/** Rows of the period's article and backlink lists on the report; more are on the site page. */
const LIST_LIMIT = 100;

const monthName = new Intl.DateTimeFormat('en-GB', { month: 'long', year: 'numeric', timeZone: 'UTC' });
const dayMonth = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'long', timeZone: 'UTC' });

/**
 * Inclusive dates in words: `1–26 October 2026`, `October 2026` (a whole month; `1–31 October 2026`
 * with `days`, to stand beside another span of days), `1 October 2026` (one day), `28 October – 26
 * November 2026`, `28 December 2026 – 3 January 2027`. Pure.
 */
export function spanText(from: string, to: string, opts: { days?: boolean } = {}): string {
  const a = new Date(`${from}T00:00:00Z`);
  const b = new Date(`${to}T00:00:00Z`);
  const year = (d: Date): string => String(d.getUTCFullYear());
  const sameMonth = from.slice(0, 7) === to.slice(0, 7);
  const lastOfMonth = new Date(Date.UTC(b.getUTCFullYear(), b.getUTCMonth() + 1, 0)).getUTCDate();
  if (from === to) return `${dayMonth.format(a)} ${year(a)}`;
  if (sameMonth && !opts.days && a.getUTCDate() === 1 && b.getUTCDate() === lastOfMonth)
    return monthName.format(a);
  if (sameMonth) return `${a.getUTCDate()}–${dayMonth.format(b)} ${year(b)}`;
  if (from.slice(0, 4) === to.slice(0, 4)) return `${dayMonth.format(a)} – ${dayMonth.format(b)} ${year(b)}`;
  return `${dayMonth.format(a)} ${year(a)} – ${dayMonth.format(b)} ${year(b)}`;
}

/** `This month`, `Last 30 days`, `November 2026`. */
export function periodLabel(key: string): string {
  if (key === 'this_month') return 'This month';
  if (key === 'last_month') return 'Last month';
  if (key === 'last_30_days') return 'Last 30 days';
  const month = /^\d{4}-\d{2}$/.test(key) ? new Date(`${key}-01T00:00:00Z`) : null;
  return month && !Number.isNaN(month.getTime()) ? monthName.format(month) : key;
}

/** The periods offered: the named ones, then the 12 months before this one (YYYY-MM). */
export function periodChoices(today: Date): string[] {
  const months: string[] = [];
  for (let i = 1; i <= 12; i++) {
    months.push(
      new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - i, 1)).toISOString().slice(0, 7),
    );
  }
  return ['this_month', 'last_month', 'last_30_days', ...months];
}

/** The report's days as CSV (RFC 4180, CRLF): a header, then one row per day. */
export function reportCsv(days: readonly ReportDayOut[]): string {
  return csvText(
    ['date', 'articles_published', 'backlinks_industry', 'backlinks_local'],
    days.map((d) => [d.date, d.articles_published, d.backlinks_industry, d.backlinks_local]),
  );
}

/** `+3 (+50%)`, `−2 (−20%)`, `No change`, `+4 (none before)`. */
export function change(now: number, before: number): string {
  const delta = now - before;
  if (delta === 0) return 'No change';
  const sign = delta > 0 ? '+' : '−';
  const percent = before === 0 ? 'none before' : `${sign}${Math.round((Math.abs(delta) / before) * 100)}%`;
  return `${sign}${Math.abs(delta)} (${percent})`;
}

/** The query's period: the default, or null when it is given more than once. */
function periodParam(request: FastifyRequest): string | null {
  const value = (request.query as Record<string, unknown>).period;
  if (value === undefined || value === '') return 'this_month';
  return typeof value === 'string' ? value.trim() : null;
}

export const reportPages: FastifyPluginAsync<{ kit: WebKit; application: Application }> = async (
  app,
  { kit, application },
) => {
  installPageHeaders(app);

  function periodForm(siteId: string, key: string, valid: boolean): Html {
    const choices = periodChoices(kit.now());
    if (valid && !choices.includes(key)) choices.push(key);
    return html`<form method="get" action="/sites/${siteId}/report" class="site-filters report-controls" id="period-form">
<div><label for="period">Period</label><select id="period" name="period">${choices.map(
      (c) => html`<option value="${c}"${c === key ? raw(' selected') : ''}>${periodLabel(c)}</option>`,
    )}</select></div>
<div class="site-filter-actions"><button class="primary" type="submit">Show</button>
${valid ? html`<a id="csv" href="${hrefOf(`/sites/${siteId}/report.csv`, { period: key })}" download>Download CSV</a>` : ''}</div>
</form>`;
  }

  app.get<{ Params: { id: string } }>(
    '/sites/:id/report',
    { schema: { hide: true, params: SiteParams } },
    async (request, reply) => {
      const session = await kit.signedIn(request, reply);
      if (!session) return reply;
      const siteId = request.params.id;
      const call = webCall(request, session);
      const key = periodParam(request);
      let report: ReportOut;
      try {
        if (key === null) {
          const site = unwrap(await application.sites.get(call, siteId));
          return badPeriod(request, reply, session, site.id, site.name, '', 'Period: must be given once');
        }
        report = unwrap(await application.sites.report(call, siteId, key));
      } catch (error) {
        if (isDomainError(error) && error.code === 'invalid_request' && key !== null) {
          try {
            const site = unwrap(await application.sites.get(call, siteId));
            return badPeriod(
              request,
              reply,
              session,
              site.id,
              site.name,
              key,
              'Period: must be this month, last month, the last 30 days or a month YYYY-MM (from 1970-01)',
            );
          } catch (inner) {
            return sendRefusal(kit, request, reply, session, inner);
          }
        }
        return sendRefusal(kit, request, reply, session, error);
      }
      const { from, to } = report.stats.period;
      // A calendar month (last month, or one named) may have its monthly report: the figures it had.
      const month = key === 'last_month' || /^\d{4}-\d{2}$/.test(key as string) ? from.slice(0, 7) : null;
      const [articles, backlinks, reported] = await Promise.all([
        application.articles
          .list(call, siteId, {
            from,
            to,
            status: 'published',
            page: 1,
            per_page: LIST_LIMIT,
          })
          .then(unwrap),
        application.sites.backlinks(call, siteId, { from, to, page: 1, per_page: LIST_LIMIT }).then(unwrap),
        month ? application.reported.monthly(call, siteId, month).then(unwrap) : null,
      ]);
      const site = report.site;
      const path = `/sites/${encodeURIComponent(site.id)}`;
      const label = periodLabel(key as string);
      const body = html`${crumbs([
        ['Sites', '/sites'],
        [site.name, path],
        ['Report', null],
      ])}
<div class="report">
<h1>${site.name}: ${label}</h1>
<p class="muted" id="period-range">${longDate(from)} to ${longDate(to)} (UTC) · ${site.domain}</p>
${periodForm(site.id, key as string, true)}
<div class="site-stack">
${reported ? asReported(reported, report.comparison.now) : ''}
<section class="card" aria-labelledby="totals-heading">
<h2 id="totals-heading">Totals</h2>
${comparisonText(report)}
${totalsTable(report.comparison.now, report.comparison.before)}
</section>
<section class="card" aria-labelledby="charts-heading">
<h2 id="charts-heading">Per day</h2>
<figure class="report-figure">
${barChart({
  id: 'chart-articles',
  title: 'Articles published per day',
  days: report.days.map((d) => d.date),
  series: [
    {
      label: ['article', 'articles'],
      className: 'bar-articles',
      values: report.days.map((d) => d.articles_published),
    },
  ],
  yLabel: 'Articles',
  nothing: 'No article was published in this period.',
})}
<figcaption><span class="swatch bar-articles"></span> Articles published</figcaption>
</figure>
<figure class="report-figure">
${barChart({
  id: 'chart-backlinks',
  title: 'Backlinks acquired per day',
  days: report.days.map((d) => d.date),
  series: [
    {
      label: ['industry backlink', 'industry backlinks'],
      className: 'bar-industry',
      values: report.days.map((d) => d.backlinks_industry),
    },
    {
      label: ['local backlink', 'local backlinks'],
      className: 'bar-local',
      values: report.days.map((d) => d.backlinks_local),
    },
  ],
  yLabel: 'Backlinks',
  nothing: 'No backlink was acquired in this period.',
})}
<figcaption><span class="swatch bar-industry"></span> Industry <span class="swatch bar-local"></span> Local</figcaption>
</figure>
<details class="report-numbers"><summary>The numbers per day</summary>
<table class="site-table" id="days">
<caption>Per day, ${longDate(from)} to ${longDate(to)}</caption>
<thead><tr><th scope="col">Date</th><th scope="col" class="num">Articles published</th><th scope="col" class="num">Industry backlinks</th><th scope="col" class="num">Local backlinks</th></tr></thead>
<tbody>${report.days.map(
        (d) =>
          html`<tr><td data-label="Date">${d.date}</td><td data-label="Articles published" class="num">${d.articles_published}</td><td data-label="Industry backlinks" class="num">${d.backlinks_industry}</td><td data-label="Local backlinks" class="num">${d.backlinks_local}</td></tr>`,
      )}</tbody></table>
</details>
</section>
<section class="card" aria-labelledby="report-articles-heading">
<h2 id="report-articles-heading">Articles published</h2>
${
  articles.data.length === 0
    ? html`<p id="no-report-articles">No article was published in this period.</p>`
    : html`<table class="site-table" id="report-articles">
<thead><tr><th scope="col">Published</th><th scope="col">Title</th><th scope="col">Keyword</th><th scope="col" class="num">Words</th></tr></thead>
<tbody>${articles.data.map(
        (a) =>
          html`<tr><td data-label="Published">${day(a.published_at)}</td><td data-label="Title"><a href="/articles/${a.id}">${a.title}</a></td><td data-label="Keyword">${a.target_keyword ?? '—'}</td><td data-label="Words" class="num">${a.word_count}</td></tr>`,
      )}</tbody></table>
${more(articles.meta.total, ['article', 'articles'], hrefOf(path, { from, to, status: 'published' }))}`
}
</section>
<section class="card" aria-labelledby="report-backlinks-heading">
<h2 id="report-backlinks-heading">Backlinks acquired</h2>
${
  backlinks.data.length === 0
    ? html`<p id="no-report-backlinks">No backlink was acquired in this period.</p>`
    : html`<table class="site-table" id="report-backlinks">
<thead><tr><th scope="col">Acquired</th><th scope="col">From</th><th scope="col">Anchor</th><th scope="col">Category</th></tr></thead>
<tbody>${backlinks.data.map(
        (b) =>
          html`<tr><td data-label="Acquired">${b.acquired_on}</td><td data-label="From">${linkTo(b.source_url, b.source_domain)}</td><td data-label="Anchor">${b.anchor_text || html`<span class="muted">(${b.anchor_type.replace('_', ' ')})</span>`}</td><td data-label="Category">${b.category === 'industry' ? 'Industry' : 'Local'}</td></tr>`,
      )}</tbody></table>
${more(backlinks.meta.total, ['backlink', 'backlinks'], hrefOf(path, { from, to }))}`
}
</section>
</div>
</div>`;
      return kit.send(reply, { title: `${site.name}: ${label}`, body, session, request, wide: true });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/sites/:id/report.csv',
    { schema: { hide: true, params: SiteParams } },
    async (request, reply) => {
      const session = await kit.signedIn(request, reply);
      if (!session) return reply;
      const key = periodParam(request) ?? '';
      let report: ReportOut;
      try {
        report = unwrap(await application.sites.report(webCall(request, session), request.params.id, key));
      } catch (error) {
        return sendRefusal(kit, request, reply, session, error);
      }
      const { from, to } = report.stats.period;
      const name = `${report.site.domain}-${from}-${to}.csv`.replace(/[^A-Za-z0-9._-]/g, '_');
      return reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="${name}"`)
        .send(reportCsv(report.days));
    },
  );

  function badPeriod(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    siteId: string,
    siteName: string,
    key: string,
    message: string,
  ): FastifyReply {
    return kit.send(reply, {
      status: 400,
      title: `${siteName}: report`,
      session,
      request,
      wide: true,
      body: html`${crumbs([
        ['Sites', '/sites'],
        [siteName, `/sites/${encodeURIComponent(siteId)}`],
        ['Report', null],
      ])}
<h1>${siteName}: report</h1>
<div class="error" role="alert" id="period-error"><p>${message}. You asked for “${key}”.</p></div>
${periodForm(siteId, key, false)}`,
    });
  }
};

/**
 * What the totals compare, in words: `Up to today, 1–26 November 2026, compared with 1–26 October
 * 2026.`, or `October 2026 compared with September 2026.` once the period has ended.
 */
function comparisonText(report: ReportOut): Html {
  const { partial, now, before } = report.comparison;
  // Days against days while the month runs, its last day too (`1–30 November`, not `November`).
  const span = (s: StatsOut): string => spanText(s.period.from, s.period.to, { days: partial });
  return html`<p id="comparison">${partial ? `Up to today, ${span(now)}, compared with ${span(before)}, the same days of the month before.` : `${span(now)} compared with ${span(before)}.`}</p>`;
}

const madeDay = new Intl.DateTimeFormat('en-GB', {
  day: 'numeric',
  month: 'long',
  year: 'numeric',
  timeZone: 'UTC',
});

/**
 * A past month's monthly report as it was made: "As reported on <the day it was made>", the figures
 * it had then, and beside each the figure of today where it differs ("now: 14, 2 more since the
 * report"): a backlink recorded late, or an article's status changed, after the report was made.
 */
function asReported(r: MonthlyReportOut, now: StatsOut): Html {
  const made = new Date(r.made_at);
  const rows: [string, number, number][] = [
    ['Articles published', r.articles_published, now.articles.published],
    ['Backlinks acquired', r.backlinks.total, now.backlinks.total],
    ['Industry backlinks', r.backlinks.industry, now.backlinks.industry],
    ['Local backlinks', r.backlinks.local, now.backlinks.local],
  ];
  const moved = rows.some(([, then, today]) => then !== today);
  const since = (then: number, today: number): string => {
    const delta = today - then;
    return `${Math.abs(delta)} ${delta > 0 ? 'more' : 'fewer'} since the report`;
  };
  return html`<section class="card" aria-labelledby="as-reported-heading" id="as-reported">
<h2 id="as-reported-heading">As reported on ${madeDay.format(made)}</h2>
<p id="as-reported-note">The monthly report of ${periodLabel(r.period)} was made on ${madeDay.format(made)} at ${r.made_at.slice(11, 16)} UTC with the figures below. ${
    moved
      ? 'Some have changed since: what was recorded after the report (a backlink recorded late, an article whose status changed) counts in today’s figures, marked “now”.'
      : 'Today’s figures for the month are the same.'
  }</p>
<table class="site-table report-totals" id="reported">
<thead><tr><th scope="col">Measure</th><th scope="col" class="num">As reported</th><th scope="col" class="num">Today</th></tr></thead>
<tbody>${rows.map(
    ([label, then, today]) =>
      html`<tr><th scope="row">${label}</th><td data-label="As reported" class="num">${then}</td><td data-label="Today" class="num">${
        then === today
          ? html`<span class="muted">the same</span>`
          : html`<strong class="report-now">now: ${today}</strong> <span class="report-range">${since(then, today)}</span>`
      }</td></tr>`,
  )}</tbody></table>
</section>`;
}

/** The totals of the period (up to today while it runs) against what it is compared with. */
function totalsTable(now: StatsOut, before: StatsOut): Html {
  const rows: [string, number, number][] = [
    ['Articles published', now.articles.published, before.articles.published],
    ['Backlinks acquired', now.backlinks.total, before.backlinks.total],
    ['Industry backlinks', now.backlinks.industry, before.backlinks.industry],
    ['Local backlinks', now.backlinks.local, before.backlinks.local],
  ];
  return html`<table class="site-table report-totals" id="totals">
<thead><tr><th scope="col">Measure</th><th scope="col" class="num">This period<span class="report-range">${day(now.period.from)} to ${day(now.period.to)}</span></th><th scope="col" class="num">Compared with<span class="report-range">${day(before.period.from)} to ${day(before.period.to)}</span></th><th scope="col" class="num">Change</th></tr></thead>
<tbody>${rows.map(
    ([label, a, b]) =>
      html`<tr><th scope="row">${label}</th><td data-label="This period" class="num">${a}</td><td data-label="Compared with" class="num">${b}</td><td data-label="Change" class="num ${a > b ? 'up' : a < b ? 'down' : ''}">${change(a, b)}</td></tr>`,
  )}</tbody></table>`;
}

/** `The first 100 of 240 articles: all of them on the site page` when the list is cut. */
function more(total: number, what: readonly [string, string], href: string): Html {
  return total > LIST_LIMIT
    ? html`<p class="muted">The first ${LIST_LIMIT} of ${count(total, what)}: <a href="${href}">all of them on the site page</a>.</p>`
    : html``;
}
