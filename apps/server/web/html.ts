/*
 * A tiny HTML template helper that escapes by default: `html\`<p>${name}</p>\`` escapes `name`; only
 * another `html` fragment (or `raw` of a trusted constant) goes in unescaped. Arrays are joined.
 */

const SAFE: unique symbol = Symbol('safe html');

export type Html = { readonly [SAFE]: string };

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function isHtml(value: unknown): value is Html {
  return typeof value === 'object' && value !== null && SAFE in value;
}

function render(value: unknown): string {
  if (value === null || value === undefined || value === false) return '';
  if (isHtml(value)) return value[SAFE];
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** Trusted markup, as is. Never pass anything that came from a request or the database. */
export function raw(markup: string): Html {
  return { [SAFE]: markup };
}

/** A template whose interpolations are escaped (unless they are `Html` themselves). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return raw(out);
}

export function htmlText(fragment: Html): string {
  return fragment[SAFE];
}

export const STYLESHEET_PATH = '/web/style.css';

/** The whole page: one layout for every server-rendered page (no script, one stylesheet). */
export function page(opts: { title: string; body: Html; header?: Html; wide?: boolean }): string {
  return htmlText(html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${opts.title} · Content Service</title>
<link rel="stylesheet" href="${STYLESHEET_PATH}">
</head>
<body>
<header class="top"><a class="brand" href="/">Content Service</a>${opts.header ?? ''}</header>
<main${opts.wide ? raw(' class="wide"') : ''}>
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
nav.site a[aria-current=page] { font-weight: 600; text-decoration: none; }
.brand { color: inherit; text-decoration: none; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: .5rem; padding: 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 1rem; }
label { display: block; font-weight: 600; margin: .75rem 0 .25rem; }
input[type=email], input[type=password], input[type=text] { width: 100%; padding: .55rem .6rem; font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: .35rem; }
button { font: inherit; padding: .55rem 1rem; border-radius: .35rem; border: 1px solid var(--line); background: var(--card); color: inherit; cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-fg); font-weight: 600; }
button.link { border: 0; background: none; color: var(--accent); padding: 0; text-decoration: underline; }
.actions { display: flex; gap: .75rem; margin-top: 1.25rem; }
.error { color: var(--danger); border: 1px solid currentColor; border-radius: .35rem; padding: .5rem .75rem; }
.notice { color: var(--ok); }
p.notice { border: 1px solid currentColor; border-radius: .35rem; padding: .5rem .75rem; }
.muted { color: var(--muted); font-size: .92rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; margin: 1rem 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
ul.access { padding-left: 1.2rem; }
code { font-size: .9em; overflow-wrap: anywhere; }

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
`;
