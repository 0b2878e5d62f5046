/*
 * What the service accepts as an id or as text from any face (API, MCP, editor, ingestion). PostgreSQL
 * refuses U+0000 in text and JSON, and a lone surrogate in JSON: such input must be refused where it
 * enters, with the field named, and never reach an event. Control characters have no place in a
 * title, a reason or an id either.
 */

/**
 * An id: what the service makes (`art_06h014k2g711vw3tv0g528qpw8`) and what ingestion may name
 * (`site-42`, `wp:1234`): ASCII letters, digits and `_ . : -`, starting with a letter or a digit, at
 * most 100 characters.
 */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;
export const ID_RULE =
  'must be an id: 1 to 100 letters, digits and _ . : - (starting with a letter or digit)';

export function isId(value: unknown): value is string {
  return typeof value === 'string' && ID_PATTERN.test(value);
}

/** Any control character (C0, DEL, C1), tab and line breaks included. */
const ANY_CONTROL = /\p{Cc}/u;
/** Control characters other than tab, line feed and carriage return. */
const CONTROL_BUT_WHITESPACE = /(?![\t\n\r])\p{Cc}/u;

/**
 * Why a text cannot be accepted, or null: a lone surrogate (not Unicode), or a control character
 * (`lines: true` lets tab and line breaks through, for bodies and reasons).
 */
export function textProblem(value: string, opts: { lines: boolean }): string | null {
  if (!value.isWellFormed()) return 'must be valid Unicode (it has an unpaired surrogate)';
  if (opts.lines ? CONTROL_BUT_WHITESPACE.test(value) : ANY_CONTROL.test(value)) {
    return opts.lines
      ? 'must not contain control characters (tab and line breaks are fine)'
      : 'must not contain control characters';
  }
  return null;
}
