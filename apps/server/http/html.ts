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
