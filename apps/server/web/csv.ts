/*
 * The one CSV writer of every export (the staff timeline, the site report): RFC 4180, CRLF, with
 * OWASP's guard against formula injection (CSV injection). A spreadsheet reads a cell that starts with
 * `=`, `+`, `-` or `@` (or their full-width forms, which some spreadsheets take for them) as a formula,
 * and splits a line on its locale's separator (`,`, `;` or a tab) wherever it meets one outside a quoted
 * cell. So a text field
 *
 * - that starts with one of those (after spaces, or with a tab, a carriage return or a line feed) is
 *   written behind a `'`, which spreadsheets show as text;
 * - that holds `,`, `;`, `"`, a tab or a line break is quoted (its quotes doubled);
 * - where one of those separators or a quote is followed by one of those characters gets a `'` there
 *   too: a spreadsheet that splits on `;` does not honour a quote that opens a `,` field in mid-cell,
 *   so the part after `;` would be a cell of its own.
 *
 * Numbers are written as they are: a negative count is no formula.
 */

const TRIGGER = '[=+\\-@\\uFF1D\\uFF0B\\uFF0D\\uFF20]';
const FORMULA_START = new RegExp(`^(?:\\s*${TRIGGER}|[\\t\\r\\n])`, 'u');
const FORMULA_AFTER_SEPARATOR = new RegExp(`[,;"\\t\\r\\n]\\s*(?=${TRIGGER})`, 'gu');
const NEEDS_QUOTES = /[",;\t\r\n]/;

/** One CSV field: nothing for null, a number as it is, text guarded and quoted as above. */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  const raw = String(value);
  // The start is judged on the value as given: the guard after a separator may stand between its
  // leading spaces (a carriage return among them) and the trigger.
  let text = raw.replace(FORMULA_AFTER_SEPARATOR, (separator) => `${separator}'`);
  if (FORMULA_START.test(raw)) text = `'${text}`;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** A CSV document: the header, then one line per row, each ended by CRLF. */
export function csvText(header: readonly string[], rows: readonly (readonly unknown[])[]): string {
  return [header, ...rows].map((row) => `${row.map(csvField).join(',')}\r\n`).join('');
}
