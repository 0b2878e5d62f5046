import { type Html, html, htmlText, raw } from '../http/html.ts';

/*
 * The layout of every server-rendered page and its stylesheet. The escaping template (`html`, `raw`)
 * is apps/server/http/html.ts, shared with the pages of other faces.
 */

export const STYLESHEET_PATH = '/web/style.css';
/** The service's icon (favicon.ts), linked from every page. */
export const FAVICON_PATH = '/favicon.svg';

/**
 * The whole page: one layout for every server-rendered page (no script, one stylesheet). Its first
 * stop is "Skip to content", to the main part (`#main`, focusable by that link alone).
 */
export function page(opts: { title: string; body: Html; header?: Html; wide?: boolean }): string {
  return htmlText(html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${opts.title} · Content Service</title>
<link rel="stylesheet" href="${STYLESHEET_PATH}">
<link rel="icon" href="${FAVICON_PATH}" type="image/svg+xml">
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="top"><a class="brand" href="/">Content Service</a>${opts.header ?? ''}</header>
<main id="main" tabindex="-1"${opts.wide ? raw(' class="wide"') : ''}>
${opts.body}
</main>
</body>
</html>
`);
}

/** The shared stylesheet: small, no external fonts or images. */
export const STYLESHEET = `
:root { color-scheme: light dark; --fg: #1d1f23; --muted: #5b606b; --bg: #f6f7f9; --card: #fff;
  --line: #d9dce2; --accent: #2456c9; --accent-fg: #fff; --danger: #b42318; --ok: #17663a; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8eaee; --muted: #a3a9b5; --bg: #15171b;
  --card: #1e2127; --line: #343842; --accent: #6d94ff; --accent-fg: #0b1020; --danger: #ff8a80; --ok: #7bd88f; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header.top { display: flex; justify-content: space-between; align-items: center; padding: .75rem 1.25rem; border-bottom: 1px solid var(--line); background: var(--card); }
header.top form { margin: 0; display: flex; align-items: center; gap: 1rem; }
header.top a { color: var(--accent); }
.brand { font-weight: 600; }
main { max-width: 34rem; margin: 2rem auto; padding: 0 1rem; }
main.wide { max-width: 64rem; }
header.top { flex-wrap: wrap; gap: .5rem 1rem; }
nav.site { display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
/* Who is signed in, and their links: on a narrow screen the name goes on a line of its own, and a
   link is never broken over two lines. */
header.top form[action="/sign-out"] { flex-wrap: wrap; gap: .25rem 1rem; }
header.top form[action="/sign-out"] span { overflow-wrap: anywhere; }
header.top form[action="/sign-out"] a, header.top form[action="/sign-out"] button { white-space: nowrap; }
nav.site a[aria-current=page] { font-weight: 600; text-decoration: none; }
.brand { color: inherit; text-decoration: none; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: .5rem; padding: 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
.card + .card { margin-top: 1rem; }
.card > h2:first-child { margin-top: 0; }
.card select#key-scope { width: 100%; padding: .55rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
label { display: block; font-weight: 600; margin: .75rem 0 .25rem; }
input[type=email], input[type=password], input[type=text] { width: 100%; padding: .55rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
button { font: inherit; padding: .55rem 1rem; border-radius: .35rem; border: 1px solid var(--line); background: var(--card); color: inherit; cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-fg); font-weight: 600; }
button.link { border: 0; background: none; color: var(--accent); padding: 0; text-decoration: underline; }
.actions { display: flex; gap: .75rem; margin-top: 1.25rem; }
.error { color: var(--danger); border: 1px solid currentColor; border-radius: .35rem; padding: .5rem .75rem; }
.notice { color: var(--ok); }
p.notice { border: 1px solid currentColor; border-radius: .35rem; padding: .5rem .75rem; }
/* A secret shown once (connect-webhooks.ts secretField): the read-only field and its Copy button. */
.copy-field { display: flex; gap: .5rem; align-items: stretch; }
.copy-field input[type=text] { flex: 1 1 auto; min-width: 0; color: var(--fg); font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.copy-field button[hidden] { display: none; }
.notice label, .notice .copy-status { color: var(--fg); }
.muted { color: var(--muted); font-size: .92rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; margin: 1rem 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
ul.access { padding-left: 1.2rem; }
code { font-size: .9em; overflow-wrap: anywhere; }
/* The support staff's timeline (staff.ts). */
table.timeline { width: 100%; border-collapse: collapse; margin: 1rem 0; font-size: .95rem; }
table.timeline caption { text-align: left; font-weight: 600; margin-bottom: .5rem; }
table.timeline th, table.timeline td, table.staff-results th, table.staff-results td { text-align: left; vertical-align: top; padding: .4rem .5rem; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
table.staff-results { width: 100%; border-collapse: collapse; margin: 1rem 0; }
form.timeline-filters { display: flex; flex-wrap: wrap; align-items: end; gap: .25rem 1rem; }
form.timeline-filters label { margin: 0; }
form.timeline-filters .actions { margin: 0; }
form.timeline-filters select, form.timeline-filters input[type=date] { padding: .45rem .5rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
nav.timeline-pages { display: flex; gap: 1rem; align-items: center; }
form.timeline-filters .check { display: flex; gap: .4rem; align-items: center; }
form.timeline-filters .check label { font-weight: 400; }
@media (max-width: 40rem) { table.timeline thead { display: none; } table.timeline td { display: block; border: 0; padding: .1rem .25rem; } table.timeline tr { display: block; border-bottom: 1px solid var(--line); padding: .4rem 0; } }

/* The article pages (articles.ts): facts, the stored text, history, word diffs. */
.article-view { display: grid; grid-template-columns: minmax(0, 1fr); gap: 1.25rem; }
.article-view h2 { font-size: 1.15rem; margin: 0 0 .5rem; }
.article-view .card > :first-child { margin-top: 0; }
.article-view h3.change-part { font-size: 1rem; margin: 1rem 0 .35rem; }
.article-view .article-head { display: flex; flex-wrap: wrap; gap: 1rem 2rem; align-items: flex-start; }
.article-view dl.facts { flex: 1 1 20rem; margin: 0; }
.article-view figure.featured { flex: 0 1 18rem; min-width: 0; max-width: 24rem; margin: 0 0 1rem; }
.article-view figure.featured img { display: block; width: 100%; height: auto; border-radius: .35rem; border: 1px solid var(--line); background: var(--bg); }
.article-view a.button { display: inline-block; padding: .55rem 1rem; border-radius: .35rem; border: 1px solid var(--line); background: var(--card); color: inherit; text-decoration: none; }
.article-view a.button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-fg); font-weight: 600; }
.article-view td a.button { padding: .25rem .6rem; font-size: .92rem; white-space: nowrap; }
.article-view .actions { flex-wrap: wrap; align-items: center; }
.article-view .actions p { margin: 0; }
.article-view nav.jump, .article-view nav.pager { display: flex; flex-wrap: wrap; gap: .5rem 1.25rem; margin-top: 1rem; }
.article-view .tag { display: inline-block; font-size: .8rem; font-weight: 600; padding: 0 .45rem; border: 1px solid var(--line); border-radius: 1rem; vertical-align: middle; }
.article-view .scroll { overflow-x: auto; position: relative; }
@media (max-width: 40rem) {
  .article-view table.history thead th { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  .article-view table.history, .article-view table.history tbody, .article-view table.history tr, .article-view table.history td { display: block; }
  .article-view table.history tr { padding: .5rem 0; border-bottom: 1px solid var(--line); }
  .article-view table.history td { border: 0; padding: .1rem 0; }
  .article-view table.history td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); }
}
.article-view table { width: 100%; border-collapse: collapse; font-size: .95rem; }
.article-view th, .article-view td { text-align: left; vertical-align: top; padding: .45rem .6rem; border-bottom: 1px solid var(--line); }
.article-view th { color: var(--muted); font-weight: 600; }
.article-view td code { word-break: break-all; }
.article-view td time { white-space: nowrap; }
.article-view .article-body { overflow-wrap: anywhere; line-height: 1.6; }
.article-view .article-body img { max-width: 100%; height: auto; }
.article-view figure.featured figcaption { margin-top: .25rem; }
.article-view .article-body a[data-service-protected] { outline: 1px dashed var(--muted); outline-offset: 1px; }
.article-view .diff { white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.7; padding: .75rem; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
.article-view ins { text-decoration: underline; text-decoration-thickness: 2px; background: color-mix(in srgb, var(--ok) 18%, transparent); }
.article-view del { text-decoration: line-through; text-decoration-thickness: 2px; background: color-mix(in srgb, var(--danger) 16%, transparent); }
.article-view .diff-gap { color: var(--muted); font-style: italic; }
.article-view .diff-legend ins, .article-view .diff-legend del { padding: 0 .2rem; }
.article-view .error p { margin: .25rem 0; }
/* The compare page (articles.ts): side by side on a wide screen, inline on a narrow one. */
.article-view form.compare-form { display: flex; flex-wrap: wrap; gap: .75rem 1rem; align-items: flex-end; margin: 0 0 1rem; }
.article-view form.compare-form .field { display: grid; gap: .25rem; }
.article-view form.compare-form select { min-height: 2.75rem; padding: .45rem .5rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
.article-view form.compare-form button { min-height: 2.75rem; }
.article-view .diff-sides { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1rem; }
.article-view .diff-sides h3.change-part { margin-top: 0; }
.article-view .compare-narrow { display: none; }
@media (max-width: 48rem) { .article-view .compare-wide { display: none; } .article-view .compare-narrow { display: block; } }
.article-view .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
/* "View as of…" (as-of.ts): a date and a time, UTC, on the article and staff pages. */
form.as-of-form { margin: 0 0 1rem; }
form.as-of-form p { margin: 0 0 .5rem; }
form.as-of-form .as-of-fields { display: flex; flex-wrap: wrap; gap: .75rem 1rem; align-items: flex-end; }
form.as-of-form .field { display: grid; gap: .25rem; }
form.as-of-form label { margin: 0; }
form.as-of-form input { min-height: 2.75rem; padding: .45rem .5rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
form.as-of-form input[aria-invalid=true] { border-color: var(--danger); border-width: 2px; }
form.as-of-form button { min-height: 2.75rem; }
.as-of-stated a, .as-of-view a, form.as-of-form a { color: var(--accent); }
.as-of-stated .as-of-now { color: var(--fg); }
h2.as-of-title { margin-top: 1rem; }
/* The featured image page (featured-image.ts). */
.image-form input[type=url] { width: 100%; padding: .55rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
.image-form input[type=file] { font: inherit; max-width: 100%; }
.image-form p.muted { margin: 0 0 .4rem; }
.image-form [aria-invalid=true] { border: 2px solid var(--danger); border-radius: .35rem; }
/* The editor (/articles/{id}/edit) and word diffs. */
.editor { display: grid; grid-template-columns: minmax(0, 1fr) 18rem; gap: 1rem; align-items: start; }
@media (max-width: 760px) { .editor { grid-template-columns: minmax(0, 1fr); } }
.editor textarea { width: 100%; min-height: 24rem; padding: .55rem .6rem; font: .9rem/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; resize: vertical; }
.editor p#body-help { margin: 0 0 .4rem; }
.editor .actions { align-items: center; flex-wrap: wrap; }
.protected-links ul { list-style: none; padding: 0; margin: 0; }
.protected-links li { border-top: 1px solid var(--line); padding: .6rem 0; display: grid; gap: .15rem; }
.protected-links li.refused { border-left: 3px solid var(--danger); padding-left: .6rem; }
.protected-links .link-text { font-weight: 600; }
.protected-links .refused-mark { color: var(--danger); font-size: .92rem; }
.protected-links h2, .stale h2, .saved h2, .edit-check h2 { font-size: 1.15rem; margin: 0 0 .75rem; }
.stale, .edit-check { border: 1px solid var(--line); border-radius: .35rem; padding: .75rem 1rem; margin: 1rem 0; }
.stale h3, .edit-check h3 { font-size: 1rem; margin: 1rem 0 .25rem; }
.edit-check .diff, .stale .diff { max-height: none; }
.error ul { margin: .25rem 0 0; padding-left: 1.2rem; }
.error p { margin: 0; }
.notice-box { color: var(--ok); border: 1px solid currentColor; border-radius: .35rem; padding: .5rem .75rem; margin-bottom: 1rem; }
.notice-box p { margin: .25rem 0; }
.notice-box h2, .notice-box table { color: var(--fg); }
.diff { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; padding: .6rem .75rem; max-height: 24rem; overflow-y: auto; }
ins { color: var(--ok); background: color-mix(in srgb, var(--ok) 14%, transparent); text-decoration: underline; }
del { color: var(--danger); background: color-mix(in srgb, var(--danger) 12%, transparent); text-decoration: line-through; }
.elided { color: var(--muted); }
.table-scroll { overflow-x: auto; }
.table-scroll table { border-collapse: collapse; width: 100%; font-size: .92rem; }
.table-scroll th, .table-scroll td { text-align: left; vertical-align: top; padding: .35rem .5rem; border-bottom: 1px solid var(--line); }
/* Sites, a site and its period report (/sites, /sites/{id}, /sites/{id}/report) */
:root { --chart-2: #b4530b; }
@media (prefers-color-scheme: dark) { :root { --chart-2: #f59e4b; } }
.site-stack { display: grid; gap: 1.25rem; margin-top: 1.25rem; }
.site-stack > * { min-width: 0; }
.site-stack h2 { font-size: 1.15rem; margin: 0 0 .75rem; }
.site-stack a, .site-crumbs a, .site-links a, .site-table a, .site-filters a, .site-pager a, #no-sites a { color: var(--accent); }
.site-crumbs ol { list-style: none; display: flex; flex-wrap: wrap; gap: .25rem; margin: 0 0 .75rem; padding: 0; font-size: .92rem; }
.site-crumbs li + li::before { content: "›"; margin-right: .25rem; color: var(--muted); }
table.site-table { width: 100%; border-collapse: collapse; font-size: .95rem; }
.site-table caption { text-align: left; color: var(--muted); font-size: .92rem; padding-bottom: .5rem; }
.site-table th, .site-table td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
.site-table thead th { font-size: .85rem; color: var(--muted); font-weight: 600; vertical-align: bottom; }
.site-table .num { text-align: right; font-variant-numeric: tabular-nums; }
.site-table td { overflow-wrap: anywhere; }
.site-filters { display: flex; flex-wrap: wrap; gap: .75rem 1rem; align-items: flex-end; margin: 0 0 1rem; }
.site-filters label { margin: 0 0 .25rem; }
.site-filters input, .site-filters select { min-height: 2.6rem; padding: .45rem .5rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
.site-filter-actions { display: flex; flex-wrap: wrap; gap: .75rem; align-items: center; }
.site-pager { display: flex; justify-content: space-between; align-items: center; gap: 1rem; margin-top: 1rem; }
.site-status { font-size: .85rem; padding: .05rem .5rem; border-radius: 1rem; border: 1px solid var(--line); white-space: nowrap; }
.site-status-published { color: var(--ok); border-color: currentColor; }
#filter-errors ul { margin: .25rem 0 0; padding-left: 1.2rem; }
#filter-errors p, #period-error p { margin: 0; }
#filter-errors, #period-error { margin: 0 0 1rem; }
@media (max-width: 40rem) {
  .site-table thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  .site-table, .site-table caption, .site-table tbody, .site-table tr, .site-table td, .site-table tbody th { display: block; }
  .site-table tr { border-bottom: 1px solid var(--line); padding: .5rem 0; }
  .site-table td, .site-table tbody th { border: 0; padding: .1rem 0; }
  .site-table td { display: flex; justify-content: space-between; gap: 1rem; text-align: right; }
  .site-table td::before { content: attr(data-label); color: var(--muted); font-size: .85rem; text-align: left; flex: none; }
  .site-table td:first-child { display: block; text-align: left; font-weight: 600; }
  .site-table td:first-child::before { content: none; }
  .site-stack .card { padding: 1rem; }
}
.report-range { display: block; font-weight: 400; font-size: .8rem; white-space: nowrap; }
.report-totals td.up { color: var(--ok); }
.report-totals td.down { color: var(--danger); }
.report-figure { margin: 0 0 1.5rem; }
.report-figure svg.chart { display: block; width: 100%; max-width: 52rem; height: auto; }
.report-figure figcaption { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; font-size: .92rem; color: var(--muted); margin-top: .25rem; }
.swatch { display: inline-block; width: .9rem; height: .9rem; border-radius: .15rem; }
.swatch.bar-articles, .swatch.bar-industry { background: var(--accent); }
.swatch.bar-local { background: var(--chart-2); }
.chart .bar-articles, .chart .bar-industry { fill: var(--accent); }
.chart .bar-local { fill: var(--chart-2); }
.chart rect { stroke: var(--card); stroke-width: .5; }
.chart-grid { stroke: var(--line); stroke-width: 1; }
.chart-axis { stroke: var(--muted); stroke-width: 1; }
.chart-tick { fill: var(--muted); font-size: 13px; }
.chart-axis-label { fill: var(--fg); font-size: 13px; }
.chart-empty { fill: var(--muted); font-size: 16px; }
/* A chart fits its card; on a narrower screen its text is set larger in the chart's own units (640 wide): 11 px or more from 480 px up, 13 px on a 390 px phone. */
@media (max-width: 48rem) { .chart-tick, .chart-axis-label { font-size: 17px; } .chart-empty { font-size: 20px; } }
@media (max-width: 30rem) { .chart-tick, .chart-empty { font-size: 26px; } .chart-axis-label { display: none; } }
/* The Connect Site page's tables (assistants, keys, webhook endpoints, deliveries) are site tables: one block per row on a phone. */
.site-table .actions { margin: 0; gap: .5rem; justify-content: flex-end; }
.site-table form { margin: 0; }
.site-table button { white-space: nowrap; overflow-wrap: normal; }
.site-table td:first-child .muted { font-weight: 400; }
#webhook-deliveries td { overflow-wrap: break-word; }
#assistants, #keys, #webhook-endpoints { margin-top: 1rem; }
#webhook-error { scroll-margin-top: 3.5rem; }
#webhook-error a { color: inherit; }
.report-numbers summary { cursor: pointer; color: var(--accent); margin: .25rem 0 .75rem; }
@media print {
  :root:has(.report) { color-scheme: light; --fg: #1d1f23; --muted: #5b606b; --bg: #fff; --card: #fff; --line: #d9dce2; --accent: #2456c9; --chart-2: #b4530b; --ok: #17663a; --danger: #b42318; }
  body:has(.report) header.top, .report .report-controls, main:has(.report) .site-crumbs { display: none; }
  body:has(.report) { font-size: 11pt; }
  main.wide:has(.report) { max-width: none; margin: 0; padding: 0; }
  .report .card { border: 0; padding: 0; break-inside: avoid; }
  .report-figure { overflow: visible; break-inside: avoid; }
  .report-figure svg.chart { min-width: 0; max-width: 100%; }
  .report-numbers:not([open]) { display: none; }
}

/* The search box of every account page's header, and the search page (/search). */
header.top form.search-box { gap: .4rem; flex: 1 1 16rem; max-width: 26rem; min-width: 0; }
header.top form.search-box label { margin: 0; font-weight: 600; white-space: nowrap; }
header.top form.search-box input { flex: 1 1 6rem; width: 6rem; min-width: 0; min-height: 2.5rem; padding: .4rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
header.top form.search-box button { min-height: 2.5rem; padding: .4rem .8rem; }
form.search-filters .search-words { grid-column: 1 / -1; }
ol.search-results { list-style: none; margin: 0; padding: 0; }
ol.search-results li { padding: .75rem 0; border-bottom: 1px solid var(--line); }
ol.search-results h3 { font-size: 1.05rem; margin: 0 0 .2rem; }
ol.search-results a { color: var(--accent); }
ol.search-results p { margin: .2rem 0; overflow-wrap: anywhere; }
.snippet mark { background: #ffe58a; color: #1d1f23; border-radius: .15rem; padding: 0 .1rem; }
/* On a phone the box takes the header's width, and its label is left to screen readers (the field's
   placeholder and the Search button say what it is), so that the field shows its whole placeholder. */
@media (max-width: 40rem) {
  header.top form.search-box { max-width: none; flex-basis: 100%; }
  header.top form.search-box label { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
}
/* The activity log (/activity): its filters, its table (stacked on a phone), its pages. */
form.filters { display: grid; grid-template-columns: repeat(auto-fit, minmax(9rem, 1fr)); gap: 0 1rem; align-items: start; }
form.filters label { margin-top: .5rem; }
form.filters input, form.filters select { width: 100%; min-height: 2.75rem; padding: .5rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
form.filters [aria-invalid=true] { border-color: var(--danger); }
form.filters .actions { grid-column: 1 / -1; align-items: center; margin-top: 1rem; }
.field-error { color: var(--danger); font-size: .9rem; margin: .25rem 0 0; }
.activity-results { margin-top: 1.25rem; }
.activity-page a { color: var(--accent); }
.activity-page h2 { font-size: 1.1rem; margin: 1.25rem 0 .5rem; }
.activity-page .card > h2:first-child { margin-top: 0; }
.log-scroll { overflow-x: auto; }
table.activity-log { width: 100%; border-collapse: collapse; font-size: .92rem; }
table.activity-log caption { text-align: left; color: var(--muted); padding-bottom: .5rem; }
table.activity-log th, table.activity-log td { text-align: left; vertical-align: top; padding: .45rem .5rem; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
table.activity-log th { font-weight: 600; white-space: nowrap; border-bottom-width: 2px; }
table.activity-log time, table.activity-log td[data-label=Revision], table.activity-log td[data-label=Status] { white-space: nowrap; }
table.activity-log td[data-label=Site], table.activity-log td[data-label=Who] { overflow-wrap: break-word; }
table.activity-log td[data-label="Request id"] code { font-size: .8em; overflow-wrap: normal; word-break: break-all; }
table.activity-log .refused { color: var(--danger); }
table.activity-log .ok { color: var(--ok); }
nav.pager { display: flex; flex-wrap: wrap; justify-content: space-between; align-items: center; gap: .5rem 1rem; margin-top: 1rem; }
nav.pager span { color: var(--muted); }
@media (max-width: 40rem) {
  table.activity-log thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  table.activity-log, table.activity-log tbody, table.activity-log tr, table.activity-log td { display: block; }
  table.activity-log caption { display: block; }
  table.activity-log tr { border-bottom: 2px solid var(--line); padding: .5rem 0; }
  table.activity-log td { display: grid; grid-template-columns: 6.5rem 1fr; gap: .5rem; border: 0; padding: .2rem 0; }
  table.activity-log td::before { content: attr(data-label); color: var(--muted); }
}
/* The rich editor (apps/web-client/editor.ts), when its script runs. */
.rich-editor-content { min-height: 18rem; padding: .6rem .75rem; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; white-space: pre-wrap; overflow-wrap: anywhere; }
.rich-editor-content:focus { outline: 2px solid var(--accent); outline-offset: 1px; }
.rich-editor-content p { margin: 0 0 .75rem; }
.rich-editor-content [data-service-protected] { outline: 1px dashed var(--muted); outline-offset: 1px; cursor: grab; }
.rich-editor-content [data-service-protected].ProseMirror-selectednode { outline: 2px solid var(--accent); }
.rich-toolbar { display: flex; flex-wrap: wrap; gap: .25rem; padding: .35rem; margin-bottom: .35rem; border: 1px solid var(--line); border-radius: .35rem; background: var(--card); }
.rich-toolbar button { padding: .3rem .6rem; min-width: 2.5rem; }
.rich-toolbar button[aria-pressed=true] { background: var(--accent); border-color: var(--accent); color: var(--accent-fg); }
.rich-toolbar button[aria-disabled=true] { color: var(--muted); cursor: default; }
.rich-toolbar button:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
#tool-bold { font-weight: 700; }
#tool-italic { font-style: italic; }
/* What the rich editor says (a refusal, what a deletion kept): pinned to the bottom of the window while the editor is in view, so it is seen wherever the caret is. */
.rich-editor-status { position: sticky; bottom: .5rem; z-index: 3; margin: .35rem 0 0; padding: .5rem .75rem; background: var(--card); border: 1px solid var(--danger); border-left-width: 4px; border-radius: .35rem; box-shadow: 0 .25rem .75rem rgb(0 0 0 / .2); }
.rich-editor-status:empty { border: 0; padding: 0; box-shadow: none; }
.link-dialog { max-width: min(30rem, calc(100vw - 2rem)); border: 1px solid var(--line); border-radius: .5rem; background: var(--card); color: var(--fg); padding: 1.25rem; }
.link-dialog h2 { margin-top: 0; }
.link-dialog input[type=url] { width: 100%; padding: .55rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
.link-dialog::backdrop { background: rgb(0 0 0 / .4); }
.editor-form .repair { margin: .75rem 0 1rem; }
.editor-form .repair p { margin: .35rem 0 0; }
/* The editor's revisions panel (a <details>; a drawer with the script), draft offer and save status. */
.revisions-panel { margin-top: 1.5rem; border-top: 1px solid var(--line); padding-top: .75rem; }
.revisions-panel summary { cursor: pointer; font-weight: 600; }
.revision-list { list-style: none; margin: .5rem 0 0; padding: 0; }
.revision-list li { border-top: 1px solid var(--line); padding: .5rem 0; }
.revision-list p { margin: .1rem 0; overflow-wrap: anywhere; }
.revision-list .tag { font-size: .8rem; font-weight: 600; padding: 0 .45rem; border: 1px solid var(--line); border-radius: 1rem; }
.revision-actions { display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
#revisions-list a, .draft-banner a, .save-status a { color: var(--accent); }
dialog.drawer { position: fixed; inset: 0 0 0 auto; margin: 0; width: min(28rem, 100vw); height: 100%; max-height: none; max-width: 100vw; border: 0; border-left: 1px solid var(--line); background: var(--card); color: var(--fg); padding: 1rem 1.25rem; overflow-y: auto; }
dialog.drawer::backdrop { background: rgb(0 0 0 / .35); }
.drawer-head { display: flex; justify-content: space-between; align-items: center; gap: 1rem; }
.drawer-head h2 { margin: 0; }
@media (max-width: 30rem) { dialog.drawer { width: 100vw; border-left: 0; } }
.draft-banner { border: 2px solid var(--accent); border-radius: .35rem; padding: .75rem 1rem; margin: 0 0 1rem; }
.draft-banner h2 { font-size: 1.1rem; margin: 0 0 .35rem; }
.draft-banner p { margin: .25rem 0; }
.draft-banner .actions { margin-top: .75rem; flex-wrap: wrap; }
.save-status { position: sticky; bottom: .5rem; z-index: 2; margin: .75rem 0 0; padding: .5rem .75rem; border: 1px solid currentColor; border-radius: .35rem; background: var(--card); color: var(--ok); }
.save-status.failed { color: var(--danger); }
.save-status:empty { display: none; }
/* One pinned line at a time: while the rich editor says something, the save's line stays in its place under the buttons. */
.editor-form:has(.rich-editor-status:not(:empty)) .save-status { position: static; }
/* The API reference (/docs, api-reference.ts): its operations beside a sticky navigation with the filter; schemas as nested lists; tables stacked on a phone. */
.api-reference a { color: var(--accent); }
.api-reference code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.api-layout { display: grid; grid-template-columns: 17rem minmax(0, 1fr); gap: 1.25rem; align-items: start; }
.api-nav { position: sticky; top: 1rem; max-height: calc(100vh - 2rem); overflow-y: auto; padding: 1rem; }
.api-nav h2 { font-size: 1.05rem; margin: 0 0 .5rem; }
.api-nav h3.api-nav-tag { font-size: .95rem; margin: 1rem 0 .25rem; }
.api-nav-ops { list-style: none; margin: 0; padding: 0; font-size: .9rem; }
.api-nav-ops li { padding: .25rem 0; }
.api-nav-ops a { display: flex; gap: .4rem; align-items: baseline; }
.api-nav-ops .api-path { font: .82rem/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: break-word; min-width: 0; }
.api-nav-ops .nav-summary { display: block; color: var(--muted); font-size: .82rem; }
.api-filter label { margin: 0 0 .25rem; }
.api-filter-row { display: flex; gap: .4rem; }
.api-filter input { flex: 1 1 6rem; min-width: 0; min-height: 2.5rem; padding: .4rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
.api-filter button { min-height: 2.5rem; padding: .4rem .8rem; }
#api-filter-count { font-size: .92rem; margin: .5rem 0 0; }
.api-ops, .api-tag { display: grid; gap: 1rem; min-width: 0; }
.api-tag > h2 { margin: .75rem 0 0; }
.api-tag > p { margin: 0; }
.api-intro h3 { font-size: 1rem; margin: 1.25rem 0 .35rem; }
.api-intro dl.api-headers { grid-template-columns: minmax(0, max-content) minmax(0, 1fr); }
.api-op, .api-intro h3, .api-tag, .api-headers dt, .api-errors tr { scroll-margin-top: 1rem; }
.api-op h3 { font-size: 1.1rem; margin: 0 0 .5rem; display: flex; flex-wrap: wrap; gap: .25rem .6rem; align-items: baseline; }
.api-op h4 { font-size: 1rem; margin: 1.25rem 0 .4rem; }
.api-op .op-summary { font-weight: 600; margin: 0 0 .5rem; }
.api-op .op-description p { margin: 0 0 .5rem; }
.api-path { overflow-wrap: break-word; min-width: 0; }
.method { display: inline-block; min-width: 3.7rem; text-align: center; font: 700 .78rem/1.6 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; border: 1px solid currentColor; border-radius: .3rem; padding: 0 .3rem; flex: none; }
.method-get { color: var(--ok); }
.method-post { color: var(--accent); }
.method-put, .method-patch { color: var(--chart-2); }
.method-delete { color: var(--danger); }
.schema-block { margin: .25rem 0 .5rem; }
ul.schema { list-style: none; margin: .35rem 0 0; padding: 0 0 0 .9rem; border-left: 2px solid var(--line); }
ul.schema > li { padding: .3rem 0; }
ol.schema-choices { margin: .35rem 0 0; padding-left: 1.4rem; }
ol.schema-choices > li { padding: .2rem 0; }
.schema-line { overflow-wrap: anywhere; }
.schema-prop { font-weight: 600; }
.schema-type { color: var(--muted); }
.schema-name { font-weight: 600; color: var(--fg); }
.schema-desc { margin: .1rem 0; overflow-wrap: anywhere; }
.schema-facts { color: var(--muted); font-size: .88rem; overflow-wrap: anywhere; }
.api-reference .tag { font-size: .75rem; font-weight: 600; padding: 0 .4rem; border: 1px solid var(--line); border-radius: 1rem; white-space: nowrap; color: var(--fg); }
.api-table table { width: 100%; border-collapse: collapse; font-size: .92rem; }
.api-table th, .api-table td { text-align: left; vertical-align: top; padding: .4rem .5rem; border-bottom: 1px solid var(--line); overflow-wrap: break-word; }
.api-table td:not(:last-child), .api-table th { white-space: nowrap; }
.api-table th { color: var(--muted); font-weight: 600; }
ul.responses { list-style: none; margin: 0; padding: 0; }
ul.responses > li { border-top: 1px solid var(--line); padding: .5rem 0; }
.media-type, .response-headers, .shared-errors, .op-id { margin: .35rem 0; font-size: .92rem; overflow-wrap: anywhere; }
@media (max-width: 56rem) { .api-layout { grid-template-columns: minmax(0, 1fr); } .api-nav { position: static; max-height: none; overflow: visible; } }
@media (max-width: 40rem) {
  .api-table thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  .api-table table, .api-table tbody, .api-table tr, .api-table td { display: block; }
  .api-table tr { border-bottom: 1px solid var(--line); padding: .4rem 0; }
  .api-table td, .api-table td:not(:last-child) { position: relative; border: 0; padding: .1rem 0 .1rem 6.5rem; min-height: 1.6rem; white-space: normal; }
  .api-table td::before { content: attr(data-label); position: absolute; left: 0; width: 6rem; color: var(--muted); }
  .api-params td[data-label=Name], .api-params td[data-label=In], .api-params td[data-label=Required], .api-params td[data-label=Type] { display: inline; padding: 0; }
  .api-params td[data-label=Name]::before { content: none; }
  .api-params td[data-label=In]::before, .api-params td[data-label=Type]::before { content: " · "; position: static; width: auto; }
  .api-params td[data-label=Required]::before { content: " · required: "; position: static; width: auto; }
  .api-params td[data-label=Description] { padding: .2rem 0 0; }
  .api-params td[data-label=Description]::before { content: none; }
  .api-intro dl.api-headers { grid-template-columns: minmax(0, 1fr); }
  .api-intro dl.api-headers dd { margin-bottom: .5rem; }
}
/* Accessibility (axe-core): text for screen readers only. */
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
/* The skip link: off screen until it has the focus; the main part it leads to shows no focus ring. */
.skip-link { position: absolute; left: .5rem; top: -4rem; z-index: 10; padding: .5rem .9rem; background: var(--card); color: var(--accent); border: 2px solid var(--accent); border-radius: .35rem; font-weight: 600; }
.skip-link:focus { top: .5rem; }
main:focus { outline: none; }
`;
