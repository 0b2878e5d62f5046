import { DomainError } from './errors.ts';

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

const UNPAIRED = 'contains an unpaired surrogate (not valid Unicode text)';

/**
 * Why a text cannot be accepted, naming the character (`contains the control character U+0000`), or
 * null: a control character (C0, DEL, C1; with `lines: true` tab, line feed and carriage return are
 * fine, for bodies and reasons), or a lone surrogate (not Unicode).
 */
export function textProblem(value: string, opts: { lines: boolean }): string | null {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code <= 0x1f || (code >= 0x7f && code <= 0x9f)) {
      if (opts.lines && (code === 0x09 || code === 0x0a || code === 0x0d)) continue;
      return `contains the control character U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
    }
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return UNPAIRED;
    }
    if (code >= 0xdc00 && code <= 0xdfff) return UNPAIRED;
  }
  return null;
}

/** Refuses text with a control character or a lone surrogate as `invalid_request`, naming the field. */
export function requireText(name: string, value: string | null | undefined, opts: { lines: boolean }): void {
  if (value === null || value === undefined) return;
  const problem = textProblem(value, opts);
  if (problem) {
    throw new DomainError('invalid_request', `The ${name} ${problem}`, [
      { in: 'body', name, message: problem },
    ]);
  }
}
